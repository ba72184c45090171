"""The OpenEnv-compatible server: 32 concurrent sessions each equal to the same seed played in-process, over
the WebSocket protocol and plain HTTP; OpenEnv's own client; one-line errors for bad input with the episode
intact; the session cap, idle expiry, the held-out line; the command and docs/games.md's example."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
from websockets.asyncio.client import connect as async_connect
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

import s3gym_games as games
from s3gym_games.openenv_server import MAX_MESSAGE_BYTES, ServeError, Sessions, listen, make_app, server
from s3gym_games.reply import MAX_ACTION_CHARS
from s3gym_games.seeds import EVAL_SEED_BASE

ROOT = Path(__file__).resolve().parents[2]


@contextlib.contextmanager
def running(**options):
    """The server on a free port of 127.0.0.1 in a thread: (base url, app)."""
    app = make_app(**options)
    sock = listen("127.0.0.1", 0)
    port = sock.getsockname()[1]
    uv = server(app, app.state.sessions.cap)
    thread = threading.Thread(target=uv.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not uv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{port}", app
    finally:
        uv.should_exit = True
        thread.join(30)


def ws_url(base: str) -> str:
    return base.replace("http://", "ws://") + "/ws"


def in_process(name: str, mode: str, seed: int, rng_seed: int) -> tuple[list[str], str, list[tuple], float]:
    """A random episode played in-process: its actions, first observation, per-step results and score."""
    game, rng = games.make(name, mode), random.Random(rng_seed)
    first = game.reset(seed)
    actions, results = [], []
    while not game.done:
        actions.append(game.sample_action(rng))
        r = game.step(actions[-1])
        results.append((r.observation, r.feedback, r.reward, r.terminated, r.truncated, r.valid))
    return actions, first, results, game.score()


def as_tuple(data: dict) -> tuple:
    o = data["observation"]
    return (o["text"], o["feedback"], data["reward"], o["terminated"], o["truncated"], o["valid"])


def session_case(i: int) -> tuple[str, str, int]:
    name, mode = games.names()[i % 7], games.MODES[(i // 7) % 2]
    return name, mode, (EVAL_SEED_BASE if mode == "eval" else 0) + 100 + i


def one_line(message: str) -> str:
    assert message and "\n" not in message and "Traceback" not in message, message
    return message


# ----- concurrency and equality with the games in-process ----------------------------------------------------
def test_32_concurrent_websocket_sessions_equal_the_same_seeds_in_process():
    cases = [session_case(i) for i in range(32)]
    expected = [in_process(name, mode, seed, i) for i, (name, mode, seed) in enumerate(cases)]

    async def play(base: str, app, i: int, all_open: asyncio.Barrier) -> tuple:
        name, mode, seed = cases[i]
        actions = expected[i][0]
        async with async_connect(ws_url(base)) as ws:
            await ws.send(json.dumps({"type": "reset", "data": {"game": name, "mode": mode, "seed": seed}}))
            first = json.loads(await ws.recv())["data"]
            await all_open.wait()  # every session is open at once before any plays
            open_sessions = len(app.state.sessions)
            results = []
            for action in actions:
                await ws.send(json.dumps({"type": "step", "data": {"action": action}}))
                results.append(json.loads(await ws.recv())["data"])
            await ws.send(json.dumps({"type": "state"}))
            final_state = json.loads(await ws.recv())["data"]
        return first, results, final_state, open_sessions

    async def play_all(base: str, app) -> list:
        barrier = asyncio.Barrier(32)
        return await asyncio.gather(*(play(base, app, i, barrier) for i in range(32)))

    with running() as (base, app):
        outcomes = asyncio.run(play_all(base, app))
        deadline = time.monotonic() + 10
        while len(app.state.sessions) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert len(app.state.sessions) == 0  # closed connections free their sessions

    for i, (first, results, final_state, open_sessions) in enumerate(outcomes):
        name, mode, seed = cases[i]
        actions, first_text, steps, score = expected[i]
        assert open_sessions == 32
        assert first["observation"]["text"] == first_text and first["done"] is False and first["reward"] is None
        assert first["observation"]["rules"] == games.make(name, mode).rules()
        assert [as_tuple(r) for r in results] == steps, (name, mode, seed)
        assert [r["done"] for r in results] == [False] * (len(steps) - 1) + [True]
        assert results[-1]["observation"]["score"] == score
        assert all(r["observation"]["score"] is None for r in results[:-1])
        assert final_state == {"episode_id": final_state["episode_id"], "step_count": len(actions), "game": name,
                               "mode": mode, "game_seed": seed, "terminated": steps[-1][3],
                               "truncated": steps[-1][4], "score": score}


def test_plain_http_sessions_equal_the_same_seeds_in_process():
    cases = [session_case(i) for i in range(7, 21)]  # the seven games, both modes

    def play(base: str, i: int) -> None:
        name, mode, seed = cases[i]
        actions, first_text, steps, score = in_process(name, mode, seed, i)
        with httpx.Client(base_url=base) as http:
            first = http.post("/reset", json={"game": name, "mode": mode, "seed": seed}).json()
            sid = first["session_id"]
            assert first["observation"]["text"] == first_text
            results = [http.post("/step", json={"session_id": sid, "action": {"action": a}}).json()
                       for a in actions]
            assert [as_tuple(r) for r in results] == steps and results[-1]["observation"]["score"] == score
            assert http.get("/state", params={"session_id": sid}).json()["step_count"] == len(actions)
            assert http.post("/close", json={"session_id": sid}).json() == {"session_id": sid, "closed": True}

    with running() as (base, app):
        with ThreadPoolExecutor(len(cases)) as pool:
            for future in [pool.submit(play, base, i) for i in range(len(cases))]:
                future.result(timeout=120)
        assert len(app.state.sessions) == 0


def test_openenv_own_client_plays_an_episode():
    openenv = pytest.importorskip("openenv.core", reason="openenv-core cannot be installed beside the app (see "
                                  "games/pyproject.toml); the other WebSocket tests speak its protocol")
    actions, first_text, steps, score = in_process("trust", "eval", EVAL_SEED_BASE + 7, 3)
    with running() as (base, app):
        with openenv.GenericEnvClient(base_url=base).sync() as env:
            result = env.reset(game="trust", mode="eval", seed=EVAL_SEED_BASE + 7)
            assert result.observation["text"] == first_text and not result.done
            results = [env.step({"action": a}) for a in actions]
            assert [(r.observation["text"], r.observation["feedback"], r.reward, r.observation["terminated"],
                     r.observation["truncated"], r.observation["valid"]) for r in results] == steps
            assert results[-1].done and results[-1].observation["score"] == score
            assert env.state()["step_count"] == len(actions)
            with pytest.raises(RuntimeError) as over:
                env.step({"action": "collaborate"})
            assert "the episode is over" in one_line(str(over.value))


# ----- bad input: one line, and the episode goes on unchanged -------------------------------------------------
def test_bad_websocket_messages_get_one_line_errors_and_leave_the_episode_intact():
    actions, first_text, steps, score = in_process("snake", "explore", 42, 5)
    with running() as (base, app), connect(ws_url(base)) as ws:
        def send(message) -> dict:
            ws.send(message if isinstance(message, str) else json.dumps(message))
            return json.loads(ws.recv())

        def error(message) -> tuple[str, str]:
            reply = send(message)
            assert reply["type"] == "error", reply
            return one_line(reply["data"]["message"]), reply["data"]["code"]

        assert error({"type": "step", "data": {"action": "UP"}}) == ("no episode in this session: reset first",
                                                                      "EXECUTION_ERROR")
        assert error("{not json")[1] == "INVALID_JSON"
        assert error({"type": "jump"}) == ("unknown message type 'jump': send reset, step, state or close",
                                           "UNKNOWN_TYPE")
        assert error([1, 2])[1] == "VALIDATION_ERROR"
        assert error({"type": "reset", "data": {"game": "go"}})[0].startswith("unknown game 'go': choose one of")
        assert error({"type": "reset", "data": {"game": "snake", "mode": "hard"}})[0].startswith("unknown mode")
        assert error({"type": "reset", "data": {"mode": "eval"}})[0].startswith("name a game at reset")
        assert error({"type": "reset", "data": {"game": "snake", "gmae": 1}}) == (
            "bad reset: gmae: Extra inputs are not permitted", "VALIDATION_ERROR")
        assert error({"type": "reset", "data": {"game": "snake", "seed": -1}})[1] == "VALIDATION_ERROR"

        reset = send({"type": "reset", "data": {"game": "snake", "seed": 42}})
        assert reset["data"]["observation"]["text"] == first_text
        bad_actions = [{}, {"action": 3}, {"action": "x" * (MAX_ACTION_CHARS + 1)}, {"action": "UP", "extra": 1}]
        for i, action in enumerate(actions):
            for bad in bad_actions if i == 1 else []:  # refused mid-episode: no step is taken
                message, code = error({"type": "step", "data": bad})
                assert message.startswith("bad action: ") and code == "VALIDATION_ERROR"
            assert as_tuple(send({"type": "step", "data": {"action": action}})["data"]) == steps[i]
        message, code = error({"type": "step", "data": {"action": "UP"}})
        assert message.startswith(f"the episode is over (") and "reset to play another" in message
        assert send({"type": "state"})["data"]["step_count"] == len(actions)
        ws.send(json.dumps({"type": "close"}))
        with pytest.raises(ConnectionClosed):
            ws.recv()


def test_bad_http_requests_get_one_line_errors():
    with running() as (base, app), httpx.Client(base_url=base) as http:
        def refused(response: httpx.Response, status: int, code: str) -> str:
            assert response.status_code == status, response.text
            assert response.json()["code"] == code
            return one_line(response.json()["detail"])

        assert refused(http.post("/step", json={"session_id": "nope", "action": {"action": "UP"}}), 404,
                       "SESSION_ERROR").startswith("unknown session 'nope': closed, idle for over 300 s")
        refused(http.get("/state", params={"session_id": "nope"}), 404, "SESSION_ERROR")
        refused(http.post("/close", json={"session_id": "nope"}), 404, "SESSION_ERROR")
        refused(http.get("/state"), 422, "VALIDATION_ERROR")
        refused(http.post("/reset", content=b"{oops"), 400, "INVALID_JSON")
        refused(http.post("/reset", content=b"[" * (MAX_MESSAGE_BYTES + 1)), 413, "VALIDATION_ERROR")
        refused(http.post("/reset", json={"game": "go"}), 422, "VALIDATION_ERROR")
        assert len(app.state.sessions) == 0  # a refused reset leaves no session behind
        sid = http.post("/reset", json={"game": "trust", "seed": 5}).json()["session_id"]
        assert refused(http.post("/step", json={"session_id": sid, "action": {"act": "x"}}), 422,
                       "VALIDATION_ERROR") == "bad action: action: Field required; act: Extra inputs are not permitted"
        refused(http.post("/step", json={"session_id": sid}), 422, "VALIDATION_ERROR")
        assert http.get("/state", params={"session_id": sid}).json()["step_count"] == 0
        assert http.get("/health").json() == {"status": "healthy"}
        assert http.get("/metadata").json()["name"] == "s3gym"
        schema = http.get("/schema").json()
        assert schema["action"]["required"] == ["action"] and "text" in schema["observation"]["properties"]


# ----- the held-out line, a fixed game and mode ---------------------------------------------------------------
def test_eval_mode_serves_evaluation_seeds_only_and_explore_mode_exploration_seeds_only():
    with running() as (base, app), httpx.Client(base_url=base) as http:
        for mode, seed in (("explore", EVAL_SEED_BASE), ("eval", EVAL_SEED_BASE - 1), ("eval", 0)):
            response = http.post("/reset", json={"game": "trust", "mode": mode, "seed": seed})
            assert response.status_code == 422 and one_line(response.json()["detail"]).startswith(f"seed {seed} is ")
        for mode in ("explore", "eval"):
            for _ in range(5):
                seed = http.post("/reset", json={"game": "trust", "mode": mode}).json()["observation"]["game_seed"]
                assert (seed >= EVAL_SEED_BASE) == (mode == "eval")


def test_a_server_fixed_to_one_game_and_mode_refuses_others():
    with running(game="trust-evolution", mode="eval") as (base, app), httpx.Client(base_url=base) as http:
        first = http.post("/reset", json={}).json()["observation"]
        assert (first["game"], first["mode"]) == ("trust", "eval") and first["game_seed"] >= EVAL_SEED_BASE
        for asked in ({"game": "chess"}, {"mode": "explore"}):
            response = http.post("/reset", json=asked)
            assert response.status_code == 422 and "this server plays" in one_line(response.json()["detail"])
    with pytest.raises(games.GameError):
        make_app(game="go")


# ----- the cap and idle expiry ----------------------------------------------------------------------------------
def test_the_session_cap_refuses_new_sessions_until_one_closes():
    with running(max_sessions=2) as (base, app), httpx.Client(base_url=base) as http, connect(ws_url(base)):
        sid = http.post("/reset", json={"game": "nullify"}).json()["session_id"]
        with connect(ws_url(base)) as third:
            reply = json.loads(third.recv())
            assert reply["data"]["code"] == "CAPACITY_REACHED"
            assert one_line(reply["data"]["message"]).startswith("server at capacity: 2 sessions open")
            with pytest.raises(ConnectionClosed) as closed:
                third.recv()
            assert closed.value.rcvd.code == 1013 and closed.value.rcvd.reason.startswith("server at capacity")
        response = http.post("/reset", json={"game": "nullify"})
        assert response.status_code == 503 and response.json()["code"] == "CAPACITY_REACHED"
        http.post("/close", json={"session_id": sid})
        assert http.post("/reset", json={"game": "nullify"}).status_code == 200


def test_idle_sessions_are_closed():
    with running(idle_seconds=0.4) as (base, app), httpx.Client(base_url=base) as http:
        sid = http.post("/reset", json={"game": "tetris"}).json()["session_id"]
        with connect(ws_url(base)) as ws:
            reply = json.loads(ws.recv(timeout=30))  # the idle WebSocket session is told, then closed
            assert reply["data"]["code"] == "SESSION_ERROR"
            assert one_line(reply["data"]["message"]) == "session closed: idle for over 0.4 s; open a new connection"
            with pytest.raises(ConnectionClosed):
                ws.recv(timeout=30)
        time.sleep(0.5)
        response = http.post("/step", json={"session_id": sid, "action": {"action": "1 0"}})
        assert response.status_code == 404 and response.json()["code"] == "SESSION_ERROR"
        assert len(app.state.sessions) == 0


def test_a_session_in_use_stays_open_and_the_least_recently_used_expires_first():
    now = [0.0]
    sessions = Sessions(cap=3, idle_seconds=10, clock=lambda: now[0])
    a, b, c = sessions.open(), sessions.open(), sessions.open()
    with pytest.raises(ServeError) as full:
        sessions.open()
    assert full.value.code == "CAPACITY_REACHED" and full.value.status == 503
    for t in (6.0, 12.0, 18.0):  # a is used every 6 s: never idle for 10
        now[0] = t
        assert sessions.get(a.id) is a
    assert len(sessions) == 1  # b and c, unused since 0, are gone
    with pytest.raises(ServeError) as gone:
        sessions.get(b.id)
    assert gone.value.code == "SESSION_ERROR" and gone.value.status == 404
    d = sessions.open()
    now[0] = 25.0
    assert sessions.touch(d.id) and len(sessions) == 2
    now[0] = 28.5  # a was last used at 18: idle 10.5 s; d at 25
    assert not sessions.touch(a.id) and sessions.touch(d.id) and len(sessions) == 1


# ----- the command and the docs ---------------------------------------------------------------------------------
def _serve(*args: str) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-m", "s3gym_games.openenv_server", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)


def test_the_command_serves_on_localhost_and_ctrl_c_stops_it():
    proc = _serve("--port", "0", "--game", "trust")
    try:
        line = proc.stdout.readline()
        match = re.match(r"s3gym OpenEnv server on http://127\.0\.0\.1:(\d+) ", line)
        assert match, line
        base = f"http://127.0.0.1:{match.group(1)}"
        assert httpx.get(base + "/health").json() == {"status": "healthy"}
        assert httpx.post(base + "/reset", json={}).json()["observation"]["game"] == "trust"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 130 and err == ""  # the project's exit code for Ctrl-C, no traceback


def test_the_command_refuses_bad_options_in_one_line():
    proc = _serve("--game", "go", "--port", "0")
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 2
    assert one_line(err.strip()).startswith("s3gym-openenv-server: error: unknown game 'go'")
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        proc = _serve("--port", str(taken.getsockname()[1]))
        _, err = proc.communicate(timeout=60)
    assert proc.returncode == 1 and one_line(err.strip()).startswith("s3gym-openenv-server: error: cannot listen on")


def test_docs_example_runs():
    page = (ROOT / "docs" / "games.md").read_text()
    block = re.search(r"<!-- openenv http example -->\n```python\n(.*?)```", page, re.S)
    assert block, "docs/games.md's OpenEnv server example is missing"
    with running() as (base, app):
        code = block.group(1).replace("http://127.0.0.1:8000", base)
        namespace: dict = {}
        exec(compile(code, "docs/games.md", "exec"), namespace)
    assert namespace["result"]["done"] and namespace["result"]["observation"]["score"] is not None


def test_without_the_extra_the_import_names_it():
    code = "import sys; sys.modules['starlette'] = None\nimport s3gym_games.openenv_server"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.stderr.strip().splitlines()[-1] == (
        "ImportError: s3gym_games.openenv_server needs the openenv extra: pip install 's3gym-games[openenv]' "
        "(or 's3gym[openenv]')")


def test_the_listening_socket_gets_connections_without_nagle_delay():
    """asyncio sets TCP_NODELAY only on connections of a socket whose protocol is TCP by number; without it
    each HTTP reply (headers, then body) waited for the client's delayed ACK."""
    async def check() -> int:
        accepted: asyncio.Future = asyncio.get_running_loop().create_future()

        async def on_connect(reader, writer):
            accepted.set_result(writer.get_extra_info("socket").getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY))
            writer.close()

        sock = listen("127.0.0.1", 0)
        async with await asyncio.start_server(on_connect, sock=sock):
            _, writer = await asyncio.open_connection("127.0.0.1", sock.getsockname()[1])
            nodelay = await asyncio.wait_for(accepted, 10)
            writer.close()
        return nodelay

    assert asyncio.run(check()) != 0
