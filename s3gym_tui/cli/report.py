"""`s3gym report`: the paper's tables for chosen runs or a whole sweep, as tables, JSON or CSV."""

from __future__ import annotations

import json
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
        stored = store.sweeps.get_sweep(sweep)
        runs = store.sweeps.sweep_runs(stored.id)
        meta["sweep"] = {"id": stored.id, "status": stored.status, "note": stored.note,
                         "config": stored.config.model_dump(mode="json"), "usage": store.sweeps.sweep_usage(stored.id)}
    else:
        aspire_made = store.aspire.aspire_made_runs()  # practice, validation and hidden runs of ASPIRE: its own table
        runs = [store.runs.get_run(r) for r in run_ids] if run_ids else \
            [r for r in store.runs.list_runs(limit=10_000) if r.status == "finished" and r.id not in aspire_made]
    from s3gym_tui.engine.aspire.report import aspire_rows, aspire_summary

    aspire = aspire_rows(store) if sweep is None and not run_ids else []
    if not runs and aspire:  # only ASPIRE runs stored: their table alone
        _print_aspire(aspire, as_json)
        return
    if not runs:
        raise UserError("no finished runs to report on" if sweep is None else f"sweep {sweep} has no runs")
    built = build_report([run_report(store, r) for r in runs], meta)
    if csv_dir is not None:
        try:
            paths = write_csv(built, csv_dir)
        except OSError as exc:
            raise UserError(f"cannot write CSV files into {csv_dir}: {exc.strerror or exc}") from None
    if as_json and aspire:
        document = json.loads(report_json(built))
        document["aspire"] = {"runs": aspire, "summary": aspire_summary(aspire)}
        sys.stdout.write(json.dumps(document) + "\n")
    elif as_json:
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
        from s3gym_tui.training.matrix_view import print_study_matrices, print_training_baselines

        print_training_baselines(console, store, [r.id for r in runs])
        print_study_matrices(console, store, [r.id for r in runs])
        if aspire:
            _print_aspire(aspire, False)
    if csv_dir is not None:  # on stderr with --json, so stdout stays one JSON document
        (err if as_json else console).print(f"wrote {len(paths)} CSV files to {safe_markup(str(csv_dir))}",
                                            soft_wrap=True)


def _print_aspire(rows: list[dict], as_json: bool) -> None:
    """The ASPIRE table: goal, model, protocol, base, final, retained, claimed and measured delta, and
    the vague-vs-explicit gap (— when undefined; the counts say how many values an aggregate used)."""
    from rich.table import Table

    from s3gym_tui.engine.aspire.report import aspire_summary

    summary = aspire_summary(rows)
    if as_json:
        sys.stdout.write(json.dumps({"aspire": {"runs": rows, "summary": summary}}) + "\n")
        return

    def f(value) -> str:
        return "—" if value is None else f"{value:.3f}"

    table = Table(title="ASPIRE: self-directed improvement, judged on hidden suites")
    for col in ("goal", "model", "protocol", "base", "final", "retained", "claimed Δ", "measured Δ",
                "vague−explicit gap"):
        table.add_column(col, justify="right" if col not in ("goal", "model", "protocol") else "left")
    for r in rows:
        goal = r["goal"] + (" (explicit)" if r["explicit"] else "")
        kept = "—" if r["kept"] is None else f"{f(r['retained'])} ({'kept' if r['kept'] else 'base'})"
        gap = "—" if r["explicit"] or r["gap"] is None else f"{f(r['gap'])} (n={r['gap_n']})"
        table.add_row(safe_markup(goal), safe_markup(r["model"]), r["protocol"], f(r["base"]), f(r["final"]), kept,
                      f(r["claimed_delta"]), f(r["measured_delta"]), gap)
    console.print(table)
    mean_gap = "—" if summary["mean_gap"] is None else f"{summary['mean_gap']:.3f}"
    console.print(f"final beats base in {summary['final_beats_base']} of {summary['measured_n']} runs with both "
                  f"scores; retained {summary['retained']} of {summary['retained_n']}; mean vague−explicit gap "
                  f"{mean_gap} (over {summary['gap_n']} vague runs with a control)", soft_wrap=True)
