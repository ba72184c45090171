"""What the Gymnasium adapter costs: steps per second of every game in eval mode through
`gymnasium.make("s3gym/<game>-eval-v0")` (its wrappers included) beside the bare game, on the same
random actions, interleaved in one process.

    python benchmarks/gym_env.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

import gymnasium  # noqa: E402

import s3gym_games as games  # noqa: E402
from s3gym_games.gym_env import env_id  # noqa: E402


def actions(name: str, count: int) -> list[str]:
    """Random, plausible actions of the game (drawn once: both sides play the same ones)."""
    game, rng = games.make(name, "eval"), random.Random(0)
    game.reset(1_000_000)
    return [game.sample_action(rng) for _ in range(count)]


def bare(name: str, plan: list[str], seconds: float) -> float:
    game, steps, spent, seed = games.make(name, "eval"), 0, 0.0, 1_000_000
    while spent < seconds:
        t0 = time.perf_counter()
        game.reset(seed)
        for action in plan:
            if game.done:
                break
            game.step(action)
            steps += 1
        spent += time.perf_counter() - t0
        seed += 1
    return steps / spent


def through_gym(name: str, plan: list[str], seconds: float) -> float:
    env, steps, spent, seed = gymnasium.make(env_id(name, "eval")), 0, 0.0, 0
    while spent < seconds:
        t0 = time.perf_counter()
        env.reset(seed=seed)
        for action in plan:
            _, _, terminated, truncated, _ = env.step(action)
            steps += 1
            if terminated or truncated:
                break
        spent += time.perf_counter() - t0
        seed += 1
    return steps / spent


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    rows = []
    for name in games.names():
        plan = actions(name, 64)
        game_sps, gym_sps = bare(name, plan, args.seconds), through_gym(name, plan, args.seconds)
        rows.append([name, f"{game_sps:,.0f}", f"{gym_sps:,.0f}", f"{gym_sps / game_sps:.2f}"])
    print_table("steps per second, eval mode, random actions: the bare game and through gymnasium.make",
                ["game", "game steps/s", "gymnasium steps/s", "ratio"], rows)


if __name__ == "__main__":
    main()
