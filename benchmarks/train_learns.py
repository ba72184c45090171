"""Does GRPO learn more than the format on the bundled SmolLM2-135M (CPU)? One recipe (a recipe file,
`s3gym train --config` reads the same one), trained from a scripted run of each game with several
training seeds, through the pipeline a person uses (rollouts, updates, checkpoints, strict evaluation on
the source run's evaluation seeds), every checkpoint evaluated twice: replies as written, and every reply
constrained to the game's grammar from its first token (the base under the same constraint is the
baseline: training/baseline.py). Printed per game and training seed:

- per update: parsed replies, parsed free replies, zero-variance groups, reward std and the reward
  source's own std (the format term left out), the verifier's mean reward;
- per checkpoint (x = 0 is the base): the strict score as written and under the grammar, parsed replies,
  format gain (parsed share over the base's) and play gain (under the grammar, over the base under the
  grammar);
- then per game: the mean and spread (min..max) over training seeds of the last checkpoint's play gain,
  and the verdict: a gain beyond the spread of the seeds (every seed's play gain above 0), or not.

    LITELLM_LOCAL_MODEL_COST_MAP=True nice -n 10 .venv/bin/python benchmarks/train_learns.py \
        --config benchmarks/recipes/grpo-trust-oracle.yaml [--games trust] [--seeds 0,1,2] \
        [--eval-episodes 2] [--step-cap 3] [--set key=value ...] [--json out.json]

`--base-only`: no training; the base (x = 0) alone, as written and under the grammar, on each game's
evaluation seeds (the baseline column, in a few minutes).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def pct(value) -> str:
    return "—" if value is None else f"{100 * value:.0f}%"


def num(value, fmt=".2f") -> str:
    return "—" if value is None else format(value, fmt)


def recipe_values(path: str, sets: list[str]) -> tuple[str, dict]:
    """(method, settings) of the recipe file with --set overrides (the CLI reads the same files)."""
    from s3gym_tui.training.config import field_name, read_recipe_file

    values = read_recipe_file(Path(path)) if path else {}
    for item in sets:
        key, _, text = item.partition("=")
        import yaml

        values[field_name(key.strip())] = yaml.safe_load(text)
    return str(values.pop("method", None) or "grpo"), values


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--config", default=str(Path(__file__).parent / "recipes" / "grpo-trust-oracle.yaml"))
    parser.add_argument("--games", default="trust")
    parser.add_argument("--seeds", default="0,1,2", help="training seeds")
    parser.add_argument("--eval-episodes", type=int, default=2)
    parser.add_argument("--step-cap", type=int, default=3)
    parser.add_argument("--explore-episodes", type=int, default=2)
    parser.add_argument("--set", action="append", default=[], help="KEY=VALUE over the recipe (e.g. reward=self)")
    parser.add_argument("--json", default=None, help="also write every figure here")
    parser.add_argument("--base-only", action="store_true", help="evaluate the base alone (x = 0), no training")
    args = parser.parse_args()

    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import Store
    from s3gym_tui.training.baseline import splits
    from s3gym_tui.training.config import build
    from s3gym_tui.training.evaluate import training_report
    from s3gym_tui.training.pipeline import Hooks, train_from_run

    method, values = recipe_values(args.config, args.set)
    folder = Path(tempfile.mkdtemp(prefix="train-learns-"))
    os.environ.setdefault("S3GYM_TRAINING_DIR", str(folder / "training"))
    print(f"recipe {args.config} {args.set or ''}: {method} {json.dumps(values)}; store {folder / 'b.db'}",
          flush=True)
    figures: list[dict] = []
    started_all = time.perf_counter()
    with Store(folder / "b.db") as store:
        for game in [g for g in args.games.split(",") if g]:
            source = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway="none",
                                                     explore_episodes=args.explore_episodes,
                                                     eval_every=args.explore_episodes, eval_episodes=args.eval_episodes))
            asyncio.run(ProtocolRunner(store, source, backoff_base_s=0).run_protocol())
            print(f"{game}: source run {source.id}, exploration seeds "
                  f"{[source.config.explore_seed(i) for i in range(args.explore_episodes)]}, "
                  f"{args.eval_episodes} evaluation episodes x {args.step_cap} steps", flush=True)
            if args.base_only:
                base_alone(store, source, args, figures)
                continue
            for seed in [int(s) for s in args.seeds.split(",") if s]:
                recipe = build(method, {**values, "seed": seed, "eval_episodes": args.eval_episodes,
                                        "step_cap": args.step_cap, "grammar_eval": True})
                t0, cpu0 = time.perf_counter(), time.process_time()
                label = f"{game} seed {seed}"

                def on_event(event, label=label, t0=t0) -> None:
                    if event.kind == "step" and event.phase == "warm-start":
                        print(f"  [{label}] warm start step {event.step}: loss {event.loss:.3f}, "
                              f"{time.perf_counter() - t0:.0f} s", flush=True)
                    elif event.kind == "step":
                        m = event.metrics
                        print(f"  [{label}] update {event.step}: parsed {pct(m.get('parsed_replies'))}, parsed free "
                              f"{pct(m.get('parsed_free_replies'))}, zero-variance groups "
                              f"{pct(m.get('frac_reward_zero_std'))}, reward std {num(m.get('reward_std'), '.3g')}, "
                              f"source std {num(m.get('source_reward_std'), '.3g')}, verifier "
                              f"{num(m.get('verifier_reward'), '.3g')}, {time.perf_counter() - t0:.0f} s", flush=True)

                outcome = asyncio.run(train_from_run(store, source.id, recipe, Hooks(train_event=on_event)))
                seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0  # training and evaluation
                report = training_report(store, outcome.run)
                print(f"{label}: training {outcome.training.id}, {seconds:.0f} s wall ({outcome.training.train_seconds:.0f}"
                      f" s training), {cpu:.0f} s of CPU (this process, training and evaluation)", flush=True)
                gains = {g.x: g for g in splits(report)}
                rows = []
                for row in report.rows:
                    gain = gains.get(row.epoch)
                    known = row.parsed_share is not None
                    print(f"  x={row.epoch}: as written {num(row.mean)} {list(row.scores)}, under the grammar "
                          f"{num(row.grammar.mean if row.grammar else None)}, parsed {pct(row.parsed_share)} "
                          f"({f'{row.replies - row.unparsed}/{row.replies}' if known else '—'})"
                          + ("" if gain is None else f", format gain {'—' if gain.format_gain is None else f'{100 * gain.format_gain:+.0f} pp'}"
                             f", play gain {num(gain.play_gain, '+.2f')} ({gain.verdict})"), flush=True)
                    rows.append({"x": row.epoch, "free": row.mean, "grammar": row.grammar.mean if row.grammar else None,
                                 "parsed": row.parsed_share, **({} if gain is None else gain.as_dict())})
                figures.append({"game": game, "seed": seed, "training": outcome.training.id, "seconds": seconds,
                                "cpu_seconds": cpu, "rows": rows})
            last = [f["rows"][-1] for f in figures if f["game"] == game]
            play = [r.get("play_gain") for r in last]
            known = [p for p in play if p is not None]
            if known:
                beyond = len(known) == len(play) and min(known) > 0
                print(f"{game}: last checkpoint's play gain over {len(known)} seeds: mean {sum(known) / len(known):+.2f}"
                      f", spread {min(known):+.2f}..{max(known):+.2f}: "
                      + ("GRPO beats the base under the grammar beyond the spread of the seeds" if beyond else
                         "no gain beyond the spread of the seeds (GRPO does not beat the base under the grammar)"),
                      flush=True)
    print(f"total {time.perf_counter() - started_all:.0f} s")
    if args.json:
        Path(args.json).write_text(json.dumps(figures, indent=1), encoding="utf-8")


def base_alone(store, source, args, figures: list) -> None:
    """x = 0 of a training that trained nothing, evaluated as written and under the grammar."""
    from s3gym_tui.store import Training, TrainingCheckpoint
    from s3gym_tui.training import serve
    from s3gym_tui.training.backend import resolve_base
    from s3gym_tui.training.evaluate import create_eval_run, evaluate_training, training_report
    from s3gym_tui.training.runs import new_training_id, served_model, training_root, write_manifest

    base = resolve_base(None)
    tid = new_training_id(f"{source.config.game}-base")
    training = store.trainings.add_training(Training(id=tid, method="grpo", games=(source.config.game,), source_run=source.id,
                                                     base=str(base), directory=str(training_root() / tid), status="finished"))
    store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=tid, x=0, model=served_model(tid, 0), step=0))
    write_manifest(training_root() / tid, tid, base, {})
    serve.HANDLER.add_training(tid, base, {})
    serve.register()
    t0, cpu0 = time.perf_counter(), time.process_time()
    written = create_eval_run(store, training, source.config, [0], eval_episodes=args.eval_episodes,
                              step_cap=args.step_cap, run_id=tid)
    constrained = create_eval_run(store, training, source.config, [0], eval_episodes=args.eval_episodes,
                                  step_cap=args.step_cap, run_id=f"{tid}-grammar", decoding="grammar")
    for run in (written, constrained):
        asyncio.run(evaluate_training(store, run))
    (row,) = training_report(store, written).rows
    print(f"  base (x = 0): as written {num(row.mean)} {list(row.scores)}, parsed {pct(row.parsed_share)}; under the "
          f"grammar {num(row.grammar.mean)} {list(row.grammar.scores)}; {time.perf_counter() - t0:.0f} s wall, "
          f"{time.process_time() - cpu0:.0f} s CPU", flush=True)
    figures.append({"game": source.config.game, "base_free": row.mean, "base_grammar": row.grammar.mean,
                    "parsed": row.parsed_share})


if __name__ == "__main__":
    main()
