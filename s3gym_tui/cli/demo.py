"""`s3gym demo`: build the demo database offline (the learner's sweep and the embedded model's short run,
engine/demo.py's schedule), then open the app on its guided tour."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path
from typing import Optional

import typer

from s3gym_tui.cli.common import ProgressOption, UserError, cli, console
from s3gym_tui.progress import ProgressMode
from s3gym_tui.textgate import safe_markup


def _planned(sweep_config, decoding: Optional[str]):
    """The sweep's runs, fitted like `s3gym sweep`'s (decoding, server facts), refused before storing."""
    from s3gym_tui.cli.sweep import fit_runs, preflight

    runs, _ = fit_runs(sweep_config.run_configs(), decoding, {}, announce=False)
    preflight(runs)
    return runs


@cli.command()
def demo(db: Optional[Path] = typer.Option(None, "--db", help="Where to build it (default: s3gym-demo.db in the "
                                           "user data directory). Only a demo database is ever replaced."),
         no_open: bool = typer.Option(False, "--no-open", help="Build it, then stop (do not open the app)."),
         progress: Optional[ProgressMode] = ProgressOption) -> None:
    """Build the demo database offline (a few minutes on 2 cores): the glass-box learner over the seven
    games x {none, history, summary} and one short run of the embedded model for contrast; then open the
    app on its guided tour (Report's Delta NABA -> Pairs -> Compare -> Summaries). Re-running replaces the
    demo database and nothing else."""
    from s3gym_tui.cli.sweep import follow_sweeps
    from s3gym_tui.engine.demo import (DemoMark, DemoRefused, check_target, default_demo_path, remove_database,
                                       schedule, write_mark)
    from s3gym_tui.store import Store
    from s3gym_tui.store.leases import HOST

    path = Path(db).expanduser() if db is not None else default_demo_path()
    try:
        plan = schedule()
        check_target(path)
    except (DemoRefused, ValueError) as exc:
        raise UserError(str(exc)) from None
    learner = plan.sweep()
    learner_runs = _planned(learner, None)
    contrast, contrast_runs, note = None, [], ""
    if plan.contrast is not None:
        contrast = plan.contrast.sweep()
        try:
            contrast_runs = _planned(contrast, plan.contrast.decoding)
        except UserError as exc:  # the local extra is missing: the demo goes on without the contrast
            contrast, note = None, f"embedded-model contrast skipped: {exc}".replace(" (nothing was stored)", "")
    wall, cpu = time.monotonic(), time.process_time()
    remove_database(path)
    store = Store(path, create=True)
    try:
        mark = DemoMark(schedule=plan, pid=os.getpid(), host=HOST, contrast_note=note)
        write_mark(store, mark)  # first: from here on the file is a demo database, replaceable
        stored = store.sweeps.create_sweep(learner, learner_runs)[0]
        sweeps = [stored]
        if contrast is not None:
            sweeps.append(store.sweeps.create_sweep(contrast, contrast_runs)[0])
        mark = mark.model_copy(update={"sweep_id": stored.id,
                                       "contrast_sweep_id": sweeps[1].id if len(sweeps) > 1 else None})
        write_mark(store, mark)
        console.print(f"building the demo database [bold]{safe_markup(str(path))}[/]: {len(learner_runs)} learner "
                      f"runs ({len(learner.games)} games x {', '.join(learner.pathways)}; {plan.explore_episodes} "
                      f"exploration episodes, {plan.eval_episodes} eval episodes every {plan.eval_every})"
                      + (f" and {plan.contrast.model} on {plan.contrast.game} ({plan.contrast.pathway}, "
                         f"{plan.contrast.explore_episodes} exploration episodes, step cap {plan.contrast.step_cap})"
                         if contrast is not None else ""), soft_wrap=True, highlight=False)
        if note:
            console.print(f"[yellow]{safe_markup(note, one_line=True)}[/]", soft_wrap=True, highlight=False)
        follow_sweeps(store, sweeps, progress)
        wall, cpu = time.monotonic() - wall, time.process_time() - cpu
        write_mark(store, mark.model_copy(update={"status": "ready", "wall_s": round(wall, 1),
                                                  "cpu_s": round(cpu, 1), "pid": None}))
    finally:
        store.close()
    console.print(f"demo database ready: [bold]{safe_markup(str(path))}[/] (built in {wall:.0f} s, "
                  f"{cpu:.0f} s of CPU)", soft_wrap=True, highlight=False)
    opener = f"s3gym --db {safe_markup(str(path))}"
    if no_open or not (sys.stdin.isatty() and sys.stdout.isatty()):
        console.print(f"open it with `{opener}`; on Home, d opens the guided tour", soft_wrap=True, highlight=False)
        return
    from s3gym_tui.app import S3GymApp

    app = S3GymApp(db_path=path, tour=True)
    app.run()
    if app.return_code:
        raise typer.Exit(app.return_code)
