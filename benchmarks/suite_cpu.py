"""Where the test suite's time goes, by file and by test, from the CPU log its tests write.

Run the suite with S3GYM_TEST_CPU_LOG=<folder> (tests/conftest.py writes one line per test: its worker's
CPU, its child processes' CPU and its wall time, set-up and tear-down included), then:

    python benchmarks/suite_cpu.py <folder> [--top N]

CPU seconds are what a loaded machine does not distort; wall minus CPU is waiting: sleeps and servers, and on a
loaded machine the wait for a free core too. Log each run into a new folder: the lines of every run in a folder
are added up (a test logged twice is named)."""

from __future__ import annotations

import argparse
import sys
from collections import Counter, defaultdict
from pathlib import Path

from s3gym_tui.textgate import safe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="the folder S3GYM_TEST_CPU_LOG named (its cpu-*.tsv files)")
    parser.add_argument("--top", type=int, default=25, help="files and tests shown in each list (default 25)")
    args = parser.parse_args()
    rows = []
    for path in sorted(args.folder.glob("cpu-*.tsv")):
        with path.open(encoding="utf-8") as f:
            for line in f:  # a test id may hold quotes or tabs: the three figures are the last three fields
                nodeid, own, children, wall = line.rstrip("\n").rsplit("\t", 3)
                nodeid = safe(nodeid, max_chars=None, one_line=True)  # a log is a file: no escape reaches the terminal
                rows.append((nodeid, float(own), float(children), float(wall)))
    if not rows:
        raise SystemExit(f"no cpu-*.tsv in {args.folder}: run the suite with S3GYM_TEST_CPU_LOG={args.folder}")
    repeated = [nodeid for nodeid, n in Counter(r[0] for r in rows).items() if n > 1]
    if repeated:
        print(f"warning: {len(repeated)} tests logged more than once (e.g. {repeated[0]}): the folder holds "
              "several runs, whose figures are added up; log each run into a new folder", file=sys.stderr)
    by_file: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0.0, 0.0])
    for nodeid, own, children, wall in rows:
        agg = by_file[nodeid.split("::")[0]]
        agg[0] += 1
        agg[1] += own
        agg[2] += children
        agg[3] += wall
    total_cpu = sum(r[1] + r[2] for r in rows)
    print(f"{len(rows)} tests: {total_cpu:,.1f} s CPU ({sum(r[1] for r in rows):,.1f} in the workers, "
          f"{sum(r[2] for r in rows):,.1f} in processes they started), {sum(r[3] for r in rows):,.1f} s wall summed")
    print(f"\nfiles by CPU (top {args.top}):")
    print(f"{'CPU s':>8} {'child s':>8} {'wall s':>8} {'tests':>6}  file")
    for name, (n, own, children, wall) in sorted(by_file.items(), key=lambda kv: -(kv[1][1] + kv[1][2]))[:args.top]:
        print(f"{own + children:8.1f} {children:8.1f} {wall:8.1f} {n:6d}  {name}")
    print(f"\ntests by CPU (top {args.top}):")
    for nodeid, own, children, wall in sorted(rows, key=lambda r: -(r[1] + r[2]))[:args.top]:
        print(f"{own + children:8.1f} {children:8.1f} {wall:8.1f}  {nodeid}")
    print(f"\ntests by wall minus CPU, i.e. waiting: sleeps, servers, a busy machine's cores (top {args.top}):")
    for nodeid, own, children, wall in sorted(rows, key=lambda r: -(r[3] - r[1] - r[2]))[:args.top]:
        print(f"{wall - own - children:8.1f} {wall:8.1f}  {nodeid}")


if __name__ == "__main__":
    main()
