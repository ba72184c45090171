"""What following the store live costs: one `PRAGMA data_version` poll (the app asks twice a second)
while nothing changes and while another process writes, and how long a commit in another process
takes to be noticed by a poller.

    python benchmarks/live_follow.py [--polls 20000] [--commits 200]
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._util import print_table, stats_ms  # noqa: E402
from s3gym_tui.models import RunConfig  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402
from s3gym_tui.store.watch import StoreWatcher  # noqa: E402

WRITER = r"""
import sys, time
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store
store = Store(sys.argv[1])
for i in range(int(sys.argv[2])):
    store.runs.create_run(RunConfig(model="scripted/trust", game="trust"), run_id=f"w-{i}")
    print(f"{time.time():.6f}", flush=True)
    time.sleep(float(sys.argv[3]))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--polls", type=int, default=20_000)
    parser.add_argument("--commits", type=int, default=200)
    args = parser.parse_args()
    path = Path(tempfile.mkdtemp(prefix="live-follow-")) / "live.db"
    with Store(path) as store:
        for i in range(200):
            store.runs.create_run(RunConfig(model="scripted/trust", game="trust"), run_id=f"seed-{i}")
    watcher = StoreWatcher(path)
    watcher.changed()
    idle = []
    for _ in range(args.polls):
        started = time.perf_counter()
        watcher.changed()
        idle.append(time.perf_counter() - started)
    # a writer in another process commits every 20 ms; a tight poller notes when it sees each one
    writer = subprocess.Popen([sys.executable, "-c", WRITER, str(path), str(args.commits), "0.02"],
                              stdout=subprocess.PIPE, text=True, cwd=Path(__file__).resolve().parents[1])
    busy, seen_at = [], []
    while writer.poll() is None or len(seen_at) < args.commits:
        started = time.perf_counter()
        changed = watcher.changed()
        busy.append(time.perf_counter() - started)
        if changed:
            seen_at.append(time.time())
        if writer.poll() is not None and len(busy) > 10 * args.commits + 100_000:
            break
        time.sleep(0.0005)
    committed = [float(line) for line in writer.stdout.read().split()]
    # each commit is noticed at the first poll after it (polls 0.5 ms apart here; the app polls
    # every 0.5 s, so in the app a change shows within 0.5 s plus the screen's refresh)
    lags = []
    for t in committed:
        later = [s for s in seen_at if s >= t]
        if later:
            lags.append(later[0] - t)
    idle_med, idle_p95 = stats_ms(idle)
    busy_med, busy_p95 = stats_ms(busy)
    lag_med, lag_p95 = stats_ms(lags) if lags else (float("nan"), float("nan"))
    print_table("following the store live (PRAGMA data_version)", ["figure", "median", "p95"], [
        ["one poll, nothing changing (µs)", idle_med * 1000, idle_p95 * 1000],
        ["one poll, another process writing (µs)", busy_med * 1000, busy_p95 * 1000],
        ["commit in another process -> noticed (ms)", lag_med, lag_p95],
    ])
    print(f"{len(committed)} commits, {len(lags)} noticed, app CPU for polling at 2 Hz: "
          f"{2 * idle_med / 10:.4f}% of one core")


if __name__ == "__main__":
    main()
