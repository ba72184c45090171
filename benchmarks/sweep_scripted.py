"""CPU of a scripted sweep, the engine's own cost with instant players (what tests/engine/test_sweep_default.py
runs for every game): one `s3gym sweep` process per game, its CPU seconds (user + sys, start-up included),
the steps and summaries it stored, and CPU per step. Start-up alone (imports, litellm) is shown apart.

    python benchmarks/sweep_scripted.py [--games trust,tetris] [--episodes 30] [--pathways none,history,summary]
"""

from __future__ import annotations

import argparse
import os
import resource
import sqlite3
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def _cpu_of(args: list[str]) -> float:
    """CPU seconds (user + sys) of one child process running `python args...` from the repository."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    subprocess.run([sys.executable, *args], cwd=ROOT, env=env, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--games", default="trust,tetris")
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--pathways", default="none,history,summary")
    opts = parser.parse_args()
    startup = _cpu_of(["-c", "from s3gym_tui.cli.entry import main; from s3gym_tui.providers import "
                             "configured_litellm; configured_litellm()"])
    rows = []
    with tempfile.TemporaryDirectory(prefix="s3gym-sweep-bench-") as tmp:
        for game in opts.games.split(","):
            db = Path(tmp) / f"{game}.db"
            cpu = _cpu_of(["-m", "s3gym_tui", "sweep", "--games", game, "--models", "scripted",
                           "--pathways", opts.pathways, "--episodes", str(opts.episodes), "--yes",
                           "--progress", "none", "--db", str(db)])
            with sqlite3.connect(db) as conn:
                steps = conn.execute("SELECT count(*) FROM steps").fetchone()[0]
                summaries = conn.execute("SELECT count(*) FROM summaries").fetchone()[0]
            per_step = f"{(cpu - startup) / steps * 1000:.2f}" if steps else "—"
            rows.append([game, f"{cpu:.1f}", steps, summaries, per_step])
    print_table(f"scripted sweep, {opts.episodes} exploration episodes, pathways {opts.pathways} "
                f"(start-up alone: {startup:.1f} s CPU)",
                ["game", "CPU s", "steps", "summaries", "CPU ms/step (start-up excluded)"], rows)


if __name__ == "__main__":
    main()
