"""Wall time of a full protocol run against its exploration critical path, with a model that
answers after a fixed latency. Checkpoint evaluations run concurrently with exploration, so the
wall time should stay close to the exploration path (target: within 1.2x).

    python benchmarks/protocol_wall.py [--game trust] [--latency 0.05] [--episodes 30]
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

from s3gym_tui.engine.runner import ProtocolRunner  # noqa: E402
from s3gym_tui.models import RunConfig  # noqa: E402
from s3gym_tui.providers.scripted import ScriptedLLM  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--game", default="trust")
    parser.add_argument("--pathway", default="summary")
    parser.add_argument("--latency", type=float, default=0.05, help="seconds per model call")
    parser.add_argument("--episodes", type=int, default=30)
    args = parser.parse_args()

    original = ScriptedLLM.acompletion

    async def slow(self, *a, **k):
        await asyncio.sleep(args.latency)
        return await original(self, *a, **k)

    ScriptedLLM.acompletion = slow  # every call, exploration, evaluation and summaries, pays the latency
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "wall.db")
        run = store.runs.create_run(RunConfig(model=f"scripted/{args.game}", game=args.game, pathway=args.pathway,
                                              explore_episodes=args.episodes))
        started = time.perf_counter()
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        wall = time.perf_counter() - started
        explore_calls = sum(len(store.episodes.steps(e.id)) for e in store.episodes.list(run.id, phase="explore"))
        eval_calls = sum(len(store.episodes.steps(e.id)) for e in store.episodes.list(run.id, phase="eval"))
        summary_calls = len(store.summaries.list(run.id))
        last_eval = max((len(store.episodes.steps(e.id)) for e in store.episodes.list(run.id, phase="eval")
                         if e.checkpoint == args.episodes), default=0)
    critical = (explore_calls + summary_calls) * args.latency
    serial = (explore_calls + eval_calls + summary_calls) * args.latency
    print_table(f"protocol wall time ({args.game}, {args.pathway}, {args.episodes} exploration episodes, "
                f"{args.latency * 1000:.0f} ms per call)",
                ["figure", "value"],
                [["exploration calls (+ summaries)", explore_calls + summary_calls],
                 ["evaluation calls", eval_calls],
                 ["exploration critical path s", critical],
                 ["all calls one after another s", serial],
                 ["wall time s", wall],
                 ["wall / exploration path", wall / critical],
                 ["wall / (path + final checkpoint's eval)", wall / (critical + last_eval * args.latency)]])


if __name__ == "__main__":
    main()
