"""Protocol runs from the command line: run, resume, runs, report, audit, export."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

from s3gym_tui.cli.common import DbOption, JsonOption, ModelFailed, UserError, _fmt, _store, cli, console, emit_json


@cli.command()
def run(
    game: str = typer.Argument(..., help="Game name (see `s3gym games`)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", help="Any litellm model string (default: the "
                                        "config's default_model, or $S3GYM_MODEL)."),
    pathway: str = typer.Option("none", "--pathway", "-p", help="none | history | summary"),
    episodes: int = typer.Option(30, "--episodes", help="Exploration episodes."),
    eval_every: int = typer.Option(3, "--eval-every", help="Evaluate after every N exploration episodes."),
    eval_episodes: int = typer.Option(3, "--eval-episodes", help="Evaluation episodes per checkpoint."),
    history_budget: int = typer.Option(100_000, "--history-budget", help="Tokens of previous-episode history."),
    max_tokens: int = typer.Option(14_000, "--max-tokens", help="Output cap per response."),
    temperature: float = typer.Option(0.0, "--temperature"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Decoding seed passed to the model."),
    api_base: List[str] = typer.Option([], "--api-base", help="The model's server; repeat for replicas "
                                       "(spread by litellm's Router)."),
    oracle_feedback: bool = typer.Option(False, "--oracle-feedback", help="Ablation: show verifier rewards."),
    db: Optional[Path] = DbOption,
) -> None:
    """Start a run of the explore/evaluate protocol and follow it with progress bars."""
    from s3gym_tui.config import load_settings
    from s3gym_tui.models import RunConfig

    if pathway == "trained":
        raise UserError("the trained pathway is started with `s3gym train`, not `s3gym run`")
    model = model or load_settings().default_model  # the config file's, or $S3GYM_MODEL
    bases = [b for value in api_base for b in value.split(",") if b.strip()]
    config = RunConfig(model=model, game=game, pathway=pathway, explore_episodes=episodes,
                       eval_every=eval_every, eval_episodes=eval_episodes, history_budget=history_budget,
                       max_tokens=max_tokens, temperature=temperature, decoding_seed=seed,
                       api_base=bases[0] if len(bases) == 1 else None,
                       api_bases=tuple(bases) if len(bases) > 1 else (), oracle_feedback=oracle_feedback)
    store = _store(db)
    new_run = store.create_run(config)
    console.print(f"run [bold]{escape(new_run.id)}[/] · {config.game} · {escape(config.model)} · "
                  f"pathway {config.pathway}")
    _follow(store, new_run)


@cli.command()
def resume(run_id: str = typer.Argument(..., metavar="RUN_OR_SWEEP"), db: Optional[Path] = DbOption,
           budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Sweep: a new budget."),
           concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c",
                                                     help="Sweep: model calls in flight per model."),
           runs_per_model: Optional[int] = typer.Option(None, "--runs-per-model", help="Sweep: runs of one "
                                                        "model at once."),
           yes: bool = typer.Option(False, "--yes", "-y", help="Sweep: continue without asking.")) -> None:
    """Continue an interrupted run, or every unfinished run of a sweep, where it stopped."""
    store = _store(db)
    sweep = store.find_sweep(run_id)
    if sweep is not None:
        from s3gym_tui.cli.sweep import resume_sweep

        resume_sweep(store, sweep, budget_usd, concurrency, runs_per_model, yes)
        return
    if budget_usd is not None or concurrency is not None or runs_per_model is not None:
        raise UserError("--budget-usd, --concurrency and --runs-per-model apply to a sweep, not a run")
    target = store.get_run(run_id)
    if target.config.pathway == "trained":
        raise UserError(f"{run_id} is a training run: start a new one with `s3gym train SOURCE_RUN`")
    _follow(store, target)


def _follow(store, run) -> None:
    from s3gym_tui.engine.events import CheckpointScored, EpisodeDone, RunFinished, StepDone
    from s3gym_tui.engine.runner import ProtocolRunner

    cfg = run.config
    done_explore = sum(1 for e in store.episodes(run.id, phase="explore") if e.status == "finished")
    progress = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console)
    explore_task = progress.add_task("exploration", total=cfg.explore_episodes, completed=done_explore, info="")
    cps = cfg.checkpoints()
    cp_task = progress.add_task("checkpoints", total=len(cps), completed=len(store.checkpoints(run.id)), info="")
    step_task = progress.add_task("episode steps", total=None, info="")
    outcome: dict = {}

    def on_event(event) -> None:
        if isinstance(event, StepDone) and event.episode.phase == "explore":
            progress.update(step_task, completed=event.step.index + 1,
                            info=escape(f"last: {event.step.action[:30]!s} self {event.step.self_score}"))
        elif isinstance(event, EpisodeDone) and event.episode.phase == "explore":
            progress.advance(explore_task)
            progress.update(explore_task, info=f"last score {_fmt(event.episode.score, 2)}")
        elif isinstance(event, CheckpointScored):
            progress.advance(cp_task)
            progress.update(cp_task, info=f"x={event.checkpoint.x}: {_fmt(event.checkpoint.mean)}")
        elif isinstance(event, RunFinished):
            outcome["error"] = event.error

    with progress:
        final = asyncio.run(ProtocolRunner(store, run, on_event).run_protocol())
    if outcome.get("error"):
        raise ModelFailed(f"run {final.id} stopped: {outcome['error']} (continue with `s3gym resume {final.id}`)")
    _print_reports(store, [final])


@cli.command("runs")
def list_runs(db: Optional[Path] = DbOption, limit: int = typer.Option(50, "--limit", min=1),
              sweep: Optional[str] = typer.Option(None, "--sweep", help="Only the runs of this sweep."),
              as_json: bool = JsonOption) -> None:
    """List stored runs, newest first (or a sweep's, in plan order)."""
    from s3gym_tui.cli.tables import print_table
    from s3gym_tui.engine.report_tables import ID, TEXT, Column, ReportTable

    store = _store(db)
    runs = store.sweep_runs(store.get_sweep(sweep).id)[:limit] if sweep else store.list_runs(limit=limit)
    if as_json:
        emit_json([r.model_dump(mode="json") for r in runs])
        return
    table = ReportTable("runs", "runs", (
        Column("id", "id", ID), Column("game", "game", TEXT), Column("model", "model", TEXT, 2),
        Column("pathway", "pathway", TEXT), Column("status", "status", TEXT),
        Column("sweep", "sweep", ID, 3), Column("created", "created", TEXT, 1)),
        tuple((r.id, r.config.game, r.config.model, r.config.pathway, r.status, r.sweep_id or "-",
               r.created_at[:19]) for r in runs))
    print_table(console, table)


def _print_reports(store, runs) -> None:
    """The main tables after a run: curve, self-judging, coupling, Summary vs History."""
    from s3gym_tui.cli.tables import print_report
    from s3gym_tui.engine.report import run_report
    from s3gym_tui.engine.report_tables import build_report

    report = build_report([run_report(store, r) for r in runs])
    print_report(console, report, skip=("runs", "by_model", "judging_by_game", "coupling_by_game", "checkpoints"))
    for table in report.tables:
        if table.name == "checkpoints":
            by_run: dict = {}
            for run_id, game, _pathway, _model, x, y in table.rows:
                by_run.setdefault((run_id, game), []).append(f"x={x}:{_fmt(y, 2)}")
            for (run_id, game), points in by_run.items():
                console.print(f"{escape(run_id)} ({game}): " + "  ".join(points), soft_wrap=True)


@cli.command()
def audit(db: Optional[Path] = DbOption) -> None:
    """Leakage audit: evaluation steps used as experience, seeds reused across phases."""
    from s3gym_tui.store import audit as run_audit

    result = run_audit(_store(db))
    if result.ok:
        console.print("[green]audit clean[/]: no evaluation step feeds history, summaries or datasets; "
                      "no seed crosses phases")
        return
    for problem in result.problems:
        console.print(f"[red]leak[/] {escape(str(problem))}")
    raise typer.Exit(1)


@cli.command()
def export(run_id: str = typer.Argument(...), out: Optional[Path] = typer.Option(None, "--out", "-o"),
           db: Optional[Path] = DbOption) -> None:
    """Export a run's episodes and steps as JSONL (one object a line)."""
    from s3gym_tui.engine.export import export_run

    store = _store(db)
    run = store.get_run(run_id)  # before opening --out: an unknown run must not truncate the file
    handle = open(out, "w", encoding="utf-8") if out else sys.stdout
    try:
        count = export_run(store, run, handle)
    finally:
        if out:
            handle.close()
    if out:
        console.print(f"wrote {count} lines to {escape(str(out))}")


