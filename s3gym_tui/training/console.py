"""`s3gym train` in the terminal: rich progress bars (dataset, loss per step, epochs, evaluation) and the
final tables. The command itself (options, errors) lives in s3gym_tui/cli/train.py."""

from __future__ import annotations

import asyncio
from typing import Optional

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

from s3gym_tui.engine.events import CheckpointScored, EpisodeDone, StepDone
from s3gym_tui.training.pipeline import Hooks, TrainingOutcome, TrainOptions, train_from_run


def _fmt(value: Optional[float], digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def run_training(console: Console, store, run_id: str, options: TrainOptions) -> TrainingOutcome:
    progress = Progress(TextColumn("{task.description:<11}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console)
    tasks: dict[str, int] = {"dataset": progress.add_task("dataset", total=None, info="")}

    def task(name: str, total: Optional[int]) -> int:
        if name not in tasks:
            tasks[name] = progress.add_task(name, total=total, info="")
        return tasks[name]

    def on_dataset(seen: int, total: int) -> None:
        progress.update(tasks["dataset"], total=total, completed=seen)

    def on_built(build, exported) -> None:
        c = build.dataset.counts
        progress.update(tasks["dataset"], total=build.quality.steps, completed=build.quality.steps)
        progress.update(tasks["dataset"], info=escape(f"{build.dataset.id}: kept {c.get('kept', 0)}, corrected "
                                                      f"{c.get('corrected', 0)}, dropped {c.get('dropped', 0)}"))
        if options.backend == "local":
            task("loading base", None)
            progress.update(tasks["loading base"], info="converting / loading the base model")

    def on_train(event) -> None:
        if event.kind == "load" and "loading base" in tasks:
            progress.update(tasks["loading base"], total=1, completed=1, info="ready")
        elif event.kind == "step":
            t = task("training", event.max_steps or None)
            progress.update(t, total=event.max_steps or None, completed=event.step,
                            info=f"loss {event.loss:.4f} · epoch {event.epoch:.2f}")
        elif event.kind == "epoch":
            t = task("epochs", options.train.epochs)
            progress.advance(t)
            progress.update(t, info=escape(f"saved {event.adapter_dir.name}"))

    def on_remote(status: str, job) -> None:
        progress.update(task("remote job", None), info=escape(f"{getattr(job, 'id', '')} {status}"))

    def on_run(run) -> None:
        cfg = run.config
        checkpoints = len([x for x in cfg.checkpoints()])
        progress.update(task("evaluation", checkpoints * cfg.eval_episodes), info=escape(run.id))

    def on_eval(event) -> None:
        if "evaluation" not in tasks:
            return
        t = tasks["evaluation"]
        if isinstance(event, StepDone):
            progress.update(t, info=escape(f"epoch {event.episode.checkpoint} · step {event.step.index + 1} · "
                                           f"{event.step.action[:24]}"))
        elif isinstance(event, EpisodeDone):
            progress.advance(t)
        elif isinstance(event, CheckpointScored):
            progress.update(t, info=f"epoch {event.checkpoint.x}: mean "
                            f"{'-' if event.checkpoint.mean is None else format(event.checkpoint.mean, '.3f')}")

    hooks = Hooks(dataset_progress=on_dataset, dataset_built=on_built, train_event=on_train,
                  remote_status=on_remote, run_created=on_run, eval_event=on_eval)
    with progress:
        outcome = asyncio.run(train_from_run(store, run_id, options, hooks))
    print_outcome(console, outcome)
    return outcome


def print_outcome(console: Console, outcome: TrainingOutcome) -> None:
    build, report = outcome.build, outcome.report
    q = build.quality
    data = Table(title="dataset (self-judged selection vs verifier)")
    for col in ("dataset", "kept", "corrected", "dropped", "precision", "recall", "eval steps excluded"):
        data.add_column(col, justify="left" if col == "dataset" else "right", no_wrap=True)
    data.add_row(escape(build.dataset.id), str(q.kept), str(q.corrected), str(q.dropped), _fmt(q.precision),
                 _fmt(q.recall), str(build.excluded_eval_steps))
    console.print(data)
    console.print(f"JSONL: {escape(str(outcome.exported.prompt_completion))} (TRL prompt/completion), "
                  f"{escape(str(outcome.exported.messages))} (OpenAI messages)", soft_wrap=True)
    cps = Table(title=f"checkpoints of {escape(report.run.id)} (strict mode, eval seeds)")
    for col in ("epoch", "model", "mean score", "vs epoch 0", "negative transfer", "repaired replies"):
        cps.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    for row in report.rows:
        cps.add_row(str(row.epoch), escape(row.model), _fmt(row.mean), _fmt(row.delta),
                    "[red]yes[/]" if row.negative else "", "-" if row.repaired is None else str(row.repaired))
    console.print(cps)
    c = report.curve
    metrics = Table(title="training curve metrics (over epochs)")
    for col in ("Avg", "Max", "final delta", "AUC+", "NABA", "loss first -> last", "train s"):
        metrics.add_column(col, justify="right", no_wrap=True)
    losses = report.info.losses
    loss = f"{losses[0].loss:.3f} -> {losses[-1].loss:.3f}" if losses else "-"
    metrics.add_row(_fmt(c.avg), _fmt(c.max), _fmt(c.final_delta), _fmt(c.auc_plus), _fmt(c.naba), loss,
                    f"{report.info.train_seconds:.0f}")
    console.print(metrics)
    if report.negative_transfer:
        console.print(f"[red]negative transfer[/] at epoch(s) {', '.join(map(str, report.negative_transfer))}: "
                      f"below the base model (epoch 0)")
