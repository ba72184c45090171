"""The consolidation matrix as rich tables (for `s3gym distill`, `s3gym matrix` and `s3gym report`):
scores per game with the delta to the base, negative transfer in red, and a loss summary per training."""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text

from s3gym_tui.textgate import safe_markup
from s3gym_tui.training.matrix import BASELINE, CONSTRAINED_BASELINE, NORMALISATION, Matrix


def _fmt(value: Optional[float], digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def _routed(row) -> Text:
    if row.routed is None:
        return Text("-", style="dim")
    text = Text(" · ".join(f"{g} {n}" for g, n in row.routed.items()))
    if row.unrouted:
        text.stylize("bold yellow")
    return text


def matrix_table(matrix: Matrix) -> Table:
    table = Table(title=f"study {safe_markup(matrix.study.id)}: strict evaluation score per game (Δ vs base; "
                        f"red = negative transfer)")
    table.add_column("row", no_wrap=True)
    context = matrix.column_context
    for game in matrix.games:
        header = safe_markup(game, one_line=True) + (f"\n[dim]{safe_markup(context[game])}[/]" if context[game] else "")
        table.add_column(header, justify="right", no_wrap=True)
    table.add_column("norm. mean", justify="right", no_wrap=True)
    table.add_column("updates", justify="right", no_wrap=True)
    table.add_column("routed (phase 2)", no_wrap=True)
    for row in matrix.rows:
        cells = []
        for game in matrix.games:
            c = row.cells[game]
            if c.mean is None:
                cells.append(Text("-", style="dim"))
                continue
            text = _fmt(c.mean)
            if row.kind not in ("base",) and c.delta is not None:
                text += f" ({c.delta:+.3f})"
            if context[game] is None:  # the column's cells differ: each says how it was played
                text += f"\n{c.context}"
            style = "bold red" if c.negative else ("bold" if row.own_game == game else "")
            cells.append(Text(text, style=style))
        table.add_row(safe_markup(row.label), *cells, _fmt(row.normalised_mean),
                      "-" if row.steps is None else str(row.steps), _routed(row))
    return table


def matrix_legend(matrix: Matrix) -> list[str]:
    """The lines under the matrix: normalisation, serving paths, unrouted games (markup)."""
    lines = [f"[dim]{BASELINE}" + (f"; {CONSTRAINED_BASELINE}" if any(r.kind == "base-grammar" for r in matrix.rows)
                                   else "; no evaluation under the grammar: a format gain is not told apart") + "[/]",
             f"[dim]norm. mean: the mean over games of each score normalised {NORMALISATION}; '-' unless every "
             f"game has one (no plain mean across games: their scores have different scales)[/]"]
    paths = matrix.serving_paths
    if len(paths) == 1:
        lines.append(f"[dim]every cell, the base row included, is served by {safe_markup(paths[0])}[/]")
    elif paths:
        lines.append(f"[yellow]cells are served differently[/]: {safe_markup('; '.join(paths))} (see each cell)")
    for row in matrix.rows:
        if row.unrouted:
            lines.append(f"[yellow]{safe_markup(row.label)}: no prompt was routed to the expert of "
                         f"{safe_markup(', '.join(row.unrouted))}[/]: that game taught it nothing")
    return lines


def loss_table(matrix: Matrix) -> Table:
    table = Table(title="training losses (first -> last, per phase)")
    for col in ("training", "phase", "points", "first", "last", "min"):
        table.add_column(col, justify="left" if col in ("training", "phase") else "right", no_wrap=True)
    for curve in matrix.losses:
        phases = sorted({p.phase for p in curve.points})
        if not phases:
            table.add_row(safe_markup(curve.label), "-", "0", "-", "-", "-")
        for phase in phases:
            points = [p.loss for p in curve.points if p.phase == phase]
            table.add_row(safe_markup(curve.label), safe_markup(phase), str(len(points)), _fmt(points[0]), _fmt(points[-1]),
                          _fmt(min(points)))
    return table


def print_matrix(console: Console, matrix: Matrix) -> None:
    console.print(matrix_table(matrix))
    for line in matrix_legend(matrix):
        console.print(line, soft_wrap=True)
    console.print(loss_table(matrix))
    negative = matrix.negative_cells
    if negative:
        console.print("[red]negative transfer[/] (below the base model): " +
                      "; ".join(f"{safe_markup(label)} on {safe_markup(game)}" for label, game in negative), soft_wrap=True)


def print_training_baselines(console: Console, store, run_ids) -> int:
    """For each run that scores a training's checkpoints as written (for `s3gym report`): which baseline its
    deltas use and what its last checkpoint gained (format or play: training/baseline.py); how many."""
    from s3gym_tui.training.baseline import baseline_text, outcome_line
    from s3gym_tui.training.evaluate import NotATrainingRun, training_report

    shown = 0
    for run_id in run_ids:
        try:
            report = training_report(store, store.runs.get_run(run_id))
        except NotATrainingRun:
            continue
        console.print(f"training {safe_markup(report.training.id)} on {safe_markup(report.game)}: "
                      f"{safe_markup(baseline_text(report))}", soft_wrap=True)
        line = outcome_line(report)
        if line:
            console.print(f"  {safe_markup(line)}", soft_wrap=True)
        shown += 1
    return shown


def print_study_matrices(console: Console, store, run_ids) -> int:
    """The matrices of the studies that involve the given runs (for `s3gym report`); how many."""
    from s3gym_tui.training.matrix import studies_for_runs, study_matrix

    studies = studies_for_runs(store, run_ids)
    for study_id in studies:
        print_matrix(console, study_matrix(store, study_id))
    return len(studies)
