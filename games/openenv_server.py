"""An OpenEnv-compatible server over the games, one episode per session: `s3gym-openenv-server --port 8000`.

Needs the `openenv` extra (Starlette, uvicorn, websockets). It listens on 127.0.0.1 unless told otherwise and
speaks OpenEnv's protocol (openenv-core 0.3.0), so OpenEnv's own client plays the games unchanged:

    from openenv.core import GenericEnvClient
    with GenericEnvClient(base_url="http://127.0.0.1:8000").sync() as env:
        result = env.reset(game="trust", mode="eval", seed=1_000_000)
        result = env.step({"action": "collaborate"})

- WebSocket `/ws` (what OpenEnv's EnvClient uses): one connection is one session. Messages
  `{"type": "reset", "data": {game, mode, seed, episode_id}}`, `{"type": "step", "data": {"action": TEXT}}`,
  `{"type": "state"}`, `{"type": "close"}`; replies `{"type": "observation", "data": {"observation", "reward",
  "done"}}`, `{"type": "state", "data": ...}` or `{"type": "error", "data": {"message", "code"}}` (OpenEnv's codes).
- Plain HTTP, for clients without WebSockets: `POST /reset` opens a session (or, given a `session_id`, starts
  a new episode in it) and answers with its `session_id`; `POST /step {"session_id", "action": {"action"}}`,
  `GET /state?session_id=`, `POST /close {"session_id"}`. Errors are `{"detail": ONE LINE, "code"}` with a
  4xx status. `GET /health`, `/schema` and `/metadata` answer as OpenEnv's do.

The game and mode are chosen at reset, or fixed per server (`--game`, `--mode`: a reset naming another is
refused). `seed` is the game seed and must belong to the mode's range (s3gym_games.seeds: eval mode plays
evaluation seeds only, explore mode exploration seeds only); without one a seed of the range is drawn.
A session holds one episode at a time; a step after its end is refused. At most `--max-sessions` sessions
are open, and one idle for `--idle-seconds` is closed, so no client can grow the server's memory without
bound. The observation carries the game's text, the feedback, `valid`, `terminated`/`truncated` (as in
s3gym_games.base.StepResult) and, once the episode is over, the verifier's `score`; the reward is the step's
verifier reward, for the trainer (it is not part of the text a model reads).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import secrets
import socket
import sys
import time
from collections import OrderedDict
from dataclasses import dataclass
from importlib import metadata
from typing import Any, Callable, Optional

try:
    import uvicorn
    from pydantic import BaseModel, ConfigDict, Field, ValidationError
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route, WebSocketRoute
    from starlette.websockets import WebSocket, WebSocketDisconnect
except ImportError as error:  # the optional extra is missing: say which one
    raise ImportError("s3gym_games.openenv_server needs the openenv extra: pip install 's3gym-games[openenv]' "
                      "(or 's3gym[openenv]')") from error

import s3gym_games as games
from s3gym_games.reply import MAX_ACTION_CHARS
from s3gym_games.seeds import DRAWN_SEEDS, require_seed_of

DEFAULT_PORT = 8000
DEFAULT_MAX_SESSIONS = 64
DEFAULT_IDLE_SECONDS = 300.0
MAX_MESSAGE_BYTES = 64 * 1024  # a request or WebSocket message; the longest action is MAX_ACTION_CHARS


class ServeError(Exception):
    """A client's mistake: a one-line message, OpenEnv's error code and the HTTP status."""

    def __init__(self, message: str, code: str = "EXECUTION_ERROR", status: int = 400) -> None:
        super().__init__(" ".join(str(message).split()))
        self.code, self.status = code, status


# ----- the messages: OpenEnv's Action / Observation / State shapes with the games' fields -------------------
class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid")


class GameAction(_Strict):
    """A step's action: the action text of the reply contract (s3gym_games.reply.parse_reply gives it)."""

    action: str = Field(max_length=MAX_ACTION_CHARS, description="the action text, e.g. 'collaborate'")
    metadata: dict[str, Any] = Field(default_factory=dict)


class ResetOptions(_Strict):
    """What a reset may choose: the game and mode (unless the server fixes them), the game seed, an id."""

    game: Optional[str] = None
    mode: Optional[str] = None
    seed: Optional[int] = Field(default=None, ge=0, description="the game seed, in the mode's range")
    episode_id: Optional[str] = Field(default=None, max_length=255)


class GameObservation(BaseModel):
    """What the agent sees after a reset or a step (rules and answer format at reset only)."""

    text: str
    feedback: Optional[str] = None
    valid: Optional[bool] = None
    game: str
    mode: str
    game_seed: int
    step: int
    max_steps: int
    terminated: bool = False
    truncated: bool = False
    score: Optional[float] = Field(default=None, description="the verifier's final score, once the episode is over")
    rules: Optional[str] = None
    answer_format: Optional[str] = None


class GameState(BaseModel):
    """A session's episode: OpenEnv's State fields (episode_id, step_count) and the game's."""

    episode_id: Optional[str] = None
    step_count: int = 0
    game: Optional[str] = None
    mode: Optional[str] = None
    game_seed: Optional[int] = None
    terminated: bool = False
    truncated: bool = False
    score: Optional[float] = None


class _HttpReset(ResetOptions):
    session_id: Optional[str] = None


class _HttpStep(_Strict):
    session_id: str
    action: dict[str, Any]
    timeout_s: Optional[float] = None  # OpenEnv's StepRequest fields; a game step is instant
    request_id: Optional[str] = None


class _HttpClose(_Strict):
    session_id: str


def _validated(model: type[BaseModel], data: Any, what: str) -> Any:
    """`data` as `model`, or a one-line ServeError naming each bad field."""
    try:
        return model.model_validate(data if data is not None else {})
    except ValidationError as error:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc']) or what}: {e['msg']}" for e in error.errors())
        raise ServeError(f"bad {what}: {problems}", "VALIDATION_ERROR", 422) from None


# ----- sessions ------------------------------------------------------------------------------------------
@dataclass
class Session:
    """One client's session: at most one episode at a time."""

    id: str
    last_used: float
    game: Optional[games.Game] = None
    episode_id: Optional[str] = None


class Sessions:
    """The open sessions: at most `cap`; one unused for `idle_seconds` is dropped (checked at every open and
    lookup, so expired episodes never pile up past the cap)."""

    def __init__(self, cap: int, idle_seconds: float, clock: Callable[[], float] = time.monotonic) -> None:
        self.cap, self.idle_seconds, self.clock = int(cap), float(idle_seconds), clock
        self._open: OrderedDict[str, Session] = OrderedDict()  # least recently used first

    def __len__(self) -> int:
        return len(self._open)

    def expire(self) -> None:
        cutoff = self.clock() - self.idle_seconds
        while self._open and next(iter(self._open.values())).last_used < cutoff:
            self._open.popitem(last=False)

    def open(self) -> Session:
        self.expire()
        if len(self._open) >= self.cap:
            raise ServeError(f"server at capacity: {self.cap} sessions open; close one or retry after "
                             f"{self.idle_seconds:g} s (idle sessions are closed)", "CAPACITY_REACHED", 503)
        session = Session(secrets.token_urlsafe(16), self.clock())
        self._open[session.id] = session
        return session

    def touch(self, session_id: str) -> bool:
        """Mark the session used now; False if it is no longer open."""
        self.expire()
        session = self._open.get(session_id)
        if session is not None:
            session.last_used = self.clock()
            self._open.move_to_end(session_id)
        return session is not None

    def get(self, session_id: str) -> Session:
        if not self.touch(session_id):
            raise ServeError(f"unknown session {session_id[:64]!r}: closed, idle for over {self.idle_seconds:g} s, "
                             "or never opened; a reset without session_id opens one", "SESSION_ERROR", 404)
        return self._open[session_id]

    def close(self, session_id: str) -> bool:
        return self._open.pop(session_id, None) is not None


# ----- the episode a session plays -------------------------------------------------------------------------
@dataclass(frozen=True)
class Served:
    """What the server plays: one game and mode if fixed at start, else whatever a reset names."""

    game: Optional[str] = None
    mode: Optional[str] = None

    def choose(self, options: ResetOptions) -> tuple[str, str]:
        try:
            name = games.canonical(options.game) if options.game is not None else self.game
            mode = options.mode if options.mode is not None else self.mode or "explore"
            if mode not in games.MODES:
                raise games.GameError(f"unknown mode {mode!r}: choose one of {', '.join(games.MODES)}")
        except games.GameError as error:
            raise ServeError(str(error), "VALIDATION_ERROR", 422) from None
        if name is None:
            raise ServeError(f"name a game at reset (game=...): one of {', '.join(games.names())}",
                             "VALIDATION_ERROR", 422)
        for asked, fixed, what in ((name, self.game, "game"), (mode, self.mode, "mode")):
            if fixed is not None and asked != fixed:
                raise ServeError(f"this server plays {what} {fixed!r} only (asked for {asked!r})",
                                 "VALIDATION_ERROR", 422)
        return name, mode


def _payload(game: games.Game, text: str, reward: Optional[float], **fields: Any) -> dict[str, Any]:
    """OpenEnv's observation payload: {"observation", "reward", "done"}."""
    observation = GameObservation(
        text=text, game=game.name, mode=game.mode, game_seed=game.seed, step=game.steps, max_steps=game.max_steps,
        terminated=game.terminated, truncated=game.truncated, score=game.score() if game.done else None, **fields)
    return {"observation": observation.model_dump(), "reward": reward, "done": game.done}


def reset(session: Session, served: Served, options: ResetOptions) -> dict[str, Any]:
    """Start a new episode in the session (replacing any) and return its first observation."""
    name, mode = served.choose(options)
    drawn = DRAWN_SEEDS[mode]
    seed = options.seed if options.seed is not None else random.randrange(drawn.start, drawn.stop)
    try:
        seed = require_seed_of(mode, seed)  # the held-out line: eval mode serves evaluation seeds only
    except ValueError as error:
        raise ServeError(str(error), "VALIDATION_ERROR", 422) from None
    game = games.make(name, mode)
    text = game.reset(seed)
    session.game, session.episode_id = game, options.episode_id or secrets.token_hex(8)
    return _payload(game, text, None, rules=game.rules(), answer_format=game.answer_format())


def step(session: Session, action: GameAction) -> dict[str, Any]:
    """Play one action in the session's episode; an illegal move is the game's feedback, not an error."""
    game = session.game
    if game is None:
        raise ServeError("no episode in this session: reset first", "EXECUTION_ERROR", 409)
    if game.done:
        end = "terminated" if game.terminated else "truncated"
        raise ServeError(f"the episode is over ({end} after {game.steps} steps, score {game.score():g}): "
                         "reset to play another", "EXECUTION_ERROR", 409)
    result = game.step(action.action)
    return _payload(game, result.observation, float(result.reward), feedback=result.feedback, valid=result.valid)


def state(session: Session) -> dict[str, Any]:
    game = session.game
    if game is None:
        return GameState().model_dump()
    return GameState(episode_id=session.episode_id, step_count=game.steps, game=game.name, mode=game.mode,
                     game_seed=game.seed, terminated=game.terminated, truncated=game.truncated,
                     score=game.score() if game.done else None).model_dump()


# ----- the two transports -------------------------------------------------------------------------------
def _error(error: ServeError) -> dict[str, Any]:
    return {"type": "error", "data": {"message": str(error), "code": error.code}}


def _close_reason(error: ServeError) -> str:
    """The error as a WebSocket close reason (at most 123 bytes), for a client that sees only the close."""
    return str(error).encode()[:123].decode("utf-8", "ignore")


def _ws_reply(session: Session, served: Served, message: Any) -> dict[str, Any]:
    """The reply to one WebSocket message (OpenEnv's message protocol)."""
    if not isinstance(message, dict):
        raise ServeError("bad message: a JSON object with a 'type' is expected", "VALIDATION_ERROR")
    kind = message.get("type")
    if kind == "reset":
        return {"type": "observation",
                "data": reset(session, served, _validated(ResetOptions, message.get("data"), "reset"))}
    if kind == "step":
        return {"type": "observation", "data": step(session, _validated(GameAction, message.get("data"), "action"))}
    if kind == "state":
        return {"type": "state", "data": state(session)}
    raise ServeError(f"unknown message type {str(kind)[:32]!r}: send reset, step, state or close", "UNKNOWN_TYPE")


async def _websocket(websocket: WebSocket) -> None:
    """One WebSocket connection: one session, closed with the connection or after its idle time."""
    sessions: Sessions = websocket.app.state.sessions
    served: Served = websocket.app.state.served
    await websocket.accept()
    try:
        session = sessions.open()
    except ServeError as error:
        await websocket.send_json(_error(error))
        await websocket.close(code=1013, reason=_close_reason(error))  # 1013: try again later
        return
    try:
        while True:
            try:
                event = await asyncio.wait_for(websocket.receive(), timeout=sessions.idle_seconds)
            except asyncio.TimeoutError:
                event = None
            if event is not None and event["type"] == "websocket.disconnect":
                return
            try:
                if event is None or not sessions.touch(session.id):
                    raise ServeError(f"session closed: idle for over {sessions.idle_seconds:g} s; open a new "
                                     "connection", "SESSION_ERROR")
                text = event.get("text")
                if text is None:
                    text = (event.get("bytes") or b"").decode("utf-8", "replace")
                try:
                    message = json.loads(text)
                except json.JSONDecodeError as error:
                    raise ServeError(f"invalid JSON: {error}", "INVALID_JSON") from None
                if isinstance(message, dict) and message.get("type") == "close":
                    break
                reply = _ws_reply(session, served, message)
            except ServeError as error:
                await websocket.send_json(_error(error))
                if error.code == "SESSION_ERROR":
                    await websocket.close(reason=_close_reason(error))
                    return
                continue
            await websocket.send_json(reply)
        await websocket.close()
    except (WebSocketDisconnect, OSError):  # the client went away (uvicorn's ClientDisconnected is an OSError)
        pass
    finally:
        sessions.close(session.id)


async def _body(request: Request) -> Any:
    """The request's JSON body, read up to MAX_MESSAGE_BYTES."""
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > MAX_MESSAGE_BYTES:
            raise ServeError(f"request body over {MAX_MESSAGE_BYTES:,} bytes", "VALIDATION_ERROR", 413)
        chunks.append(chunk)
    raw = b"".join(chunks)
    try:
        return json.loads(raw) if raw.strip() else {}
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise ServeError(f"invalid JSON: {error}", "INVALID_JSON", 400) from None


def _http(handler: Callable[..., Any]) -> Callable[[Request], Any]:
    """An HTTP endpoint: the handler's dict as JSON, a ServeError as {"detail", "code"} with its status."""
    async def endpoint(request: Request) -> JSONResponse:
        try:
            return JSONResponse(await handler(request, request.app.state.sessions, request.app.state.served))
        except ServeError as error:
            return JSONResponse({"detail": str(error), "code": error.code}, status_code=error.status)
    return endpoint


async def _http_reset(request: Request, sessions: Sessions, served: Served) -> dict[str, Any]:
    options = _validated(_HttpReset, await _body(request), "reset")
    opened = options.session_id is None
    session = sessions.open() if opened else sessions.get(options.session_id)
    try:
        payload = reset(session, served, ResetOptions(**options.model_dump(exclude={"session_id"})))
    except ServeError:
        if opened:
            sessions.close(session.id)  # a refused reset leaves no session behind
        raise
    return {**payload, "session_id": session.id}


async def _http_step(request: Request, sessions: Sessions, served: Served) -> dict[str, Any]:
    body = _validated(_HttpStep, await _body(request), "step")
    session = sessions.get(body.session_id)
    return {**step(session, _validated(GameAction, body.action, "action")), "session_id": session.id}


async def _http_state(request: Request, sessions: Sessions, served: Served) -> dict[str, Any]:
    session_id = request.query_params.get("session_id")
    if not session_id:
        raise ServeError("bad state request: session_id is required (GET /state?session_id=...)",
                         "VALIDATION_ERROR", 422)
    return {**state(sessions.get(session_id)), "session_id": session_id}


async def _http_close(request: Request, sessions: Sessions, served: Served) -> dict[str, Any]:
    body = _validated(_HttpClose, await _body(request), "close")
    sessions.get(body.session_id)  # an unknown session is an error
    return {"session_id": body.session_id, "closed": sessions.close(body.session_id)}


async def _health(request: Request, sessions: Sessions, served: Served) -> dict[str, Any]:
    return {"status": "healthy"}


async def _schema(request: Request, sessions: Sessions, served: Served) -> dict[str, Any]:
    return {"action": GameAction.model_json_schema(), "observation": GameObservation.model_json_schema(),
            "state": GameState.model_json_schema()}


async def _metadata(request: Request, sessions: Sessions, served: Served) -> dict[str, Any]:
    which = served.game or ", ".join(games.names())
    return {"name": "s3gym", "description": f"The S3Gym text games ({which}), mode {served.mode or 'chosen at reset'}",
            "readme_content": None, "version": _version(), "author": None, "documentation_url": None}


def _version() -> Optional[str]:
    """The installed games' version: their own distribution's, or the app's, which ships them too."""
    for distribution in ("s3gym-games", "s3gym"):
        try:
            return metadata.version(distribution)
        except metadata.PackageNotFoundError:
            continue
    return None


def make_app(game: Optional[str] = None, mode: Optional[str] = None, max_sessions: int = DEFAULT_MAX_SESSIONS,
             idle_seconds: float = DEFAULT_IDLE_SECONDS) -> Starlette:
    """The server's ASGI app; `game`/`mode` fix what it plays (GameError for an unknown one)."""
    if max_sessions < 1 or idle_seconds <= 0:
        raise games.GameError("max_sessions must be at least 1 and idle_seconds above 0")
    served = Served(games.canonical(game) if game is not None else None, mode)
    if mode is not None and mode not in games.MODES:
        raise games.GameError(f"unknown mode {mode!r}: choose one of {', '.join(games.MODES)}")
    app = Starlette(routes=[
        WebSocketRoute("/ws", _websocket),
        Route("/reset", _http(_http_reset), methods=["POST"]),
        Route("/step", _http(_http_step), methods=["POST"]),
        Route("/state", _http(_http_state), methods=["GET"]),
        Route("/close", _http(_http_close), methods=["POST"]),
        Route("/health", _http(_health), methods=["GET"]),
        Route("/schema", _http(_schema), methods=["GET"]),
        Route("/metadata", _http(_metadata), methods=["GET"]),
    ])
    app.state.sessions = Sessions(max_sessions, idle_seconds)
    app.state.served = served
    return app


# ----- the command ---------------------------------------------------------------------------------------
def listen(host: str, port: int) -> socket.socket:
    """A listening socket on host:port (port 0: a free one); OSError if it cannot be had.

    Its protocol is TCP by number, not 0 as `socket.create_server` makes it: asyncio sets TCP_NODELAY only
    on connections of such a socket, and without it every HTTP reply (headers, then body) waited ~40 ms for
    the client's delayed ACK."""
    family, kind, proto, _, address = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM,
                                                         proto=socket.IPPROTO_TCP)[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(socket.SOMAXCONN)
    except BaseException:
        sock.close()
        raise
    return sock


def server(app: Starlette, max_sessions: int) -> uvicorn.Server:
    """A quiet uvicorn server for the app (no access log: request lines are the clients' text)."""
    return uvicorn.Server(uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="off", ws_max_size=MAX_MESSAGE_BYTES,
        limit_concurrency=2 * max_sessions + 32))


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="s3gym-openenv-server",
                                     description="Serve the S3Gym games to OpenEnv clients (WebSocket /ws) and "
                                                 "plain HTTP (/reset, /step, /state).")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1: this machine only)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help=f"port (default {DEFAULT_PORT}; 0: a free one)")
    parser.add_argument("--game", help="play only this game (default: the one each reset names)")
    parser.add_argument("--mode", choices=games.MODES, help="play only this mode (default: chosen at reset, explore)")
    parser.add_argument("--max-sessions", type=int, default=DEFAULT_MAX_SESSIONS,
                        help=f"sessions open at once (default {DEFAULT_MAX_SESSIONS})")
    parser.add_argument("--idle-seconds", type=float, default=DEFAULT_IDLE_SECONDS,
                        help=f"close a session unused this long (default {DEFAULT_IDLE_SECONDS:g})")
    args = parser.parse_args(argv)
    try:
        app = make_app(args.game, args.mode, args.max_sessions, args.idle_seconds)
    except games.GameError as error:
        print(f"s3gym-openenv-server: error: {error}", file=sys.stderr)
        return 2
    try:
        sock = listen(args.host, args.port)
    except (OSError, OverflowError) as error:
        reason = getattr(error, "strerror", None) or error
        print(f"s3gym-openenv-server: error: cannot listen on {args.host}:{args.port}: {reason}", file=sys.stderr)
        return 1
    host, port = sock.getsockname()[:2]
    plays = f"{args.game or 'any game'} in {args.mode or 'any mode'}"
    print(f"s3gym OpenEnv server on http://{host}:{port} (WebSocket ws://{host}:{port}/ws): {plays}, at most "
          f"{args.max_sessions} sessions, idle ones closed after {args.idle_seconds:g} s; Ctrl-C stops it",
          flush=True)
    try:
        server(app, args.max_sessions).run(sockets=[sock])
    except KeyboardInterrupt:  # uvicorn stops on Ctrl-C, then raises it again
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
