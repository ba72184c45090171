"""Wall time of a sweep against a model that answers after a fixed latency (a fake OpenAI-compatible
server on 127.0.0.1), by the per-model concurrency limit; the plan's call and token bounds beside
what the sweep really used.

    python benchmarks/sweep_concurrency.py [--latency 0.05] [--runs 6] [--limits 1,4,16]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

from s3gym_tui.engine.sweep import SweepRunner  # noqa: E402
from s3gym_tui.engine.sweep_plan import plan  # noqa: E402
from s3gym_tui.models import SweepConfig  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402
from tests.fake_openai import FakeOpenAI  # noqa: E402

PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    parser.add_argument("--episodes", type=int, default=3)
    parser.add_argument("--limits", default="1,4,16")
    args = parser.parse_args()
    rows = []
    for limit in [int(x) for x in args.limits.split(",")]:
        with FakeOpenAI(delay_s=args.latency, reply=PLAY, usage="auto") as server, \
                tempfile.TemporaryDirectory() as tmp:
            model = "hosted_vllm/bench"
            config = SweepConfig(games=("trust",), pathways=("none", "history", "summary"), models=(model,),
                                 settings={"explore_episodes": args.episodes, "eval_every": args.episodes,
                                           "eval_episodes": 3},
                                 api_bases={model: (server.base_url,)}, concurrency=limit, runs_per_model=limit)
            planned = plan(config.run_configs())
            store = Store(Path(tmp) / "bench.db")
            sweep, _ = store.sweeps.create_sweep(config)
            started = time.perf_counter()
            final = asyncio.run(SweepRunner(store, sweep, backoff_base_s=0).run())
            wall = time.perf_counter() - started
            usage = store.sweeps.sweep_usage(sweep.id)
            rows.append([limit, final.status, usage["calls"], planned.calls, usage["tokens_in"], planned.tokens_in,
                         server.peak, wall, usage["calls"] * args.latency / wall])
            store.close()
    print_table(f"sweep of 3 Trust runs ({args.episodes} exploration episodes, 3 eval episodes per checkpoint), "
                f"{args.latency * 1000:.0f} ms per call",
                ["concurrency", "status", "calls", "calls (plan)", "tokens in", "tokens in (plan)",
                 "peak in flight", "wall s", "calls in flight (mean)"], rows)


if __name__ == "__main__":
    main()
