"""`s3gym report`: the paper's tables for chosen runs or a whole sweep, as tables, JSON or CSV."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from s3gym_tui.cli.common import DbOption, JsonOption, UserError, _store, cli, console, err
from s3gym_tui.textgate import safe_markup


@cli.command()
def report(run_ids: List[str] = typer.Argument(None, metavar="[RUN]..."),
           sweep: Optional[str] = typer.Option(None, "--sweep", "-s", help="Every run of this sweep."),
           as_json: bool = JsonOption,
           csv_dir: Optional[Path] = typer.Option(None, "--csv", help="Also write one CSV per table into "
                                                  "this directory."),
           db: Optional[Path] = DbOption) -> None:
    """The paper's tables: per game, pathway and model Avg, Max, AUC+ and NABA; Summary vs History
    Delta NABA; self-judging by game and by phase; the judgement-improvement coupling; the paper's
    own figures beside ours (default: all finished runs)."""
    from s3gym_tui.cli.tables import print_report, report_json, write_csv
    from s3gym_tui.engine.report import run_report
    from s3gym_tui.engine.report_tables import build_report

    store = _store(db)
    meta: dict = {}
    if sweep is not None:
        if run_ids:
            raise UserError("give run ids or --sweep, not both")
        stored = store.get_sweep(sweep)
        runs = store.sweep_runs(stored.id)
        meta["sweep"] = {"id": stored.id, "status": stored.status, "note": stored.note,
                         "config": stored.config.model_dump(mode="json"), "usage": store.sweep_usage(stored.id)}
    else:
        runs = [store.get_run(r) for r in run_ids] if run_ids else \
            [r for r in store.list_runs(limit=10_000) if r.status == "finished"]
    if not runs:
        raise UserError("no finished runs to report on" if sweep is None else f"sweep {sweep} has no runs")
    built = build_report([run_report(store, r) for r in runs], meta)
    if csv_dir is not None:
        try:
            paths = write_csv(built, csv_dir)
        except OSError as exc:
            raise UserError(f"cannot write CSV files into {csv_dir}: {exc.strerror or exc}") from None
    if as_json:
        sys.stdout.write(report_json(built) + "\n")
    else:
        if sweep is not None:
            s = meta["sweep"]
            unfinished = sum(r.status != "finished" for r in runs)
            console.print(f"sweep [bold]{safe_markup(stored.id)}[/] {stored.status}: {len(runs)} runs"
                          + (f", {unfinished} not finished" if unfinished else "")
                          + f"; {s['usage']['calls']:,} model calls, ${s['usage']['cost']:,.4f}", soft_wrap=True)
        print_report(console, built, skip=("checkpoints",))
        console.print("[dim]checkpoint means per run: --json or --csv[/]")
        from s3gym_tui.training.matrix_view import print_study_matrices

        print_study_matrices(console, store, [r.id for r in runs])
    if csv_dir is not None:  # on stderr with --json, so stdout stays one JSON document
        (err if as_json else console).print(f"wrote {len(paths)} CSV files to {safe_markup(str(csv_dir))}",
                                            soft_wrap=True)
