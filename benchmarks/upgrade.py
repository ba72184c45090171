"""Upgrade benchmark: a schema-2 store of growing size upgraded to today's schema (store/upgrade.py).

    python benchmarks/upgrade.py                      # 2 to about 70 MB (under a minute)
    python benchmarks/upgrade.py --episodes 50 200    # chosen sizes (20 steps of ~2 kB each)

Figures: the file (with its WAL) before, at its peak during the upgrade (sampled every 2 ms) and
after, the backup's size and the upgrade's time. The peak growth over the file size is what
upgrade.GROWTH_FACTOR estimates before an upgrade is allowed to start.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from s3gym_tui.store import Store  # noqa: E402
from s3gym_tui.store.upgrade import GROWTH_FACTOR, file_bytes, human_bytes  # noqa: E402
from tests.store.old_schema import build_old_store  # noqa: E402


def one(path: Path, episodes: int) -> None:
    build_old_store(path, 2, episodes=episodes, steps=20, prompt_chars=2000)
    before = file_bytes(path)
    peak = [before]
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            peak[0] = max(peak[0], file_bytes(path))
            time.sleep(0.002)

    watcher = threading.Thread(target=watch)
    watcher.start()
    lines: list[str] = []
    started = time.perf_counter()
    with Store(path, notify=lines.append) as store:
        seconds = time.perf_counter() - started
        report = store.upgraded
    done.set()
    watcher.join()
    assert report is not None and report.backup is not None
    print(f"{episodes:>5} episodes  before {human_bytes(before):>9}  peak {human_bytes(peak[0]):>9} "
          f"(growth {(peak[0] - before) / before:.2f} x, estimate {GROWTH_FACTOR:.1f} x)  after "
          f"{human_bytes(file_bytes(path)):>9}  backup {human_bytes(report.backup_bytes or 0):>9}  "
          f"{seconds:.2f} s")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--episodes", type=int, nargs="+", default=[25, 100, 400, 800])
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for n in args.episodes:
            one(Path(tmp) / f"old-{n}.db", n)


if __name__ == "__main__":
    main()
