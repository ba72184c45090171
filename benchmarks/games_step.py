"""Steps per second of every game and mode: reset + step + observation text, driven by the
reference policy and by random actions. Game time excludes the policy's own thinking, which is
reported separately (ms per move).

    python benchmarks/games_step.py [--seconds 2]
"""

from __future__ import annotations

import argparse
import random
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

import s3gym_games as games  # noqa: E402


def bench(name: str, mode: str, driver: str, seconds: float) -> tuple[float, float, int]:
    """(game steps per second, policy ms per move, steps measured)."""
    game = games.make(name, mode)
    policy = games.reference_policy(name) if driver == "reference" else None
    rng = random.Random(0)
    game_time = policy_time = 0.0
    steps = 0
    seed = 1_000_000 if mode == "eval" else 0
    deadline = time.perf_counter() + seconds
    while time.perf_counter() < deadline:
        t0 = time.perf_counter()
        game.reset(seed)
        game_time += time.perf_counter() - t0
        seed += 1
        while not game.done:
            t0 = time.perf_counter()
            action = policy.act(game.view()).action if policy else game.sample_action(rng)
            t1 = time.perf_counter()
            game.step(action)
            game.observation()
            t2 = time.perf_counter()
            policy_time += t1 - t0
            game_time += t2 - t1
            steps += 1
    return steps / game_time, (policy_time / steps * 1000) if policy else 0.0, steps


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    args = parser.parse_args()
    rows = []
    for name in games.names():
        for mode in games.MODES:
            ref_sps, ref_ms, ref_n = bench(name, mode, "reference", args.seconds)
            rnd_sps, _, rnd_n = bench(name, mode, "random", args.seconds)
            rows.append([name, mode, f"{ref_sps:,.0f}", f"{ref_ms:.2f}", f"{rnd_sps:,.0f}", ref_n + rnd_n])
    print_table("game steps per second (reset + step + observation; target >= 5,000)",
                ["game", "mode", "reference steps/s", "policy ms/move", "random steps/s", "steps"], rows)


if __name__ == "__main__":
    main()
