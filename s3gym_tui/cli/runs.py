"""Protocol runs from the command line: run, resume, runs, report, audit, export."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import List, Optional

import typer

from s3gym_tui.cli.parallel import data_parallel
from s3gym_tui.cli.common import (DbOption, JsonOption, ProgressOption, Stopped, UserError, _fmt, _store, cli,
                                  console, decoding_choice, emit_json, err, flags_named, model_args_given,
                                  model_name)
from s3gym_tui.engine.export_schema import ExportFormat
from s3gym_tui.progress import ProgressMode
from s3gym_tui.textgate import safe_markup


@cli.command()
def run(
    game: str = typer.Argument(..., help="Game name (see `s3gym games`)."),
    model: Optional[str] = typer.Option(None, "--model", "-m", callback=model_name, help="Any litellm model "
                                        "string (default: the config's default_model, or $S3GYM_MODEL)."),
    pathway: str = typer.Option("none", "--pathway", "-p", help="none | history | summary"),
    episodes: int = typer.Option(30, "--episodes", help="Exploration episodes."),
    eval_every: int = typer.Option(3, "--eval-every", help="Evaluate after every N exploration episodes."),
    eval_episodes: int = typer.Option(3, "--eval-episodes", help="Evaluation episodes per checkpoint."),
    history_budget: int = typer.Option(100_000, "--history-budget", help="Tokens of previous-episode history."),
    step_cap: int = typer.Option(64, "--step-cap", min=1, max=64,
                                 help="Steps per episode (the game's own cap applies too)."),
    max_tokens: Optional[int] = typer.Option(None, "--max-tokens", min=1, help="Output cap per response "
                                             "(default: the model's in the config file, else 14,000)."),
    temperature: float = typer.Option(0.0, "--temperature"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Decoding seed passed to the model."),
    api_base: List[str] = typer.Option([], "--api-base", help="The model's server; repeat for replicas "
                                       "(spread by litellm's Router)."),
    oracle_feedback: bool = typer.Option(False, "--oracle-feedback", help="Ablation: show verifier rewards."),
    timeout: Optional[float] = typer.Option(None, "--timeout", min=0.1, max=3600.0,
                                            help="Seconds a model call may show no progress (no prompt "
                                            "chunk read, no token written) before it is retried (default: "
                                            "the model's in the config file, else 120)."),
    max_retries: int = typer.Option(4, "--max-retries", min=0, max=20,
                                    help="Retries of a failed model call (timeouts, 429, 5xx)."),
    decoding: Optional[str] = typer.Option(None, "--decoding", help="free | grammar: grammar constrains every "
                                           "action reply to the game's action grammar in the server's own form "
                                           "(llama.cpp grammar, vLLM/SGLang structured outputs, else a JSON "
                                           "schema). Default: the model's in the config file, else free."),
    model_arg: List[str] = typer.Option([], "--model-arg", "-M", help="KEY=VALUE passed to the provider "
                                        "through litellm (repeat; VALUE is read as JSON when it can be). "
                                        "Stored on the run without secrets."),
    estimate_only: bool = typer.Option(False, "--estimate", help="Print the estimate of calls, tokens and cost, "
                                       "and stop (nothing is created)."),
    progress: Optional[ProgressMode] = ProgressOption,
    db: Optional[Path] = DbOption,
) -> None:
    """Start a run of the explore/evaluate protocol and follow it with progress bars (the estimate of
    calls, tokens and cost is printed first). Repeat --api-base for replicas of one model."""
    from s3gym_tui.config import load_settings
    from s3gym_tui.engine.estimate import estimate_run
    from s3gym_tui.models import RunConfig
    from s3gym_tui.secrets import with_credentials

    if pathway == "trained":
        raise UserError("the trained pathway is started with `s3gym train`, not `s3gym run`")
    settings = load_settings()
    model = model or settings.default_model  # the config file's, or $S3GYM_MODEL
    own = settings.model_settings(model)  # the model's api base, max tokens, timeout
    # a base started by the app comes without its credentials, which are in the environment
    bases = [with_credentials(b.strip()) for value in api_base for b in value.split(",") if b.strip()]
    if not bases and own.api_base:
        bases = [own.api_base]
    chosen = {"max_tokens": max_tokens if max_tokens is not None else own.max_tokens,
              "timeout_s": timeout if timeout is not None else own.timeout_s,
              "decoding": decoding_choice(decoding) or own.decoding}
    args = {**own.model_args, **model_args_given(model_arg)}
    with flags_named():  # a bad value names the flag the user typed
        config = RunConfig(model=model, game=game, pathway=pathway, explore_episodes=episodes,
                           eval_every=eval_every, eval_episodes=eval_episodes, history_budget=history_budget,
                           step_cap=step_cap, temperature=temperature, decoding_seed=seed,
                           api_base=bases[0] if len(bases) == 1 else None,
                           api_bases=tuple(bases) if len(bases) > 1 else (), oracle_feedback=oracle_feedback,
                           max_retries=max_retries, model_args=args,
                           **{k: v for k, v in chosen.items() if v is not None})
    problem = None
    try:
        _preflight(config)  # a doomed run is refused before anything is stored
    except UserError as exc:
        if not estimate_only:
            raise
        problem = exc  # the estimate is still printed, as `sweep --plan` prints its plan
    config = _fit_to_server(config)
    estimate = estimate_run(config)
    console.print("[bold]estimate[/] " + "\n         ".join(safe_markup(line) for line in estimate.lines()),
                  soft_wrap=True)
    if problem is not None:
        console.print(f"[yellow]it could not start now[/]: {safe_markup(str(problem))}", soft_wrap=True)
    if estimate_only:
        return
    store = _store(db, create=True)
    new_run = store.runs.create_run(config)
    console.print(f"run [bold]{safe_markup(new_run.id)}[/] · {config.game} · {safe_markup(config.model)} · "
                  f"pathway {config.pathway}")
    _follow(store, new_run, progress_mode=progress)


@cli.command()
@data_parallel
def resume(run_id: str = typer.Argument(..., metavar="RUN_OR_SWEEP"),
           api_base: Optional[str] = typer.Option(
               None, "--api-base", help="The run's api base again, with the credentials that were "
               "not stored (http://user:KEY@host/v1): it must be the stored one once they are removed."),
           budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Sweep: a new budget."),
           concurrency: Optional[int] = typer.Option(None, "--concurrency", "-c",
                                                     help="Sweep: model calls in flight per model."),
           runs_per_model: Optional[int] = typer.Option(None, "--runs-per-model", help="Sweep: runs of one "
                                                        "model at once."),
           workers: Optional[int] = typer.Option(None, "--workers", "-w", help="Sweep: worker processes "
                                                 "driving the runs (default: the config's sweep_workers)."),
           yes: bool = typer.Option(False, "--yes", "-y", help="Sweep: continue without asking."),
           repair: bool = typer.Option(False, "--repair", help="Training: also evaluate with replies that break "
                                       "the answer format repaired (see `s3gym train --repair`)."),
           progress: Optional[ProgressMode] = ProgressOption,
           db: Optional[Path] = DbOption) -> None:
    """Continue an interrupted run, every unfinished run of a sweep, a training or a distillation
    study where it stopped."""
    from s3gym_tui.secrets import strip_url_credentials

    store = _store(db, write=True)
    aspire_run = store.aspire.find_aspire_run(run_id)
    if aspire_run is not None:  # an ASPIRE run (s3gym aspire): its controller continues it
        from s3gym_tui.cli.aspire import make_operator, run_controller

        if aspire_run.status == "finished":
            raise UserError(f"ASPIRE run {run_id} is finished")
        run_controller(store, aspire_run.id, make_operator(aspire_run.model, api_base))
        return
    if store.trainings.find_training(run_id) is not None:
        from s3gym_tui.cli.train import resume_training_cli

        resume_training_cli(store, run_id, progress, repair)
        return
    if store.trainings.find_study(run_id) is not None:
        from s3gym_tui.cli.distill import resume_study_cli

        resume_study_cli(store, run_id, progress)
        return
    if repair and store.trainings.training_of_run(run_id) is None:
        raise UserError("--repair applies to a training (or its evaluation run), not a run, study or sweep")
    sweep = store.sweeps.find_sweep(run_id)
    if sweep is not None:
        from s3gym_tui.cli.sweep import resume_sweep

        if api_base is not None:
            raise UserError("--api-base applies to a run, not a sweep (its runs keep their api bases)")
        resume_sweep(store, sweep, budget_usd, concurrency, runs_per_model, yes, progress, workers)
        return
    if budget_usd is not None or concurrency is not None or runs_per_model is not None or workers is not None:
        raise UserError("--budget-usd, --concurrency, --runs-per-model and --workers apply to a sweep, not a run")
    target = store.runs.get_run(run_id)
    if api_base is not None:
        if strip_url_credentials(api_base) != target.config.api_base:
            raise UserError(f"--api-base {strip_url_credentials(api_base)} is not the run's api base "
                            f"({target.config.api_base}): a resumed run keeps its model")
        target = target.model_copy(update={"config": target.config.model_copy(
            update={"api_base": api_base})})
    if target.config.pathway == "trained":
        link = store.trainings.training_of_run(run_id)
        if link is None:
            raise UserError(f"{run_id} is a training's evaluation run without its training: nothing to resume")
        from s3gym_tui.cli.train import resume_training_cli

        resume_training_cli(store, link[0].id, progress, repair)
        return
    if target.status == "finished":
        raise UserError(f"run {run_id} is finished: nothing left to run")
    target = _secrets_again(target, with_base=api_base is None)
    _preflight(target.config)
    _follow(store, target, verb="resume", progress_mode=progress)


def _secrets_again(run, with_base: bool = True):
    """The run with the secrets that were not stored with it: the config file's model arguments it
    lacks, and (`with_base`) its api bases' credentials, from the environment the app that started
    this process passed (secrets.with_credentials), else the config file's api base for the model
    when it is the stored one once its credentials are removed."""
    from s3gym_tui.config import load_settings
    from s3gym_tui.secrets import strip_url_credentials, with_credentials

    own = load_settings().model_settings(run.config.model)
    config = run.config
    missing = {k: v for k, v in own.model_args.items() if k not in config.model_args}
    update: dict = {"model_args": {**config.model_args, **missing}} if missing else {}

    def full(base):
        found = with_credentials(base)
        if found == base and own.api_base and strip_url_credentials(own.api_base) == base:
            found = own.api_base
        return found

    if with_base and config.api_base:
        update["api_base"] = full(config.api_base)
    if with_base and config.api_bases:
        update["api_bases"] = tuple(full(b) for b in config.api_bases)
    return run.model_copy(update={"config": config.model_copy(update=update)}) if update else run


def _fit_to_server(config):
    """The config fitted to what the model's server says about itself, with a line saying so."""
    from s3gym_tui.engine.decoding import describe_args
    from s3gym_tui.engine.fitting import fit_config

    fitted, notes = fit_config(config)
    for note in notes:
        console.print(f"[bold]server[/] {safe_markup(note)}", soft_wrap=True, highlight=False)
    if config.model_args:
        console.print(f"[bold]model args[/] {safe_markup(describe_args(config.model_args)) or '(secrets only)'} "
                      f"(stored without secrets)", soft_wrap=True, highlight=False)
    return fitted


def _preflight(config) -> None:
    from s3gym_tui.engine.preflight import ModelRefused, check_config

    try:
        check_config(config)
    except ModelRefused as exc:
        raise UserError(f"{exc} (nothing was stored)") from None


def _follow(store, run, verb: str = "run", progress_mode: Optional[ProgressMode] = None) -> None:
    """Drive a run with its progress (bars, or a timestamped line per episode and checkpoint), then print
    its tables. A failure after the run was stored (the model, the disk, the store) stops it resumable:
    exit 3 with the resume command."""
    from s3gym_tui.progress import JobProgress
    from s3gym_tui.engine.contract import ContractWatch
    from s3gym_tui.engine.events import CheckpointScored, EpisodeDone, RunFinished, StepDone
    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.store import StoreError
    from s3gym_tui.store.leases import RunBusy

    cfg = run.config
    episodes = store.episodes.list(run.id)
    done_explore = sum(1 for e in episodes if e.phase == "explore" and e.status == "finished")
    done_eval = sum(1 for e in episodes if e.phase == "eval" and e.status == "finished")
    progress = JobProgress(console, progress_mode)
    explore_task = progress.add_task("exploration", total=cfg.explore_episodes, completed=done_explore)
    cps = cfg.checkpoints()
    eval_task = progress.add_task("evaluation", total=len(cps) * cfg.eval_episodes, completed=done_eval)
    cp_task = progress.add_task("checkpoints", total=len(cps), completed=len(store.checkpoints.list(run.id)))
    step_task = progress.add_task("episode steps", total=None, detail=True)
    outcome: dict = {}
    watch = ContractWatch(cfg.model)

    def on_event(event) -> None:
        if isinstance(event, StepDone):  # the reply-contract warning, once each time it starts
            warning = watch.news(event.step)
            if warning:
                progress.note(f"[yellow bold]warning:[/] {safe_markup(warning)}")
        if isinstance(event, StepDone) and event.episode.phase == "explore":
            progress.update(step_task, completed=event.step.index + 1,
                            info="last: " + safe_markup(event.step.action, one_line=True, max_chars=30)
                            + f" self {event.step.self_score}")
        elif isinstance(event, EpisodeDone):
            episode = event.episode
            if episode.phase == "explore":
                progress.update(explore_task, advance=1,
                                info=f"episode {episode.index}: score {_fmt(episode.score, 2)}")
            else:
                progress.update(eval_task, advance=1, info=f"x={episode.checkpoint} episode {episode.index}: "
                                                           f"score {_fmt(episode.score, 2)}")
        elif isinstance(event, CheckpointScored):
            progress.update(cp_task, advance=1, info=f"x={event.checkpoint.x}: {_fmt(event.checkpoint.mean)}")
        elif isinstance(event, RunFinished):
            outcome["error"] = event.error

    runner = ProtocolRunner(store, run, on_event)

    async def drive():
        from s3gym_tui.engine.interrupt import stop_on_signals

        with stop_on_signals(runner.stop):
            return await runner.run_protocol(command=f"s3gym {verb}")

    try:
        with progress:
            final = asyncio.run(drive())
    except RunBusy:
        raise  # refused before anything changed: a usage error
    except StoreError as exc:  # the disk filled up, the store refused a write: stored as stopped
        raise Stopped(f"run {run.id} stopped: {exc}", resume=run.id) from None
    if runner.stop_reason is not None:  # Ctrl-C or SIGTERM: a clean, resumable stop
        err.print(f"run {safe_markup(final.id)} {runner.stop_reason}: stored data is intact")
        err.print(f"resume with: s3gym resume {safe_markup(final.id)}", highlight=False)
        raise typer.Exit(130)
    if outcome.get("error"):
        raise Stopped(f"run {final.id} stopped: {outcome['error']}", resume=final.id)
    _print_reports(store, [final])


@cli.command("runs")
def list_runs(db: Optional[Path] = DbOption,
              limit: int = typer.Option(50, "--limit", min=1, max=1_000_000),
              sweep: Optional[str] = typer.Option(None, "--sweep", help="Only the runs of this sweep."),
              as_json: bool = JsonOption) -> None:
    """List stored runs, newest first (or a sweep's, in plan order)."""
    from s3gym_tui.cli.tables import print_table
    from s3gym_tui.engine.report_tables import ID, PCT, TEXT, Column, ReportTable
    from s3gym_tui.store.leases import shown_status

    store = _store(db)
    damaged: list[tuple[str, str]] = []
    runs = store.sweeps.sweep_runs(store.sweeps.get_sweep(sweep).id)[:limit] if sweep else \
        store.runs.list_runs(limit=limit, damaged=damaged)
    leases = store.leases.live_leases()
    cache = store.sweeps.cache_usage([r.id for r in runs])

    def share(run_id: str):  # None (— / null): no call of the run said what its provider cached
        cached, tokens_in = cache.get(run_id, (0, 0))
        return cached / tokens_in if tokens_in else None

    if as_json:
        emit_json([{**r.model_dump(mode="json"), "shown_status": shown_status(r.status, leases.get(r.id)),
                    "cache_share": share(r.id)} for r in runs])
    else:
        table = ReportTable("runs", "runs", (
            Column("id", "id", ID), Column("game", "game", TEXT), Column("model", "model", TEXT, 2),
            Column("pathway", "pathway", TEXT), Column("status", "status", TEXT),
            Column("cached", "cached", PCT, 4), Column("sweep", "sweep", ID, 3),
            Column("created", "created", TEXT, 1)),
            tuple((r.id, r.config.game, r.config.model, r.config.pathway,
                   shown_status(r.status, leases.get(r.id)), share(r.id), r.sweep_id or "-", r.created_at[:19])
                  for r in runs),
            note="cached = share of input tokens the provider read from its prompt cache (— where it does not say)")
        print_table(console, table, more="see --json")
    for run_id, reason in damaged:  # listed, not hidden: the rest of the store is still readable
        err.print(f"[yellow]warning:[/] {safe_markup(reason)}", soft_wrap=True, highlight=False)


def _print_reports(store, runs) -> None:
    """The main tables after a run: curve, self-judging, coupling, Summary vs History."""
    from s3gym_tui.cli.tables import print_report
    from s3gym_tui.engine.report import run_report
    from s3gym_tui.engine.report_tables import build_report

    reports = [run_report(store, r) for r in runs]
    report = build_report(reports)
    print_report(console, report, skip=("runs", "by_model", "judging_by_game", "coupling_by_game", "checkpoints"))
    for r in reports:  # a replica that failed is said, not only stored (the steps' fault column)
        if r.replicas.failures:
            console.print(f"[yellow]replicas[/] of {safe_markup(r.run.config.model)}: {r.replicas.failures} replica "
                          f"faults, {r.replicas.failovers} failovers (another replica answered); see the "
                          f"steps' faults", soft_wrap=True, highlight=False)
    for table in report.tables:
        if table.name == "checkpoints":
            by_run: dict = {}
            for run_id, game, _pathway, _model, x, y, _why in table.rows:
                by_run.setdefault((run_id, game), []).append(f"x={x}:{_fmt(y, 2)}")
            for (run_id, game), points in by_run.items():
                console.print(f"{safe_markup(run_id)} ({game}): " + "  ".join(points), soft_wrap=True)


@cli.command()
def audit(db: Optional[Path] = DbOption) -> None:
    """Leakage audit: evaluation steps used as experience, seeds reused across phases."""
    from s3gym_tui.store import audit as run_audit

    from s3gym_tui.engine.aspire.audit import audit_aspire

    store = _store(db)
    result = run_audit(store)
    # ASPIRE runs: no hidden seed or suite name reached the agent (engine/aspire/audit.py)
    audits = {run.id: audit_aspire(store, run.id) for run in store.aspire.list_aspire_runs(limit=100_000)}
    hidden = [f"ASPIRE run {aid}: {p}" for aid, found in audits.items() for p in found.leaks]
    guessed = {aid: len(found.own) for aid, found in audits.items() if found.own}
    if result.ok and not hidden:
        console.print("[green]audit clean[/]: no evaluation step feeds history, summaries, datasets or "
                      "trainings (rollouts, prompts); no seed crosses phases; no hidden ASPIRE seed or suite "
                      "reached an agent")
        for aid, n in guessed.items():
            console.print(f"ASPIRE run {safe_markup(aid)}: the agent's own guesses of hidden values, not leaks "
                          f"({n} line(s): s3gym aspire --audit {safe_markup(aid)})", soft_wrap=True, highlight=False)
        return
    for problem in [*map(str, result.problems), *hidden]:
        console.print(f"[red]leak[/] {safe_markup(problem)}")
    raise typer.Exit(1)


@cli.command()
def export(run_id: str = typer.Argument(...),
           out: Optional[Path] = typer.Option(None, "--out", "-o", help="The JSONL file (default, or `-`: "
                                              "stdout), the folder of jsonl-dir and parquet, or inspect's .eval file."),
           fmt: ExportFormat = typer.Option(ExportFormat.jsonl.value, "--format", "-f", case_sensitive=False,
                                            help="jsonl: one file, one record a line with its type | jsonl-dir, "
                                            "parquet: a folder with one typed file per record type (runs, "
                                            "episodes, steps, prompt_parts, summaries, checkpoints, annotations) "
                                            "| inspect: an Inspect eval log (-o RUN.eval) for `inspect view`, "
                                            "one sample per episode."),
           full_prompts: bool = typer.Option(False, "--full-prompts", help="jsonl-dir, parquet: each step's "
                                             "prompt as sent in `prompt` instead of the ids of its shared "
                                             "prompt_parts."),
           db: Optional[Path] = DbOption) -> None:
    """Export a run's episodes and steps as JSONL (one object a line), as a folder of typed JSONL or
    Parquet files, one per record type, or as an Inspect eval log."""
    from s3gym_tui.engine.export import export_run
    from s3gym_tui.engine.export_inspect import export_inspect
    from s3gym_tui.engine.export_tables import export_tables
    from s3gym_tui.output import OutputError, atomic_text, check_target

    store = _store(db)
    if out is not None and str(out) == "-":
        out = None  # `-o -`: stdout, like the default
    fmt = ExportFormat(getattr(fmt, "value", fmt))
    if fmt == ExportFormat.inspect and not out:
        raise UserError("--format inspect writes an Inspect log file: name it with -o RUN.eval")
    if fmt != ExportFormat.jsonl and not out:
        raise UserError(f"--format {fmt.value} writes a folder: name it with -o FOLDER")
    if fmt in (ExportFormat.jsonl, ExportFormat.inspect) and full_prompts:
        raise UserError(f"--full-prompts is for --format jsonl-dir or parquet ({fmt.value} always has full prompts)")
    try:
        if fmt == ExportFormat.inspect:
            count = export_inspect(store, store.runs.get_run(run_id), out)
            console.print(f"wrote {count} samples (episodes) to {safe_markup(str(out))}")
            return
        if fmt != ExportFormat.jsonl:
            counts = export_tables(store, store.runs.get_run(run_id), out, fmt, full_prompts)
            console.print(f"wrote {sum(counts.values())} rows in {len(counts)} files to {safe_markup(str(out))}")
            return
        if out:  # before anything is written: never the database, never a half-written file
            check_target(out, store.path)
        run = store.runs.get_run(run_id)
        if not out:
            export_run(store, run, sys.stdout)
            return
        with atomic_text(out, store.path) as handle:
            count = export_run(store, run, handle)
    except OutputError as exc:
        raise UserError(str(exc)) from None
    if out:
        console.print(f"wrote {count} lines to {safe_markup(str(out))}")


