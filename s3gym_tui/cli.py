"""The headless command line: run, resume, runs, report, audit, export, play, models, games."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import List, Optional

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table

# Piped output is not wrapped at 80 columns: tables stay whole for files and other programs.
console = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 400)
cli = typer.Typer(add_completion=False, no_args_is_help=False, pretty_exceptions_enable=False,
                  help="s3gym: watch, judge and steer LLM agents on the seven S3Gym games.")

DbOption = typer.Option(None, "--db", help="SQLite file (default: $S3GYM_DB or the user data dir).")


class UserError(Exception):
    """An error to show the user as one line (exit code 2)."""


def _store(db: Optional[Path]):
    """The store at --db, else the config file's `db` (or $S3GYM_DB), else the default path."""
    from s3gym_tui.config import load_settings
    from s3gym_tui.store import Store, default_db_path

    return Store(db or load_settings().db or default_db_path())


def _fmt(value: Optional[float], digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


@cli.command()
def run(
    game: str = typer.Argument(..., help="Game name (see `s3gym games`)."),
    model: str = typer.Option("local/smollm2-135m", "--model", "-m", help="Any litellm model string."),
    pathway: str = typer.Option("none", "--pathway", "-p", help="none | history | summary"),
    episodes: int = typer.Option(30, "--episodes", help="Exploration episodes."),
    eval_every: int = typer.Option(3, "--eval-every", help="Evaluate after every N exploration episodes."),
    eval_episodes: int = typer.Option(3, "--eval-episodes", help="Evaluation episodes per checkpoint."),
    history_budget: int = typer.Option(100_000, "--history-budget", help="Tokens of previous-episode history."),
    max_tokens: int = typer.Option(14_000, "--max-tokens", help="Output cap per response."),
    temperature: float = typer.Option(0.0, "--temperature"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Decoding seed passed to the model."),
    api_base: Optional[str] = typer.Option(None, "--api-base"),
    oracle_feedback: bool = typer.Option(False, "--oracle-feedback", help="Ablation: show verifier rewards."),
    db: Optional[Path] = DbOption,
) -> None:
    """Start a run of the explore/evaluate protocol and follow it with progress bars."""
    from s3gym_tui.models import RunConfig

    if pathway == "trained":
        raise UserError("the trained pathway is started with `s3gym train`, not `s3gym run`")
    config = RunConfig(model=model, game=game, pathway=pathway, explore_episodes=episodes,
                       eval_every=eval_every, eval_episodes=eval_episodes, history_budget=history_budget,
                       max_tokens=max_tokens, temperature=temperature, decoding_seed=seed,
                       api_base=api_base, oracle_feedback=oracle_feedback)
    store = _store(db)
    new_run = store.create_run(config)
    console.print(f"run [bold]{escape(new_run.id)}[/] · {config.game} · {escape(config.model)} · "
                  f"pathway {config.pathway}")
    _follow(store, new_run)


@cli.command()
def resume(run_id: str = typer.Argument(...), db: Optional[Path] = DbOption) -> None:
    """Continue an interrupted run where it stopped."""
    store = _store(db)
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
            progress.update(cp_task, info=f"x={event.checkpoint.x}: {event.checkpoint.mean:.3f}")
        elif isinstance(event, RunFinished):
            outcome["error"] = event.error

    with progress:
        final = asyncio.run(ProtocolRunner(store, run, on_event).run_protocol())
    if outcome.get("error"):
        raise UserError(f"run {final.id} stopped: {outcome['error']} (continue with `s3gym resume {final.id}`)")
    _print_reports(store, [final])


@cli.command("runs")
def list_runs(db: Optional[Path] = DbOption, limit: int = typer.Option(50, "--limit")) -> None:
    """List stored runs, newest first."""
    store = _store(db)
    table = Table(title="runs")
    for col in ("id", "game", "model", "pathway", "status", "created"):
        table.add_column(col)
    for r in store.list_runs(limit=limit):
        table.add_row(escape(r.id), r.config.game, escape(r.config.model), r.config.pathway, r.status,
                      r.created_at[:19])
    console.print(table)


def _print_reports(store, runs) -> None:
    from s3gym_tui.engine.report import run_report, summary_vs_history

    reports = [run_report(store, r) for r in runs]
    curve = Table(title="checkpoint curve (eval episodes, verifier scores)")
    for col in ("run", "pathway", "y0", "Avg", "Max", "AUC+", "NABA", "final"):
        curve.add_column(col, justify="left" if col in ("run", "pathway") else "right", no_wrap=True)
    judging = Table(title="self-judging (exploration steps)")
    for col in ("run", "steps", "missing", "agree", "NMAE", "over", "under", "corr(A,g)"):
        judging.add_column(col, justify="left" if col == "run" else "right", no_wrap=True)
    for rep in reports:
        c, j = rep.curve, rep.judging
        curve.add_row(escape(rep.run.id), rep.run.config.pathway, _fmt(c.y0), _fmt(c.avg), _fmt(c.max),
                      _fmt(c.auc_plus), _fmt(c.naba), _fmt(c.final))
        judging.add_row(escape(rep.run.id), str(j.n), str(j.missing), _fmt(j.agreement), _fmt(j.nmae), _fmt(j.over),
                        _fmt(j.under), _fmt(rep.coupling.corr_agreement))
    console.print(curve)
    console.print(judging)
    for rep in reports:
        console.print(f"{escape(rep.run.id)} ({rep.run.config.game}): " +
                      "  ".join(f"x={x}:{_fmt(y, 2)}" for x, y in rep.points), soft_wrap=True)
    rows = summary_vs_history(reports)
    if rows:
        delta = Table(title="Summary vs History (Delta NABA)")
        for col in ("game", "n", "wins", "losses", "ties", "mean"):
            delta.add_column(col)
        for row in rows:
            delta.add_row(row.game, str(row.n), str(row.wins), str(row.losses), str(row.ties),
                          _fmt(row.mean_delta))
        console.print(delta)


@cli.command()
def report(run_ids: List[str] = typer.Argument(None), db: Optional[Path] = DbOption) -> None:
    """The paper's tables for the chosen runs (default: all finished runs)."""
    store = _store(db)
    runs = [store.get_run(r) for r in run_ids] if run_ids else \
        [r for r in store.list_runs(limit=10_000) if r.status == "finished"]
    if not runs:
        raise UserError("no finished runs to report on")
    _print_reports(store, runs)


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


@cli.command()
def train(
    run_id: str = typer.Argument(..., help="The run whose exploration steps become the training data."),
    threshold: float = typer.Option(0.0, "--threshold", help="Keep steps whose self-score is above this."),
    epochs: int = typer.Option(2, "--epochs", min=1, help="Training epochs (one checkpoint each)."),
    base: str = typer.Option("default", "--base", help="HF model directory, or 'default' (embedded SmolLM2-135M)."),
    correction: str = typer.Option("none", "--correction", help="none | reference | a litellm model string."),
    max_examples: Optional[int] = typer.Option(None, "--max-examples", min=1, help="Stop after N examples."),
    eval_episodes: Optional[int] = typer.Option(None, "--eval-episodes", min=0,
                                                help="Evaluation episodes per checkpoint (default: the run's)."),
    backend: str = typer.Option("local", "--backend", help="local (LoRA with TRL) | remote (provider's API)."),
    remote_model: Optional[str] = typer.Option(None, "--remote-model", help="e.g. openai/gpt-4o-mini-2024-07-18"),
    max_steps: int = typer.Option(-1, "--max-steps", help="Cap on optimizer steps (overrides --epochs)."),
    batch_size: int = typer.Option(2, "--batch-size", min=1),
    grad_accum: int = typer.Option(2, "--grad-accum", min=1),
    learning_rate: float = typer.Option(5e-4, "--lr"),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing",
                                                help="Less RAM, ~40% slower on CPU."),
    step_cap: Optional[int] = typer.Option(None, "--step-cap", min=1, max=64, help="Steps per eval episode."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where adapters and JSONL go (default: "
                                       "$S3GYM_TRAINING_DIR or the user data dir, where any process finds "
                                       "trained/<id>/<epoch>)."),
    db: Optional[Path] = DbOption,
) -> None:
    """Fine-tune on a run's self-judged exploration steps and evaluate every epoch (Training pathway)."""
    from s3gym_tui.training import MissingExtra, require_extra

    try:
        if backend == "local":
            require_extra()  # before anything is written: one line saying how to install it
        from s3gym_tui.training.backend import TrainConfig
        from s3gym_tui.training.console import run_training
        from s3gym_tui.training.pipeline import TrainingError, TrainOptions
    except MissingExtra as exc:
        raise UserError(str(exc)) from None
    options = TrainOptions(
        threshold=threshold, correction=correction, max_examples=max_examples, backend=backend, base=base,
        remote_model=remote_model, eval_episodes=eval_episodes, step_cap=step_cap, out_dir=out,
        train=TrainConfig(epochs=epochs, max_steps=max_steps, batch_size=batch_size, grad_accum=grad_accum,
                          learning_rate=learning_rate, gradient_checkpointing=gradient_checkpointing))
    try:
        run_training(console, _store(db), run_id, options)
    except (MissingExtra, TrainingError) as exc:
        raise UserError(str(exc)) from None


@cli.command()
def play(game: str = typer.Argument(...), mode: str = typer.Option("explore", "--mode"),
         seed: int = typer.Option(0, "--seed"), delay: float = typer.Option(0.0, "--delay")) -> None:
    """Watch the game's reference policy play one episode in the terminal (no model, no store)."""
    import time

    import games

    g = games.make(game, mode)
    g.reset(seed)
    policy = games.reference_policy(game)
    console.print(g.render())
    while not g.done:
        move = policy.act(g.view())
        result = g.step(move.action)
        console.rule(f"step {g.steps}: {move.action}  (self-score {move.expected_reward:g}, reward {result.reward:g})")
        console.print(escape(result.feedback))
        console.print(g.render())
        if delay:
            time.sleep(delay)
    console.print(f"[bold]final score {g.score():g}[/]")


@cli.command()
def models() -> None:
    """The built-in models (no key, no network); any litellm model string works too."""
    from s3gym_tui.providers import BUILTIN_MODELS

    table = Table(title="built-in models")
    table.add_column("model")
    table.add_column("what it is")
    for name, description in BUILTIN_MODELS:
        table.add_row(name, description)
    console.print(table)


@cli.command("games")
def list_games() -> None:
    """The seven games."""
    import games

    table = Table(title="games")
    table.add_column("name")
    table.add_column("title")
    table.add_column("description")
    for name in games.names():
        cls = games.game_class(name)
        table.add_row(name, cls.title, cls.description)
    console.print(table)


@cli.command()
def tui(db: Optional[Path] = DbOption,
        model: Optional[str] = typer.Option(None, "--model", help="Default model (else the config file's, "
                                            "else local/smollm2-135m).")) -> None:
    """Open the terminal app (the default when s3gym is run with no command)."""
    from s3gym_tui.app import S3GymApp
    from s3gym_tui.store import Store

    app = S3GymApp(db_path=db, default_model=model)  # reads the config file (ConfigError: one line)
    Store(app.db_path).close()  # a corrupt, newer or unreadable database: one line, before the screen opens
    app.run()


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point: one clear line and a non-zero exit for every user error, never a traceback."""
    from pydantic import ValidationError

    from games import GameError
    from s3gym_tui.config import ConfigError
    from s3gym_tui.engine.llm import ModelUnavailable

    args = list(sys.argv[1:] if argv is None else argv)
    if not args:
        args = ["tui"]
    try:
        from s3gym_tui.store import StoreError
    except ImportError:  # pragma: no cover
        StoreError = RuntimeError  # type: ignore[misc,assignment]
    try:
        cli(args=args, standalone_mode=False)
    except (UserError, GameError, StoreError, ModelUnavailable, ConfigError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever the message holds
        err.print(f"[red]error:[/] {escape(message)}", soft_wrap=True, markup=True, highlight=False)
        return 2
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "input"
        message = str(first.get("msg", "")).removeprefix("Value error, ")
        err.print(f"[red]error:[/] {escape(where)}: {escape(message)}", soft_wrap=True, highlight=False)
        return 2
    except KeyboardInterrupt:
        err.print("interrupted: stored data is intact; `s3gym resume RUN` continues a run")
        return 130
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except Exception as exc:  # usage errors of typer's (vendored) click, and aborts
        if hasattr(exc, "format_message"):
            err.print(f"[red]error:[/] {escape(exc.format_message())}", soft_wrap=True, highlight=False)
            return int(getattr(exc, "exit_code", 2) or 2)
        if type(exc).__name__ == "Abort":
            return 130
        raise
    return 0
