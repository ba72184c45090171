"""How long a run the app starts takes to get going as its own process (engine/detached.py): from the
spawn of `s3gym resume` to its lease (the app then shows "driven by PID N"), to its first stored step
(litellm is imported by the first model call), and from Ctrl-C (what `s` sends) to the run stored as
stopped with its lease released, and to the process's exit.

    python benchmarks/run_process_start.py [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._util import print_table  # noqa: E402
from s3gym_tui.engine.detached import ChildRuns, resume_argv  # noqa: E402
from s3gym_tui.models import RunConfig  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402


def one_round(folder: Path, index: int) -> tuple:
    db = folder / f"start-{index}.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", explore_episodes=2000,
                                              eval_every=1000, eval_episodes=0))
    children = ChildRuns(db)
    started = time.monotonic()
    child = children.start(resume_argv(run.id, db), f"bench-{index}")
    lease_s = step_s = None
    with Store(db, read_only=True) as store:
        while child.alive and time.monotonic() - started < 300:
            if lease_s is None and store.leases.lease(run.id) is not None:
                lease_s = time.monotonic() - started
            if lease_s is not None and sum(e.n_steps for e in store.episodes.list(run.id)) > 0:
                step_s = time.monotonic() - started
                break
            time.sleep(0.02)
    stop_at = time.monotonic()
    child.stop()
    stored_s = None
    with Store(db, read_only=True) as store:
        while child.alive and stored_s is None:
            if store.runs.get_run(run.id).status == "stopped" and store.leases.lease(run.id) is None:
                stored_s = time.monotonic() - stop_at
            time.sleep(0.005)
        child.process.wait(timeout=120)
        exit_s = time.monotonic() - stop_at
        assert store.runs.get_run(run.id).status == "stopped", store.runs.get_run(run.id).status
    return lease_s, step_s, stored_s, exit_s


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        rounds = [one_round(Path(tmp), i) for i in range(args.rounds)]
    rows = [[what, statistics.median(r[i] for r in rounds), max(r[i] for r in rounds)]
            for i, what in enumerate(("spawn -> lease held (s)", "spawn -> first step stored (s)",
                                      "Ctrl-C -> stored stopped, lease released (s)",
                                      "Ctrl-C -> process exited (s)"))]
    print_table(f"A run as its own process ({args.rounds} rounds, scripted/trust)", ["", "median", "max"], rows)


if __name__ == "__main__":
    main()
