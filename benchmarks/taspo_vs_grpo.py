"""TASPO vs episode-level GRPO at the same budget on one game, the bundled SmolLM2-135M (CPU), 3 training
seeds. Each training goes through the pipeline a person uses (train_from_run: rollouts stored as
exploration episodes, updates, checkpoints, strict evaluation on the source run's evaluation seeds,
replies scored as written). Both methods get the same updates, group size, rollout step cap, completion
tokens, learning rate and seeds; TASPO only redistributes each episode's advantage over its actions
(A_i * w_it, action-level credit, PI from successful siblings by the analyzer: the source run's model).

Printed per training: per update the reward and the verifier's return; for TASPO the share of turns with
aligned PI and how far weights moved (from the credit stored with each rollout); per checkpoint (x = 0:
the base) the strict evaluation score. Then a table: final strict score per method and seed, the mean
over seeds, and the mean change against the base. Figures are whatever they are.

    LITELLM_LOCAL_MODEL_COST_MAP=True nice -n 10 .venv/bin/python benchmarks/taspo_vs_grpo.py \
        [--game trust] [--seeds 0,1,2] [--updates 3] [--generations 4] [--rollout-step-cap 3] \
        [--eval-episodes 2] [--step-cap 3] [--reward oracle|self] [--analyzer MODEL] [--tau 1] [--kappa 0.05] \
        [--base default|HF_DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def num(value, fmt=".2f") -> str:
    return "—" if value is None else format(value, fmt)


def credit_figures(store, training_id: str) -> tuple[int, int, int, float]:
    """(rollouts credited, turns, turns with aligned PI, max |w - 1|) from the stored credit."""
    rows = store.conn.execute(
        "SELECT a.weight, a.item_ids FROM action_credits a JOIN episode_credits c ON c.id = a.credit_id "
        "WHERE c.training_id = ?", (training_id,)).fetchall()
    episodes = store.conn.execute("SELECT count(*) FROM episode_credits WHERE training_id = ?",
                                  (training_id,)).fetchone()[0]
    aligned = sum(1 for _, items in rows if items not in ("[]", None))
    gap = max([abs(w - 1) for w, _ in rows if w is not None] or [0.0])
    return episodes, len(rows), aligned, gap


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--game", default="trust")
    parser.add_argument("--seeds", default="0,1,2")
    parser.add_argument("--updates", type=int, default=3)
    parser.add_argument("--generations", type=int, default=4)
    parser.add_argument("--completion-tokens", type=int, default=16)
    parser.add_argument("--rollout-step-cap", type=int, default=3)
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--step-cap", type=int, default=3)
    parser.add_argument("--lr", type=float, default=5e-4)
    parser.add_argument("--reward", default="oracle", help="oracle (a signal on this model) or self")
    parser.add_argument("--analyzer", default=None, help="default: the source run's model (scripted/<game>)")
    parser.add_argument("--kappa", type=float, default=0.05)
    parser.add_argument("--tau", type=float, default=1.0)
    parser.add_argument("--eps-w", type=float, default=0.5)
    parser.add_argument("--methods", default="grpo,taspo")
    parser.add_argument("--base", default="default", help="default: the bundled SmolLM2-135M; or an HF directory "
                        "(a tiny random model checks the harness, its figures mean nothing)")
    args = parser.parse_args()

    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import Store, audit
    from s3gym_tui.training.evaluate import training_report
    from s3gym_tui.training.config import build
    from s3gym_tui.training.pipeline import Hooks, train_from_run

    folder = Path(tempfile.mkdtemp(prefix="taspo-vs-grpo-"))
    os.environ.setdefault("S3GYM_TRAINING_DIR", str(folder / "training"))
    seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
    methods = [m for m in args.methods.split(",") if m]
    results: dict[tuple[str, int], tuple] = {}
    started_all = time.perf_counter()
    with Store(folder / "b.db") as store:
        source = store.runs.create_run(RunConfig(model=f"scripted/{args.game}", game=args.game, pathway="none",
                                                 explore_episodes=2, eval_every=2, eval_episodes=args.eval_episodes))
        asyncio.run(ProtocolRunner(store, source, backoff_base_s=0).run_protocol())
        print(f"source run {source.id}: {args.game}, {args.eval_episodes} evaluation episodes, step cap "
              f"{args.step_cap}; budget per training: {args.updates} updates x G={args.generations} episodes "
              f"(rollout step cap {args.rollout_step_cap}, {args.completion_tokens} tokens a reply), lr {args.lr}, "
              f"reward {args.reward}; store {folder / 'b.db'}", flush=True)
        for seed in seeds:
            for method in methods:
                grpo = build(method, dict(
                    reward=args.reward, updates=args.updates, num_generations=args.generations, states_per_update=1,
                    save_every=args.updates, max_completion_length=args.completion_tokens, warm_start=0,
                    rollout_step_cap=args.rollout_step_cap, learning_rate=args.lr, level="episode", seed=seed,
                    base=args.base, eval_episodes=args.eval_episodes, step_cap=args.step_cap,
                    **({"credit": "action", "kappa": args.kappa, "tau": args.tau, "eps_w": args.eps_w,
                        "analyzer": args.analyzer} if method == "taspo" else {})))
                name = f"{method}/seed {seed}"
                t0 = time.perf_counter()

                def on_event(event, name=name, t0=t0) -> None:
                    if event.kind == "step":
                        m = event.metrics
                        print(f"  [{name}] update {event.step}: reward {num(m.get('reward'))}, verifier "
                              f"{num(m.get('verifier_reward'))}, reward std {num(m.get('reward_std'))}, "
                              f"{time.perf_counter() - t0:.0f} s", flush=True)

                outcome = asyncio.run(train_from_run(store, source.id, grpo, Hooks(train_event=on_event)))
                report = training_report(store, outcome.run)
                rows = {row.epoch: row for row in report.rows}
                final = rows[max(rows)]
                results[(method, seed)] = (final.mean, rows.get(0).mean if 0 in rows else None)
                print(f"{name}: training {outcome.training.id} ({time.perf_counter() - t0:.0f} s)", flush=True)
                if method == "taspo":
                    n, turns, aligned, gap = credit_figures(store, outcome.training.id)
                    print(f"  credit stored for {n} rollouts: {aligned}/{turns} turns with aligned PI, "
                          f"max |w - 1| = {gap:.3f}", flush=True)
                for row in report.rows:
                    print(f"  x={row.epoch}: strict score {num(row.mean)} {list(row.scores)}", flush=True)
        print(f"audit: {'clean' if audit(store).ok else 'LEAK'}")
    print()
    print(f"{'method':<8} " + " ".join(f"seed {s:<6}" for s in seeds) + " mean     mean change vs base")
    for method in methods:
        finals = [results[(method, s)][0] for s in seeds]
        deltas = [f - b for f, b in (results[(method, s)] for s in seeds) if f is not None and b is not None]
        known = [f for f in finals if f is not None]
        print(f"{method:<8} " + " ".join(f"{num(f):<11}" for f in finals)
              + f" {num(statistics.mean(known) if known else None):<8} "
              + f"{num(statistics.mean(deltas) if deltas else None, '+.2f')}")
    print(f"total {time.perf_counter() - started_all:.0f} s")


if __name__ == "__main__":
    main()
