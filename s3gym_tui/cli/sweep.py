"""`s3gym sweep` and `s3gym sweeps`: the paper's grid (games x pathways x models) in one command,
planned and priced before it starts, run concurrently, stored and resumable as a whole."""

from __future__ import annotations

import asyncio
import sys
from pathlib import Path
from typing import List, Optional

import typer

from s3gym_tui.cli.common import (DbOption, ProgressOption, Stopped, UserError, _fmt, _store, cli, console,
                                  decoding_choice, emit_json, flags_named, model_args_given, model_list)
from s3gym_tui.progress import ProgressMode
from s3gym_tui.textgate import safe_markup

GAMES_HELP = "all, or a comma-separated list (see `s3gym games`)."
MODELS_HELP = ("Comma-separated litellm model strings; the family `scripted` means scripted/<game> for each "
               "game (`fault` and `learner` likewise). Default: the config's default_model ($S3GYM_MODEL).")
WORKERS_HELP = ("Processes driving the runs (each run in one of them, all writing the one database): more "
                "than 1 when one core cannot keep the model servers busy. Default: the config's sweep_workers (1).")
API_BASE_HELP = ("An api base: URL (every model), or MODEL=URL1,URL2 for a model's replicas (vLLM, SGLang, "
                 "llama.cpp servers), spread by litellm's Router. Repeat for several models.")


def _split(text: str) -> list[str]:
    return [part.strip() for part in text.split(",") if part.strip()]


def parse_api_bases(values: List[str], models: List[str]) -> dict[str, tuple[str, ...]]:
    """`URL[,URL]` for every model, or `MODEL=URL[,URL]` for one (a model may contain '/', a URL ':')."""
    out: dict[str, list[str]] = {}
    for value in values:
        model, sep, urls = value.partition("=")
        if sep and "://" not in model:
            targets, bases = [model.strip()], _split(urls)
        else:
            targets, bases = list(models), _split(value)
        if not bases or not all(t for t in targets):
            raise UserError(f"--api-base {value!r}: give URL or MODEL=URL[,URL...]")
        for target in targets:
            if target not in models:
                raise UserError(f"--api-base {value!r} names {target!r}, which is not one of --models")
            out.setdefault(target, [])
            out[target] += [b for b in bases if b not in out[target]]
    return {model: tuple(bases) for model, bases in out.items()}


def _games(text: str) -> list[str]:
    import s3gym_games as games

    if text.strip().lower() == "all":
        return list(games.names())
    names = _split(text)
    if not names:
        raise UserError("--games is empty: give all or a comma-separated list")
    return [games.canonical(n) for n in names]  # GameError: one line


def check_models(models: List[str], game_names: List[str]) -> None:
    """Refuse, before anything is stored, a built-in model that cannot play a game of the sweep."""
    import s3gym_games as games

    from s3gym_tui.models import MODEL_FAMILIES
    from s3gym_tui.providers import split_model

    for model in models:
        provider, name = split_model(model)
        if model in MODEL_FAMILIES or provider not in MODEL_FAMILIES:
            continue
        own = games.canonical(name)
        others = [g for g in game_names if g != own]
        if others:
            raise UserError(f"{model} plays only {own}, not {', '.join(others)}: use the family "
                            f"`{provider}` (one {provider}/<game> per game) or --games {own}")


def preflight(runs) -> None:
    """Every (model, game) of the sweep must be able to work (issue 9's check), before storing."""
    from s3gym_tui.engine.preflight import ModelRefused, check_config

    seen = set()
    for config in runs:
        key = (config.model, config.game, config.api_base, config.api_bases)
        if key in seen:
            continue
        seen.add(key)
        try:
            check_config(config)
        except ModelRefused as exc:
            raise UserError(f"{exc} (nothing was stored)") from None


def print_plan(sweep_config, plan) -> None:
    cfg = sweep_config
    runs = plan.runs
    settings = runs[0].config if runs else None
    console.print(f"[bold]sweep plan[/]: {len(cfg.games)} game(s) x {len(cfg.pathways)} pathway(s) x "
                  f"{len(cfg.models)} model(s) = [bold]{len(runs)} runs[/]", soft_wrap=True)
    if settings is not None:
        xs = settings.checkpoints()
        console.print(f"each run: {settings.explore_episodes} exploration episodes; {settings.eval_episodes} "
                      f"eval episodes at x = {xs[0]}..{xs[-1]} every {settings.eval_every} "
                      f"({len(xs)} checkpoints); history budget {settings.history_budget:,} tokens; output cap "
                      f"{settings.max_tokens:,}; step cap {settings.step_cap}", soft_wrap=True)
    budget = f"budget ${cfg.budget_usd:,.2f}" if cfg.budget_usd else "no budget limit (--budget-usd)"
    console.print(f"at most {cfg.concurrency} model call(s) in flight and {cfg.runs_per_model} run(s) at once "
                  f"per model; {budget}", soft_wrap=True)
    from s3gym_tui.cli.tables import print_table
    from s3gym_tui.engine.report_tables import INT, TEXT, Column, ReportTable

    def dollars(value):
        return "unknown" if value is None else f"${value:,.2f}"

    def share(cached: int, total: int) -> str:
        return f"{cached / total:.0%}" if cached and total else "—"

    rows = [(m.model, m.runs, f"{m.calls:,}", f"{m.tokens_in:,}", share(m.tokens_in_cached, m.tokens_in),
             f"{m.tokens_out:,}", dollars(m.cost_max), dollars(m.cost_typical), dollars(m.cost_typical_cached))
            for m in plan.models]
    if len(plan.models) > 1:
        cached_all = sum(m.tokens_in_cached for m in plan.models)
        rows.append(("all", len(runs), f"{plan.calls:,}", f"{plan.tokens_in:,}", share(cached_all, plan.tokens_in),
                     f"{plan.tokens_out:,}", dollars(plan.cost_max), dollars(plan.cost_typical),
                     dollars(plan.cost_typical_cached)))
    # figures are pre-formatted (thousands separators, dollars): shown whole, right-aligned as numbers
    cols = (Column("model", "model", TEXT), Column("runs", "runs", INT, 3), Column("calls", "calls", INT),
            Column("tokens_in", "tokens in", INT), Column("cached", "cached", INT, 4),
            Column("tokens_out", "tokens out", INT, 2), Column("cost_max", "cost at most", INT),
            Column("cost_typical", "typical cost", INT, 1), Column("cost_typical_cached", "with cache", INT, 1))
    print_table(console, ReportTable("plan", "model calls, tokens and cost (upper bounds: step caps, history "
                                     "budget, output cap)", cols, tuple(rows)), more="a wider terminal shows them")
    console.print("[dim]typical: replies of about 200 tokens; episodes that end early call less; tokens are "
                  "litellm's count for the model (a server's own tokenizer may count more); cached: input "
                  "tokens the provider's prompt cache is expected to hold (the repeated prefix of consecutive "
                  "calls of an episode), with cache: the typical cost at litellm's cached rates (no cache "
                  "price listed: — and the same cost)[/]")
    if plan.unpriced:
        console.print(f"[yellow]price unknown[/] for {safe_markup(', '.join(plan.unpriced))}: its calls cost "
                      f"nothing against --budget-usd", soft_wrap=True)


def confirm(yes: bool, question: str) -> bool:
    if yes:
        return True
    if not sys.stdin.isatty():
        raise UserError("stdin is not a terminal: pass --yes to start without asking")
    return typer.confirm(question, default=False)


@cli.command()
def sweep(
    games_: str = typer.Option("all", "--games", "-g", help=GAMES_HELP),
    pathways: str = typer.Option("none,history,summary", "--pathways", "-p", help="Comma-separated: none, "
                                 "history, summary."),
    models: Optional[str] = typer.Option(None, "--models", "-m", callback=model_list, help=MODELS_HELP),
    episodes: int = typer.Option(30, "--episodes", help="Exploration episodes per run."),
    eval_every: int = typer.Option(3, "--eval-every", help="Evaluate after every N exploration episodes."),
    eval_episodes: int = typer.Option(3, "--eval-episodes", help="Evaluation episodes per checkpoint."),
    history_budget: int = typer.Option(100_000, "--history-budget", help="Tokens of previous-episode history."),
    max_tokens: int = typer.Option(14_000, "--max-tokens", help="Output cap per response."),
    step_cap: int = typer.Option(64, "--step-cap", help="Steps per episode (the game's own cap applies too)."),
    temperature: float = typer.Option(0.0, "--temperature"),
    seed: Optional[int] = typer.Option(None, "--seed", help="Decoding seed passed to the model."),
    api_base: List[str] = typer.Option([], "--api-base", help=API_BASE_HELP),
    timeout: float = typer.Option(120.0, "--timeout", help="Seconds a model call may show no progress "
                                  "before it is retried."),
    max_retries: int = typer.Option(4, "--max-retries", help="Retries of a failing model call."),
    concurrency: int = typer.Option(4, "--concurrency", "-c", help="Model calls in flight per model."),
    runs_per_model: Optional[int] = typer.Option(None, "--runs-per-model", help="Runs of one model going at "
                                                 "once (default: --concurrency)."),
    budget_usd: Optional[float] = typer.Option(None, "--budget-usd", help="Stop cleanly (resumable) once the "
                                               "calls cost this much (litellm's prices)."),
    oracle_feedback: bool = typer.Option(False, "--oracle-feedback", help="Ablation: show verifier rewards."),
    decoding: Optional[str] = typer.Option(None, "--decoding", help="free | grammar (every model; default: each "
                                           "model's in the config file, else free). grammar constrains action "
                                           "replies to the game's grammar in each server's own form."),
    model_arg: List[str] = typer.Option([], "--model-arg", "-M", help="KEY=VALUE passed to every model's "
                                        "provider through litellm (repeat); the config file's per-model "
                                        "model_args come first. Stored without secrets."),
    workers: Optional[int] = typer.Option(None, "--workers", "-w", help=WORKERS_HELP),
    yes: bool = typer.Option(False, "--yes", "-y", help="Start without asking."),
    plan_only: bool = typer.Option(False, "--plan", help="Print the plan and stop (nothing is stored, no file "
                                   "is created)."),
    progress: Optional[ProgressMode] = ProgressOption,
    db: Optional[Path] = DbOption,
) -> None:
    """Run games x pathways x models (the paper's tables): prints the plan and its cost, asks, then
    runs concurrently with progress bars. Stored and resumable as a whole: `s3gym resume SWEEP`."""
    from s3gym_tui.config import load_settings
    from s3gym_tui.engine.sweep_plan import plan as make_plan
    from s3gym_tui.models import SweepConfig

    names = _split(models) if models else [load_settings().default_model]
    processes = worker_count(workers)
    game_names = _games(games_)
    check_models(names, game_names)
    if "trained" in _split(pathways):
        raise UserError("the trained pathway is started with `s3gym train`, not `s3gym sweep`")
    settings = dict(explore_episodes=episodes, eval_every=eval_every, eval_episodes=eval_episodes,
                    history_budget=history_budget, max_tokens=max_tokens, step_cap=step_cap,
                    temperature=temperature, decoding_seed=seed, timeout_s=timeout, max_retries=max_retries,
                    oracle_feedback=oracle_feedback)
    chosen_decoding, cli_args = decoding_choice(decoding), model_args_given(model_arg)
    if chosen_decoding:
        settings["decoding"] = chosen_decoding
    if cli_args:
        settings["model_args"] = cli_args
    with flags_named():  # a bad value names the flag the user typed
        config = SweepConfig(games=game_names, pathways=_split(pathways), models=names, settings=settings,
                             api_bases=parse_api_bases(api_base, names), concurrency=concurrency,
                             runs_per_model=concurrency if runs_per_model is None else runs_per_model,
                             budget_usd=budget_usd)
        runs = config.run_configs()
    problem = None
    try:  # a doomed model is refused before its server is asked and before anything is stored
        preflight(runs)
    except UserError as exc:
        if not plan_only:
            raise
        problem = exc
    runs, runtime_args = fit_runs(runs, chosen_decoding, cli_args)
    # a bad database is refused before the plan is computed; --plan opens (and creates) nothing
    store = None if plan_only else _store(db, create=True)
    plan = make_plan(runs)
    print_plan(config, plan)
    if problem is not None:
        console.print(f"[yellow]it could not start now[/]: {safe_markup(str(problem))}", soft_wrap=True)
    if plan_only or not confirm(yes, f"Start these {len(runs)} runs?"):
        console.print("not started; nothing was stored")
        return
    stored, _ = store.sweeps.create_sweep(config, runs)
    console.print(f"sweep [bold]{safe_markup(stored.id)}[/] · {len(runs)} runs (continue an interrupted sweep with "
                  f"`s3gym resume {safe_markup(stored.id)}`)", soft_wrap=True)
    follow_sweep(store, stored, progress, runtime_args, processes)


def worker_count(given: Optional[int]) -> int:
    """The worker processes for a sweep: --workers, else the config's sweep_workers; a bad count is refused."""
    from s3gym_tui.config import MAX_SWEEP_WORKERS, load_settings

    if given is None:
        return load_settings().sweep_workers
    if not 1 <= given <= MAX_SWEEP_WORKERS:
        raise UserError(f"--workers {given}: give 1 to {MAX_SWEEP_WORKERS} worker processes")
    return given


def fit_runs(runs, decoding: Optional[str], cli_args: dict, announce: bool = True):
    """Each run with its model's decoding and arguments (the config file's per-model section, then
    the flags) and fitted to what its server says about itself (a line per model); and per model,
    the arguments to give again in this process (secrets are not stored)."""
    from s3gym_tui.config import load_settings
    from s3gym_tui.engine.fitting import fit_config

    settings = load_settings()
    out, told, runtime = [], set(), {}
    for config in runs:
        own = settings.model_settings(config.model)
        args = {**own.model_args, **cli_args}
        config = config.model_copy(update={"decoding": decoding or own.decoding or config.decoding,
                                           "model_args": args})
        config, notes = fit_config(config)
        out.append(config)
        runtime[config.model] = args
        key = (config.model, config.api_base or next(iter(config.api_bases), None))
        if key not in told and announce:
            told.add(key)
            for note in notes:
                console.print(f"[bold]server[/] {safe_markup(config.model)}: {safe_markup(note)}", soft_wrap=True,
                              highlight=False)
    return out, runtime


def resume_sweep(store, stored, budget_usd: Optional[float], concurrency: Optional[int],
                 runs_per_model: Optional[int], yes: bool, progress: Optional[ProgressMode] = None,
                 workers: Optional[int] = None) -> None:
    """`s3gym resume SWEEP`: the runs left, priced, then run like `sweep` (budget, limits and the
    worker processes may change)."""
    from s3gym_tui.engine.sweep_plan import plan as make_plan

    processes = worker_count(workers)
    updates = {k: v for k, v in (("budget_usd", budget_usd), ("concurrency", concurrency),
                                 ("runs_per_model", runs_per_model)) if v is not None}
    if updates:
        with flags_named():
            config = stored.config.model_validate({**stored.config.model_dump(), **updates})
        stored = store.sweeps.set_sweep_config(stored.id, config)
    left = [r for r in store.sweeps.sweep_runs(stored.id) if r.status != "finished"]
    if not left:
        store.sweeps.set_sweep_status(stored.id, "finished", note="")
        console.print(f"sweep {safe_markup(stored.id)} is finished: `s3gym report --sweep {safe_markup(stored.id)}`")
        return
    spent = store.sweeps.sweep_usage(stored.id)["cost"]
    budget = stored.config.budget_usd
    if budget is not None and spent >= budget:
        raise UserError(f"sweep {stored.id}: its budget of ${budget:.2f} is spent (${spent:.4f}); resume with "
                        f"a larger --budget-usd")
    total = len(store.sweeps.sweep_runs(stored.id))
    console.print(f"sweep {safe_markup(stored.id)}: {len(left)} of {total} runs left; "
                  f"spent so far ${spent:.4f}", soft_wrap=True)
    plan = make_plan([r.config for r in left])
    print_plan(stored.config, plan)
    console.print("[dim](upper bounds for the runs left, as if none had started)[/]")
    if not confirm(yes, f"Continue these {len(left)} runs?"):
        console.print("not resumed")
        return
    from s3gym_tui.config import load_settings

    settings = load_settings()  # the config file's model arguments again (their secrets are not stored)
    follow_sweep(store, stored, progress, {m: settings.model_settings(m).model_args
                                           for m in {r.config.model for r in left}}, processes)


def follow_sweep(store, stored, progress_mode: Optional[ProgressMode] = None,
                 model_args: Optional[dict] = None, workers: int = 1) -> None:
    """Run the sweep with its progress (a bar per active run and one for the sweep, or a timestamped
    line per episode, checkpoint and run), a warning when a model's replies mostly do not parse, then
    the usage and the replies per model. A store failure mid-sweep stops it resumable (exit 3).
    With `workers` > 1 the runs are driven in that many worker processes (engine.sweep_workers)."""
    follow_sweeps(store, [stored], progress_mode, model_args, workers)


def follow_sweeps(store, sweeps, progress_mode: Optional[ProgressMode] = None,
                  model_args: Optional[dict] = None, workers: int = 1) -> None:
    """follow_sweep for several sweeps at once (`s3gym demo`: the learner's and the embedded model's):
    they run concurrently under one progress display, each with its own limits; then each one's usage
    and replies. The first one that did not finish decides how the command ends."""
    from s3gym_tui.engine.sweep import SweepRunner
    from s3gym_tui.progress import JobProgress
    from s3gym_tui.store import StoreError

    progress = JobProgress(console, progress_mode)
    watches: dict = {}  # per model: the reply-contract warning `run` gives (engine.contract.ContractWatch)
    runners = []
    for stored in sweeps:
        runner = SweepRunner(store, stored, workers=workers)
        runner.model_args = dict(model_args or {})
        runner.on_event = _sweep_follower(store, stored, runner, progress, watches, several=len(sweeps) > 1)
        runners.append(runner)
        if workers > 1:
            used = runner.worker_count(len(runner.pending()))
            why = "" if used == workers else (f" ({workers} asked: at most one per run left and per call in flight, "
                                              f"--concurrency {stored.config.concurrency})")
            console.print(f"{used} worker process(es) drive the runs{why}; at most {stored.config.concurrency} "
                          f"call(s) in flight per model in all", soft_wrap=True)

    def stop(reason: str = "stopped") -> None:
        pools = [runner.pool for runner in runners if runner.pool is not None]
        if pools and not any(pool.stopping for pool in pools):
            count = sum(len(pool.live()) for pool in pools)
            progress.note(f"[yellow]stopping[/] ({safe_markup(reason)}): {count} worker process(es) store their "
                          f"runs' last steps; every run stays resumable")
        for runner in runners:
            runner.stop(reason)

    async def drive():
        from s3gym_tui.engine.interrupt import stop_on_signals

        with stop_on_signals(stop):  # Ctrl-C / SIGTERM: every run stops cleanly
            return await asyncio.gather(*(runner.run() for runner in runners))

    try:
        with progress:
            finals = asyncio.run(drive())
    except StoreError as exc:  # even the sweep's own status could not be written (the disk is full)
        raise Stopped(f"sweep {sweeps[0].id} stopped: {exc}", resume=sweeps[0].id) from None
    for final in finals:
        usage = store.sweeps.sweep_usage(final.id)
        console.print(f"sweep [bold]{safe_markup(final.id)}[/] {final.status}: {usage['calls']:,} model calls, "
                      f"{usage['tokens_in']:,} tokens in, {usage['tokens_out']:,} out, ${usage['cost']:,.4f}"
                      + (f" ({usage['unpriced']:,} calls unpriced)" if usage["unpriced"] else ""), soft_wrap=True)
        print_replies(store, final.id)
    for runner, final in zip(runners, finals):
        if final.status != "finished":
            _sweep_ended(runner, final)
    if all(final.status == "finished" for final in finals):
        for final in finals:
            console.print(f"the paper's tables: `s3gym report --sweep {safe_markup(final.id)}`")


def _sweep_follower(store, stored, runner, progress, watches: dict, several: bool = False):
    """The progress of one sweep: its overall bar, a bar per active run, warnings (SweepRunner.on_event)."""
    from s3gym_tui.engine import events as ev
    from s3gym_tui.engine.contract import ContractWatch
    from s3gym_tui.engine.sweep import SweepRunEnded, SweepRunEvent, SweepRunStarted

    all_runs = store.sweeps.sweep_runs(stored.id)
    done = sum(r.status == "finished" for r in all_runs)
    title = f"[bold]sweep {safe_markup(stored.id)}[/]" if several else "[bold]sweep[/]"
    overall = progress.add_task(title, total=len(all_runs), completed=done)
    tasks: dict[str, int] = {}

    def spend_info() -> str:
        limits = runner.limits
        budget = f" of ${limits.budget_usd:,.2f}" if limits.budget_usd else ""
        return f"${limits.spent_usd:,.4f}{budget}"

    def on_event(event) -> None:
        if isinstance(event, SweepRunStarted):
            cfg = event.run.config
            done_eps = sum(1 for e in store.episodes.list(event.run.id) if e.status == "finished")
            total = cfg.explore_episodes + len(cfg.checkpoints()) * cfg.eval_episodes
            label = safe_markup(f"{cfg.game} {cfg.pathway} {cfg.model}", one_line=True)
            tasks[event.run.id] = progress.add_task(label, total=total, completed=done_eps, announce=True)
        elif isinstance(event, SweepRunEvent) and event.run_id in tasks:
            inner = event.event
            task = tasks[event.run_id]
            if isinstance(inner, ev.StepDone):
                model = inner.episode.model
                warning = watches.setdefault(model, ContractWatch(model)).news(inner.step)
                if warning:
                    progress.note(f"[yellow bold]warning:[/] {safe_markup(warning)}")
            elif isinstance(inner, ev.EpisodeDone):
                e = inner.episode
                where = f"x={e.checkpoint} eval {e.index}" if e.phase == "eval" else f"explore {e.index}"
                score = "—" if e.score is None else format(e.score, ".3f")
                progress.update(task, advance=1, info=f"{where}: score {score}")
            elif isinstance(inner, ev.CheckpointScored):
                mean = inner.checkpoint.mean
                progress.update(task, info=f"x={inner.checkpoint.x}: mean {_fmt(mean, 3)}")
            progress.update(overall, info=spend_info(), detail=True)
        elif isinstance(event, SweepRunEnded):
            task = tasks.pop(event.run.id, None)
            if task is not None:
                progress.update(task, visible=False)
            if event.run.status == "finished":
                progress.update(overall, advance=1, info=f"{spend_info()} · {safe_markup(event.run.id)} finished")
            elif event.error:
                progress.note(f"[yellow]run {safe_markup(event.run.id)} stopped[/]: "
                              f"{safe_markup(event.error, one_line=True, max_chars=2000)}")

    return on_event


def _sweep_ended(runner, final) -> None:
    """How the command ends for a sweep that did not finish: resumable, with the reason."""
    if runner.stop_reason is not None:
        console.print(f"{safe_markup(final.note)}\ncontinue with `s3gym resume {safe_markup(final.id)}`", soft_wrap=True)
        raise typer.Exit(130)
    if runner.store_error is not None or runner.worker_error is not None:
        raise Stopped(f"sweep {final.id} stopped: {final.note}", resume=final.id)
    if runner.failed_models and not runner.budget_hit:
        raise Stopped(f"sweep {final.id} stopped: {final.note}", resume=final.id)
    console.print(f"{safe_markup(final.note)}\ncontinue with `s3gym resume {safe_markup(final.id)}`", soft_wrap=True)


def print_replies(store, sweep_id: str) -> None:
    """Replies per model over the whole sweep (every session of it): how many did not parse, and the
    warning `run` gives when most of them did not (engine.contract, the same rule)."""
    from s3gym_tui.cli.tables import print_table
    from s3gym_tui.engine.contract import count_unparsed, unparsed_text
    from s3gym_tui.engine.report_tables import INT, TEXT, Column, ReportTable

    counts: dict[str, list[int]] = {}
    for run in store.sweeps.sweep_runs(sweep_id):
        unparsed, replies = 0, 0
        for episode in store.episodes.list(run.id):
            bad, seen = count_unparsed(store.episodes.steps(episode.id))
            unparsed, replies = unparsed + bad, replies + seen
        row = counts.setdefault((run.config.model, run.config.decoding), [0, 0, 0])
        row[0] += 1
        row[1] += replies
        row[2] += unparsed
    rows = tuple((model, decoding, runs, replies, unparsed, f"{unparsed / replies:.0%}" if replies else "—")
                 for (model, decoding), (runs, replies, unparsed) in counts.items())
    cols = (Column("model", "model", TEXT), Column("decoding", "decoding", TEXT, 1), Column("runs", "runs", INT),
            Column("replies", "replies", INT), Column("unparsed", "did not parse", INT),
            Column("share", "share", INT))
    title = "replies per model" + (" (decoding grammar: action replies constrained to the game's grammar)"
                                   if any(decoding == "grammar" for _, decoding in counts) else "")
    print_table(console, ReportTable("replies", title, cols, rows), more="a wider terminal shows them")
    for (model, _), (_, replies, unparsed) in counts.items():
        warning = unparsed_text(model, unparsed, replies)
        if warning:
            console.print(f"[yellow bold]warning:[/] {safe_markup(warning)}", soft_wrap=True, highlight=False)


@cli.command("sweeps")
def list_sweeps(db: Optional[Path] = DbOption, limit: int = typer.Option(50, "--limit", min=1),
                as_json: bool = typer.Option(False, "--json", help="One JSON document instead of a table.")) -> None:
    """List stored sweeps, newest first, with their progress."""
    from s3gym_tui.cli.tables import print_table
    from s3gym_tui.engine.report_tables import ID, INT, TEXT, Column, ReportTable

    store = _store(db)
    rows = []
    for item in store.sweeps.list_sweeps(limit=limit):
        progress = store.sweeps.sweep_progress(item.id)
        rows.append((item.id, item.status, len(progress), sum(p.status == "finished" for p in progress),
                     ",".join(item.config.models), item.created_at[:19], item.note))
    if as_json:
        keys = ("id", "status", "runs", "finished", "models", "created", "note")
        emit_json([dict(zip(keys, r)) for r in rows])
        return
    table = ReportTable("sweeps", "sweeps", (Column("id", "id", ID), Column("status", "status", TEXT),
                                             Column("runs", "runs", INT), Column("finished", "done", INT),
                                             Column("models", "models", TEXT, 2),
                                             Column("created", "created", TEXT, 1),
                                             Column("note", "note", TEXT, 3)), tuple(rows))
    print_table(console, table, more="see --json")
