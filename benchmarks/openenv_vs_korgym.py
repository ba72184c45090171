"""Steps/s of s3gym-openenv-server beside KORGym's own HTTP servers for the same games, same machine, one run.

Each server runs as its own process on 127.0.0.1: ours (`python -m s3gym_games.openenv_server`, all games
in one process) and one KORGym `game_lib.py` per game, started from a checkout given on the command line
(nothing of KORGym is copied here; without the checkout its column is skipped with a message). Clients
are coroutines on one event loop of this process, each with its own connection, playing random actions
until the round's time is up; a step is the move plus the observation text the agent reads next:

- ours over the WebSocket (`/ws`, what OpenEnv's client uses): one `step` message, its reply carries the
  observation; ours over plain HTTP: one `POST /step` on a kept-alive connection;
- KORGym: `POST /verify` with the whole state, then `POST /print_board` for the board text (its protocol
  keeps the state in the client, except Nullify's and PvZ's, which it keeps server-side by id).

Actions: ours drawn from a pool of `Game.sample_action` over in-process random episodes (the client holds
no game), KORGym's from the same distributions as benchmarks/games_vs_korgym.py over its own board sizes.
Episodes stop at the harness's 64 steps. "with reset" adds episode generation to the step time. Rounds are
interleaved (ours ws, ours http, KORGym, next game, ...) so load drifts hit all sides; the servers' resident
memory is read from /proc at the end. A short warm-up round of each side comes first, not counted.

    python benchmarks/openenv_vs_korgym.py --korgym /path/to/KORGym [--clients 1,8] [--rounds 3] [--seconds 1.5]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import socket
import statistics
import subprocess
import sys
import time
from pathlib import Path

import httpx
from websockets.asyncio.client import connect

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402
from benchmarks.games_vs_korgym import CAP, KORGYM_DIRS, load_korgym  # noqa: E402

import s3gym_games as games  # noqa: E402
from s3gym_games.seeds import EVAL_SEED_BASE  # noqa: E402


# ----- the servers --------------------------------------------------------------------------------------------
def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def wait_ready(base: str, proc: subprocess.Popen, path: str, seconds: float = 120) -> None:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{base}: the server exited ({proc.returncode}): {proc.stderr.read()[-300:]}")
        try:
            httpx.get(base + path, timeout=2)
            return
        except httpx.TransportError:
            time.sleep(0.2)
    raise RuntimeError(f"{base}: not ready after {seconds:g} s")


def start_ours(max_sessions: int) -> tuple[subprocess.Popen, str]:
    proc = subprocess.Popen([sys.executable, "-m", "s3gym_games.openenv_server", "--port", "0",
                             "--max-sessions", str(max_sessions)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True)
    match = re.search(r"http://127\.0\.0\.1:(\d+) ", proc.stdout.readline())
    if match is None:
        raise RuntimeError(f"our server did not start: {proc.stderr.read()[-300:]}")
    base = f"http://127.0.0.1:{match.group(1)}"
    wait_ready(base, proc, "/health")
    return proc, base


def start_korgym(root: Path, game: str) -> tuple[subprocess.Popen, str]:
    folder = root / "game_lib" / KORGYM_DIRS[game]
    port = free_port()
    proc = subprocess.Popen([sys.executable, "game_lib.py", "-p", str(port), "-H", "127.0.0.1"], cwd=folder,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    base = f"http://127.0.0.1:{port}"
    wait_ready(base, proc, "/docs")
    return proc, base


def rss_mb(pid: int) -> float | None:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        return None
    return None


# ----- the clients ----------------------------------------------------------------------------------------------
def action_pool(name: str, mode: str, episodes: int = 30) -> list[str]:
    """Actions `Game.sample_action` draws over random in-process episodes of the game."""
    pool, rng = [], random.Random(11)
    for seed in range(episodes):
        game = games.make(name, mode)
        game.reset((EVAL_SEED_BASE if mode == "eval" else 0) + seed)
        while not game.done:
            pool.append(game.sample_action(rng))
            game.step(pool[-1])
    return pool


def korgym_action(game: str, item: dict, board: str, rows_cols: tuple[int, int], rng: random.Random) -> str:
    """KORGym's random action, drawn as benchmarks/games_vs_korgym.py draws it, from what a client holds."""
    if game == "tetris":
        return f"{rng.randint(1, item['width'])} {rng.choice((0, 90, 180, 270))}"
    if game == "snake":
        return rng.choice(("UP", "DOWN", "LEFT", "RIGHT"))
    if game == "trust":
        return rng.choice(("collaborate", "cheat"))
    if game == "minesweeper":
        verb = rng.choices(("uncover", "flag", "unflag"), weights=(6, 3, 1), k=1)[0]
        return f"{verb} ({rng.randrange(item['rows'])},{rng.randrange(item['cols'])})"
    if game == "pvz":
        k = rng.choice((0, 1, 1, 1, 2))
        return "; ".join(f"{rng.choice('XWSJHF')} {rng.randrange(rows_cols[0])} {rng.randrange(rows_cols[1])}"
                         for _ in range(k))
    if game == "nullify":  # the units left, as the board lists them after "board:"
        n = len(re.findall(r"^\d+ ", board.rsplit("board:", 1)[-1], re.M))
        if n >= 2 and rng.random() < 0.9:
            i, j = rng.sample(range(n), 2)
            return f"{i} {j}"
        return f"{rng.randint(0, n + 1)} {rng.randint(0, n + 1)}"
    raise ValueError(game)


async def play_ws(base: str, name: str, mode: str, pool: list[str], ready: asyncio.Barrier, seconds: float,
                  rng: random.Random, seed: int) -> tuple[int, float, float]:
    """(steps, step seconds, reset seconds) over the WebSocket until the deadline."""
    steps, t_step, t_reset, clock = 0, 0.0, 0.0, time.perf_counter
    seed += EVAL_SEED_BASE if mode == "eval" else 0
    async with connect(base.replace("http://", "ws://") + "/ws", max_size=None) as ws:
        deadline = await start_together(ready, seconds)
        while clock() < deadline:
            t0 = clock()
            await ws.send(json.dumps({"type": "reset", "data": {"game": name, "mode": mode, "seed": seed}}))
            done = json.loads(await ws.recv())["data"]["done"]
            t_reset += clock() - t0
            seed += 1
            while not done:
                action = rng.choice(pool)
                t0 = clock()
                await ws.send(json.dumps({"type": "step", "data": {"action": action}}))
                done = json.loads(await ws.recv())["data"]["done"]
                t_step += clock() - t0
                steps += 1
    return steps, t_step, t_reset


async def play_http(base: str, name: str, mode: str, pool: list[str], ready: asyncio.Barrier,
                    seconds: float, rng: random.Random, seed: int) -> tuple[int, float, float]:
    steps, t_step, t_reset, clock = 0, 0.0, 0.0, time.perf_counter
    seed += EVAL_SEED_BASE if mode == "eval" else 0
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        session = None
        deadline = await start_together(ready, seconds)
        while clock() < deadline:
            t0 = clock()
            reply = (await http.post("/reset", json={"game": name, "mode": mode, "seed": seed,
                                                     **({"session_id": session} if session else {})})).json()
            t_reset += clock() - t0
            session, done, seed = reply["session_id"], reply["done"], seed + 1
            while not done:
                action = rng.choice(pool)
                t0 = clock()
                reply = await http.post("/step", json={"session_id": session, "action": {"action": action}})
                done = reply.json()["done"]
                t_step += clock() - t0
                steps += 1
        if session:
            await http.post("/close", json={"session_id": session})
    return steps, t_step, t_reset


async def play_korgym(base: str, name: str, rows_cols: tuple[int, int], ready: asyncio.Barrier,
                      seconds: float, rng: random.Random, seed: int) -> tuple[int, float, float]:
    steps, t_step, t_reset, clock = 0, 0.0, 0.0, time.perf_counter
    async with httpx.AsyncClient(base_url=base, timeout=60) as http:
        deadline = await start_together(ready, seconds)
        while clock() < deadline:
            t0 = clock()
            item = (await http.post("/generate", json={"seed": seed})).json()
            board = (await http.post("/print_board", json=item)).json()["board"]
            t_reset += clock() - t0
            seed += 1
            n = 0
            while not item.get("is_end") and n < CAP:
                item["action"] = korgym_action(name, item, board, rows_cols, rng)
                t0 = clock()
                item = (await http.post("/verify", json=item)).json()
                board = (await http.post("/print_board", json=item)).json()["board"]
                t_step += clock() - t0
                steps += 1
                n += 1
    return steps, t_step, t_reset


async def start_together(ready: asyncio.Barrier, seconds: float) -> float:
    """Wait until every client has its connection (client set-up is not timed); the round's deadline."""
    await ready.wait()
    return time.perf_counter() + seconds


def run_clients(clients: int, seconds: float, play, *args) -> tuple[int, float, float, float]:
    """(steps, wall seconds, summed step seconds, summed reset seconds) of `clients` concurrent clients, all
    on one event loop (threads would queue on the GIL and measure the client, not the server)."""
    async def together() -> tuple[list[tuple[int, float, float]], float]:
        ready = asyncio.Barrier(clients + 1)
        tasks = [asyncio.create_task(play(*args, ready, seconds, random.Random(7 + k), 1000 * k))
                 for k in range(clients)]
        await ready.wait()
        start = time.perf_counter()
        results = await asyncio.gather(*tasks)
        return results, time.perf_counter() - start

    results, wall = asyncio.run(together())
    return sum(r[0] for r in results), wall, sum(r[1] for r in results), sum(r[2] for r in results)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--korgym", type=Path, help="a KORGym checkout (its game_lib/ folder is used)")
    parser.add_argument("--clients", default="1,8", help="concurrent clients per side, comma-separated")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--seconds", type=float, default=1.5, help="per side, per round, per client count")
    parser.add_argument("--mode", default="eval", choices=games.MODES, help="our games' mode")
    parser.add_argument("--games", default=",".join(KORGYM_DIRS))
    args = parser.parse_args()
    names = [games.canonical(n) for n in args.games.split(",") if n]
    client_counts = [int(c) for c in args.clients.split(",") if c]
    has_korgym = args.korgym is not None and (args.korgym / "game_lib").is_dir()
    if not has_korgym:
        print(f"KORGym checkout not given or not found ({args.korgym}): its column is skipped.")

    procs: dict[str, subprocess.Popen] = {}
    try:
        ours, ours_base = start_ours(max(client_counts) * 2)
        procs["ours"] = ours
        sides: dict[str, dict[str, tuple]] = {}
        for name in names:
            pool = action_pool(name, args.mode)
            sides[name] = {"ours ws": (play_ws, ours_base, name, args.mode, pool),
                           "ours http": (play_http, ours_base, name, args.mode, pool)}
            if has_korgym:
                module, why = load_korgym(args.korgym, name)
                if module is None:
                    print(f"KORGym {name}: skipped ({why})")
                    continue
                proc, base = start_korgym(args.korgym, name)
                procs[f"korgym {name}"] = proc
                rows_cols = (getattr(module, "ROWS", 0), getattr(module, "COLS", 0))
                sides[name]["korgym http"] = (play_korgym, base, name, rows_cols)

        for by_side in sides.values():  # warm-up, not counted: first imports and allocations of each server
            for play, *rest in by_side.values():
                run_clients(1, 0.3, play, *rest)
        totals = {(n, s, c): [0, 0.0, 0.0, 0.0] for n in sides for s in sides[n] for c in client_counts}
        per_round: dict[tuple, list[float]] = {key: [] for key in totals}
        for _ in range(args.rounds):
            for clients in client_counts:
                for name, by_side in sides.items():
                    for side, (play, *rest) in by_side.items():
                        figures = run_clients(clients, args.seconds, play, *rest)
                        for i, value in enumerate(figures):
                            totals[(name, side, clients)][i] += value
                        per_round[(name, side, clients)].append(figures[0] / figures[1])

        rows = []
        for clients in client_counts:
            for name, by_side in sides.items():
                peer = totals.get((name, "korgym http", clients))
                peer_sps = peer[0] / peer[1] if peer and peer[1] else None
                for side in by_side:
                    steps, wall, t_step, t_reset = totals[(name, side, clients)]
                    sps = steps / wall if wall else None  # wall clock: resets included, all clients together
                    per_client = steps / t_step if t_step else None  # one client's step rate, resets excluded
                    versus = f"{sps / peer_sps:.2f}x" if sps and peer_sps and side != "korgym http" else ""
                    median = statistics.median(per_round[(name, side, clients)])
                    rows.append([clients, name, side, f"{sps:,.0f}" if sps else "—", f"{median:,.0f}", versus,
                                 f"{per_client:,.0f}" if per_client else "—",
                                 f"{1000 * t_step / steps:.2f}" if steps else "—", f"{steps:,}"])
        print_table(f"steps/s over HTTP on 127.0.0.1, random actions, mode {args.mode} for ours "
                    f"({args.rounds} interleaved rounds x {args.seconds}s per side)",
                    ["clients", "game", "side", "steps/s", "median round", "vs KORGym", "per client, step only",
                     "ms/step",
                     "steps"], rows)
        memory = [[label, f"{rss:,.0f}" if (rss := rss_mb(proc.pid)) is not None else "—"]
                  for label, proc in procs.items()]
        print_table("server resident memory after the run (MB)", ["server", "RSS MB"], memory)
    finally:
        for proc in procs.values():
            proc.terminate()
        for proc in procs.values():
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()


if __name__ == "__main__":
    main()
