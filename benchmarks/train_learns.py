"""Does GRPO learn on the bundled SmolLM2-135M (CPU)? Step-level and episode-level GRPO on one game,
with the oracle reward (the ablation that should learn if anything does) and the self-judged reward
(the default, reported as it comes). Each training goes through the pipeline a person uses
(train_from_run: rollouts, updates, checkpoints, strict evaluation on the source run's evaluation
seeds, replies scored as written); printed per training:

- per update: parsed replies (all sampled), parsed free replies (the half of each group sampled
  without the grammar: whether the policy itself writes the answer line), zero-variance groups,
  reward std;
- per checkpoint (x = 0 is the base): strict evaluation score (mean over the evaluation episodes)
  and parsed replies % in the evaluation (as written, no repair).

Goal (issue 27): parsed replies >= 90% and a score above the base's on the evaluation seeds.

    LITELLM_LOCAL_MODEL_COST_MAP=True nice -n 10 .venv/bin/python benchmarks/train_learns.py \
        [--game trust] [--updates 4] [--save-every 2] [--generations 4] [--eval-episodes 2] [--step-cap 3] \
        [--lr 5e-4] [--warm-start 0] [--warm-start-epochs 2] [--only step-oracle,episode-oracle,step-self,episode-self]
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

CONFIGS = ("step-oracle", "episode-oracle", "step-self", "episode-self")


def pct(value) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def num(value, fmt=".3g") -> str:
    return "—" if value is None else format(value, fmt)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--game", default="trust")
    parser.add_argument("--updates", type=int, default=4)
    parser.add_argument("--save-every", type=int, default=2)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--completion-tokens", type=int, default=16)
    parser.add_argument("--rollout-step-cap", type=int, default=3)
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--step-cap", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--warm-start", type=int, default=0, help="format warm-start examples before GRPO")
    parser.add_argument("--warm-start-epochs", type=int, default=2)
    parser.add_argument("--only", default=",".join(CONFIGS))
    args = parser.parse_args()

    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import Store
    from s3gym_tui.training.evaluate import training_report
    from s3gym_tui.training.options import GrpoConfig, TrainOptions
    from s3gym_tui.training.pipeline import Hooks, train_from_run
    from s3gym_tui.training.rollout_store import rollout_run_id

    folder = Path(tempfile.mkdtemp(prefix="train-learns-"))
    os.environ.setdefault("S3GYM_TRAINING_DIR", str(folder / "training"))
    started_all = time.perf_counter()
    with Store(folder / "b.db") as store:
        source = store.create_run(RunConfig(model=f"scripted/{args.game}", game=args.game, pathway="none",
                                            explore_episodes=2, eval_every=2, eval_episodes=args.eval_episodes))
        asyncio.run(ProtocolRunner(store, source, backoff_base_s=0).run_protocol())
        print(f"source run {source.id}: {args.game}, exploration seeds "
              f"{[source.config.explore_seed(i) for i in range(2)]}, {args.eval_episodes} evaluation episodes, "
              f"step cap {args.step_cap}; store {folder / 'b.db'}", flush=True)
        for name in [c for c in args.only.split(",") if c]:
            level, reward = name.split("-")
            grpo = GrpoConfig(reward=reward, updates=args.updates, num_generations=args.generations,
                              states_per_update=1, save_every=args.save_every,
                              max_completion_length=args.completion_tokens, rollout_step_cap=args.rollout_step_cap,
                              learning_rate=args.lr, level=level, warm_start=args.warm_start,
                              warm_start_epochs=args.warm_start_epochs)

            def on_event(event, name=name) -> None:
                if event.kind == "step" and event.phase == "warm-start":
                    print(f"  [{name}] warm start step {event.step}: loss {event.loss:.3f}, "
                          f"{time.perf_counter() - t0:.0f} s", flush=True)
                elif event.kind == "step":
                    m = event.metrics
                    print(f"  [{name}] update {event.step}: parsed {pct(m.get('parsed_replies'))}, parsed free "
                          f"{pct(m.get('parsed_free_replies'))}, zero-variance groups "
                          f"{pct(m.get('frac_reward_zero_std'))}, reward std {num(m.get('reward_std'))}, "
                          f"reward source std {num(m.get('source_reward_std'))}, reward {num(m.get('reward'))}, verifier {num(m.get('verifier_reward'))}, "
                          f"{time.perf_counter() - t0:.0f} s", flush=True)

            t0 = time.perf_counter()
            outcome = asyncio.run(train_from_run(store, source.id, TrainOptions(
                method="grpo", grpo=grpo, eval_episodes=args.eval_episodes, step_cap=args.step_cap),
                Hooks(train_event=on_event)))
            seconds = time.perf_counter() - t0
            report = training_report(store, outcome.run)
            print(f"{name}: training {outcome.training.id} ({seconds:.0f} s, {outcome.training.train_seconds:.0f} s "
                  f"training), sampling {grpo.sampling}, format weight {grpo.format_weight}", flush=True)
            if level == "episode":
                episodes = store.episodes(rollout_run_id(outcome.training.id))
                print(f"  rollout episodes stored: {len(episodes)} (run {rollout_run_id(outcome.training.id)}), "
                      f"seeds {sorted({e.seed for e in episodes})}")
            for row in report.rows:
                known = bool(row.replies) and row.unparsed is not None
                parsed = (row.replies - row.unparsed) / row.replies if known else None
                print(f"  x={row.epoch}: strict score {num(row.mean, '.2f')} {list(row.scores)}, parsed replies "
                      f"{pct(parsed)} ({f'{row.replies - row.unparsed}/{row.replies}' if known else '—'})"
                      + ("" if row.epoch == 0 else f", delta vs base {num(row.delta, '+.2f')}"), flush=True)
    print(f"total {time.perf_counter() - started_all:.0f} s")


if __name__ == "__main__":
    main()
