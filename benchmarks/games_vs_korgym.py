"""Steps/s of our games beside KORGym's own game logic for the same game, one process, interleaved.

KORGym (multimodal-art-projection/KORGym) serves each game over HTTP; here its `game_lib.py` is
imported from a checkout given on the command line and called in-process (generate / verify /
print_board), which is its fastest possible path. Nothing of KORGym is copied here: without the
path (or with a checkout that lacks a game) the KORGym column is skipped with a message.

Both sides play random actions (same distributions: ours from `Game.sample_action`, KORGym's drawn
alike over its own board sizes) from a separate RNG, episodes capped at the harness's 64 steps.
A step is the move plus the observation text the agent reads next: ours `Game.step` (its result
carries the observation), KORGym `verify` then `print_board`. "obs twice" also charges ours a
second `observation()` call per step, as games_step.py and the engine's prompt builder make;
"with reset" adds episode generation to the step time.
Rounds are interleaved (ours explore, ours eval, KORGym, next game, ...) so load drifts hit all.

    python benchmarks/games_vs_korgym.py --korgym /path/to/KORGym [--rounds 7] [--seconds 0.4]
"""

from __future__ import annotations

import argparse
import contextlib
import importlib.util
import io
import random
import statistics
import sys
import time
import types
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

import s3gym_games as games  # noqa: E402

CAP = 64
# our game -> KORGym folder under game_lib/
KORGYM_DIRS = {"snake": "24-snake", "tetris": "25-Tetris", "trust": "26-TrustRovolution",
               "minesweeper": "38-minesweeper", "nullify": "39-Nullify", "pvz": "41-PVZ"}


# ----- loading KORGym's modules without its web server -------------------------------------
def _stub_web_modules() -> None:
    """KORGym's game_lib files import fastapi and uvicorn for their HTTP wrapper; when those are
    not installed, stand-ins that accept the route decorators are enough (no server is started)."""
    try:
        import fastapi  # noqa: F401
    except ImportError:
        class _App:
            def __getattr__(self, _name):
                return lambda *a, **k: (lambda f: f)

        fastapi = types.ModuleType("fastapi")
        fastapi.FastAPI = lambda *a, **k: _App()
        fastapi.HTTPException = type("HTTPException", (Exception,), {})
        sys.modules["fastapi"] = fastapi
    try:
        import uvicorn  # noqa: F401
    except ImportError:
        uvicorn = types.ModuleType("uvicorn")
        uvicorn.run = lambda *a, **k: None
        sys.modules["uvicorn"] = uvicorn


def load_korgym(root: Path, game: str):
    """KORGym's game_lib module for `game`, or a one-line reason why not."""
    folder = KORGYM_DIRS.get(game)
    if folder is None:
        return None, "KORGym has no such game"
    path = root / "game_lib" / folder / "game_lib.py"
    if not path.is_file():
        return None, f"not in this checkout ({path})"
    _stub_web_modules()
    spec = importlib.util.spec_from_file_location(f"korgym_{game}", path)
    module = importlib.util.module_from_spec(spec)
    try:
        spec.loader.exec_module(module)
    except Exception as exc:  # a missing optional dependency of theirs (numpy for Nullify)
        return None, f"cannot import: {type(exc).__name__}: {exc}"
    return module, ""


class Korgym:
    """Drives one KORGym game_lib through its own functions, as its HTTP server would."""

    def __init__(self, game: str, module) -> None:
        self.game, self.m = game, module
        self.item: dict = {}
        self.steps = 0

    def reset(self, seed: int) -> None:
        self.item = self.m.generate(seed)
        self.steps = 0

    @property
    def done(self) -> bool:
        return bool(self.item.get("is_end")) or self.steps >= CAP

    def step(self, action: str) -> str:
        self.item["action"] = action
        self.item = self.m.verify(self.item)
        self.steps += 1
        return self.m.print_board(self.item)

    def sample_action(self, rng: random.Random) -> str:
        g, item = self.game, self.item
        if g == "tetris":
            return f"{rng.randint(1, item['width'])} {rng.choice((0, 90, 180, 270))}"
        if g == "snake":
            return rng.choice(("UP", "DOWN", "LEFT", "RIGHT"))
        if g == "trust":
            return rng.choice(("collaborate", "cheat"))
        if g == "minesweeper":
            verb = rng.choices(("uncover", "flag", "unflag"), weights=(6, 3, 1), k=1)[0]
            return f"{verb} ({rng.randrange(item['rows'])},{rng.randrange(item['cols'])})"
        if g == "pvz":
            k = rng.choice((0, 1, 1, 1, 2))
            return "; ".join(f"{rng.choice('XWSJHF')} {rng.randrange(self.m.ROWS)} "
                             f"{rng.randrange(self.m.COLS)}" for _ in range(k))
        if g == "nullify":
            n = len(self.m.ENV_STORE[item["uid"]].question_queue)
            if n >= 2 and rng.random() < 0.9:
                i, j = rng.sample(range(n), 2)
                return f"{i} {j}"
            return f"{rng.randint(0, n + 1)} {rng.randint(0, n + 1)}"
        raise ValueError(g)


class Ours:
    """Drives one of our games the way the engine does."""

    def __init__(self, game: str, mode: str) -> None:
        self.g = games.make(game, mode)

    def reset(self, seed: int) -> None:
        self.g.reset(seed)

    @property
    def done(self) -> bool:
        return self.g.done

    def step(self, action: str) -> str:
        return self.g.step(action).observation

    def observe_again(self) -> str:
        return self.g.observation()

    def sample_action(self, rng: random.Random) -> str:
        return self.g.sample_action(rng)


def run(side, seconds: float, seed: int, rng: random.Random) -> tuple[int, float, float, float, int]:
    """(steps, step+observation seconds, second-observation seconds, reset seconds, next seed)
    over about `seconds`."""
    steps, t_step, t_again, t_reset = 0, 0.0, 0.0, 0.0
    clock = time.perf_counter
    again = getattr(side, "observe_again", None)
    deadline = clock() + seconds
    while clock() < deadline:
        t0 = clock()
        side.reset(seed)
        t_reset += clock() - t0
        seed += 1
        while not side.done:
            action = side.sample_action(rng)
            t0 = clock()
            side.step(action)
            t1 = clock()
            if again is not None:
                again()
                t_again += clock() - t1
            t_step += t1 - t0
            steps += 1
    return steps, t_step, t_again, t_reset, seed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--korgym", type=Path, help="a KORGym checkout (its game_lib/ folder is used)")
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--seconds", type=float, default=0.4, help="per side, per round")
    parser.add_argument("--games", default=",".join(KORGYM_DIRS))
    args = parser.parse_args()
    names = [games.canonical(n) for n in args.games.split(",") if n]
    if args.korgym is None or not (args.korgym / "game_lib").is_dir():
        print(f"KORGym checkout not given or not found ({args.korgym}): its column is skipped.")

    sides: dict[str, dict[str, object]] = {}
    for name in names:
        sides[name] = {mode: Ours(name, mode) for mode in games.MODES}
        if args.korgym is not None and (args.korgym / "game_lib").is_dir():
            module, why = load_korgym(args.korgym, name)
            if module is None:
                print(f"KORGym {name}: skipped ({why})")
            else:
                sides[name]["korgym"] = Korgym(name, module)

    totals = {(n, k): [0, 0.0, 0.0, 0.0] for n in sides for k in sides[n]}
    per_round: dict[tuple[str, str], list[float]] = {key: [] for key in totals}
    seeds = {key: (1_000_000 if key[1] == "eval" else 0) for key in totals}
    rngs = {key: random.Random(7) for key in totals}
    for _ in range(args.rounds):
        for name, by_side in sides.items():
            for kind, side in by_side.items():
                key = (name, kind)
                # KORGym prints to stdout on some invalid moves (PvZ); swallow it.
                with contextlib.redirect_stdout(io.StringIO()):
                    *figures, seeds[key] = run(side, args.seconds, seeds[key], rngs[key])
                for i, value in enumerate(figures):
                    totals[key][i] += value
                per_round[key].append(figures[0] / figures[1])

    def x(ours: float, peer: float | None) -> str:
        return f"{ours / peer:.2f}x" if peer else ""

    rows = []
    for name, by_side in sides.items():
        peer = totals.get((name, "korgym"))
        peer_sps = peer[0] / peer[1] if peer else None
        peer_full = peer[0] / (peer[1] + peer[3]) if peer else None
        for kind in by_side:
            steps, t_step, t_again, t_reset = totals[(name, kind)]
            sps, twice, full = steps / t_step, steps / (t_step + t_again), steps / (t_step + t_reset)
            median = statistics.median(per_round[(name, kind)])
            ours = kind != "korgym"
            rows.append([name, kind, f"{sps:,.0f}", f"{median:,.0f}", x(sps, peer_sps) if ours else "",
                         f"{twice:,.0f}" if ours else "", x(twice, peer_sps) if ours else "",
                         f"{full:,.0f}", x(full, peer_full) if ours else "", f"{steps:,}"])
    print_table(f"step + observation text, random actions, steps/s ({args.rounds} interleaved rounds "
                f"x {args.seconds}s per side)",
                ["game", "side", "steps/s", "median round", "vs KORGym", "obs twice", "vs KORGym",
                 "with reset", "vs KORGym", "steps"], rows)


if __name__ == "__main__":
    main()
