"""The learning signal of a real tiny GRPO run on the embedded SmolLM2-135M (CPU): per update, the share of
groups with zero reward variance, reward std, parsed replies, grad norm and the no-signal verdict, as
TRL logs them and s3gym stores them (learning_signal.py), then the summary line.

Data: a scripted Trust run's exploration seeds. No evaluation (the figures are the training's own).

    LITELLM_LOCAL_MODEL_COST_MAP=True nice -n 10 .venv/bin/python benchmarks/grpo_signal.py \
        [--reward self] [--updates 4] [--generations 4] [--states 1] [--game trust]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--reward", default="self", choices=("self", "stated", "oracle"))
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--states", type=int, default=1)
    parser.add_argument("--completion-tokens", type=int, default=32)
    parser.add_argument("--game", default="trust")
    args = parser.parse_args()

    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import Store
    from s3gym_tui.training.backend import resolve_base
    from s3gym_tui.training.grpo import train_grpo
    from s3gym_tui.training.learning_signal import SIGNAL_KEYS, signal_summaries
    from s3gym_tui.training.config import GrpoConfig

    folder = Path(tempfile.mkdtemp(prefix="grpo-signal-"))
    with Store(folder / "b.db") as store:
        run = store.runs.create_run(RunConfig(model=f"scripted/{args.game}", game=args.game, pathway="none",
                                              explore_episodes=2, eval_every=2, eval_episodes=1))
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        seeds = [run.config.explore_seed(i) for i in range(2)]
    base = resolve_base("default")
    started = time.perf_counter()

    def progress(event) -> None:
        if event.kind == "step":
            figures = "  ".join(f"{k} {event.metrics[k]:.4g}" for k in SIGNAL_KEYS if k in event.metrics)
            print(f"update {event.step}: loss {event.loss:.4g}  {figures}  reward {event.metrics.get('reward', 0):.3g}"
                  f"  verifier {event.metrics.get('verifier_reward', float('nan')):.3g}"
                  + (f"  NO SIGNAL: {event.warning}" if event.warning else ""), flush=True)

    result = train_grpo(args.game, seeds, base, folder / "adapters",
                        GrpoConfig(reward=args.reward, updates=args.updates, num_generations=args.generations,
                                   states_per_update=args.states, save_every=args.updates,
                                   max_completion_length=args.completion_tokens, rollout_step_cap=2, warm_start=0),
                        progress)
    for summary in signal_summaries(result.losses):
        print(summary.line, summary.as_dict())
    print(f"{result.steps} updates in {time.perf_counter() - started:.0f} s, peak RSS {result.peak_rss_mb:.0f} MB "
          f"({args.reward} reward, G={args.generations}, {args.states} state(s) per update, {args.game})")


if __name__ == "__main__":
    main()
