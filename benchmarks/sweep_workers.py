"""Steps a second of one sweep driven by 1, 2 and 4 worker processes (engine.sweep_workers),
against a model server that answers at once and one that answers after 50 ms.

The server is tests/fake_openai.py in its own process (keep-alive, like vLLM). Each row is a fresh
server and store: a sweep of Trust runs (8 served model names x pathways none/history/summary = 24
runs of 7 episodes of 10 steps, 1 exploration episode and 3 evaluation episodes per checkpoint),
at most --concurrency calls in flight per model over all workers (8 models: 8x that in all).
Wall time is the whole sweep, the workers' start-up included (the time to the first step is printed
apart); CPU is user+sys per step of the parent and of the workers (reaped children, the server
left out; a worker's start-up CPU, measured once alone, taken off).

    python benchmarks/sweep_workers.py [--workers 1,2,4] [--latency 0,0.05] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import resource
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402
from benchmarks.driver_speed import PLAY, ROOT, ServerProcess  # noqa: E402


class LatencyServer(ServerProcess):
    """The fake server in its own process, answering after `delay_s`."""

    def __init__(self, delay_s: float) -> None:  # noqa: D107 - ServerProcess with a latency
        import subprocess

        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fake_openai", str(delay_s), "--keep-alive", "--usage-auto", "--reply",
             PLAY], cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise SystemExit("the fake server did not start")


def _cpu_s(who: int) -> float:
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def start_up_cpu_s() -> float:
    """CPU seconds a worker spends starting (the imports it needs, litellm's included): run once alone."""
    import subprocess

    before = _cpu_s(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, "-c", "from s3gym_tui.engine import sweep, sweep_workers; "
                    "from s3gym_tui.providers import configured_litellm; configured_litellm()"], cwd=ROOT, check=True)
    return _cpu_s(resource.RUSAGE_CHILDREN) - before


def sweep_config(base_url: str, concurrency: int):
    from s3gym_tui.models import SweepConfig

    models = tuple(f"hosted_vllm/bench-{i}" for i in range(8))
    return SweepConfig(games=("trust",), pathways=("none", "history", "summary"), models=models,
                       settings={"explore_episodes": 1, "eval_every": 1, "eval_episodes": 3,
                                 "context_tokens": 32_768},
                       api_bases={m: (base_url,) for m in models}, concurrency=concurrency, runs_per_model=3)


def measure(workers: int, latency: float, concurrency: int, workdir: Path, start_cpu: float) -> list:
    from s3gym_tui.engine.sweep import SweepRunEvent, SweepRunner
    from s3gym_tui.store import Store

    server = LatencyServer(latency)
    try:
        store = Store(workdir / f"workers-{workers}-{latency}.db")
        sweep, _ = store.sweeps.create_sweep(sweep_config(server.base_url, concurrency))
        first: list[float] = []

        def on_event(event) -> None:
            if not first and isinstance(event, SweepRunEvent):
                first.append(time.perf_counter())

        children_cpu = _cpu_s(resource.RUSAGE_CHILDREN)  # the server is not reaped before the end
        cpu, wall = _cpu_s(resource.RUSAGE_SELF), time.perf_counter()
        runner = SweepRunner(store, sweep, on_event, backoff_base_s=0, workers=workers)
        final = asyncio.run(runner.run())
        cpu, end = _cpu_s(resource.RUSAGE_SELF) - cpu, time.perf_counter()
        children_cpu = _cpu_s(resource.RUSAGE_CHILDREN) - children_cpu
        with store._reading("count the steps") as conn:  # noqa: SLF001 - a benchmark's look inside
            steps = conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        store.close()
    finally:
        server.close()
    used = len(runner.pool.workers) if runner.pool is not None else 1
    start_s = first[0] - wall if first else None
    return [workers, used, f"{latency * 1000:g} ms", final.status, steps, end - wall, start_s,
            steps / (end - wall), steps / (end - first[0]) if first else None,
            cpu * 1000 / steps, (children_cpu - used * start_cpu) * 1000 / steps if used > 1 else None,
            os.getloadavg()[0]]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--workers", default="1,2,4", help="worker processes, one row each, e.g. 1,2,4 (the default)")
    parser.add_argument("--latency", default="0,0.05", help="seconds per model call, e.g. 0,0.05")
    parser.add_argument("--concurrency", type=int, default=4, help="calls in flight per model (8 models)")
    args = parser.parse_args()
    from s3gym_tui.providers import configured_litellm

    configured_litellm()
    start_cpu = start_up_cpu_s()
    rows = []
    with tempfile.TemporaryDirectory(prefix="sweep-workers-") as tmp:
        for latency in [float(x) for x in args.latency.split(",")]:
            for workers in [int(x) for x in args.workers.split(",")]:
                rows.append(measure(workers, latency, args.concurrency, Path(tmp), start_cpu))
                print(rows[-1], flush=True)
    print_table(f"a sweep by worker processes ({os.cpu_count()} cores on this machine; load beside each row)",
                ["workers", "used", "latency", "status", "steps", "wall s", "to first step s", "steps/s",
                 "steps/s after start", "parent CPU ms/step", "workers' CPU ms/step (less start-up)", "load (1 min)"],
                [[("—" if v is None else v) for v in row] for row in rows])
    print(f"a worker's start-up (its imports, litellm's included), measured alone: {start_cpu:.1f} s CPU")


if __name__ == "__main__":
    main()
