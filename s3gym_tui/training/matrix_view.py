"""The consolidation matrix as rich tables (for `s3gym distill`, `s3gym matrix` and `s3gym report`):
scores per game with the delta to the base, negative transfer in red, and a loss summary per training."""

from __future__ import annotations

from typing import Optional

from rich.console import Console
from rich.table import Table
from rich.text import Text

from s3gym_tui.textgate import safe_markup
from s3gym_tui.training.matrix import Matrix


def _fmt(value: Optional[float], digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def matrix_table(matrix: Matrix) -> Table:
    table = Table(title=f"study {safe_markup(matrix.study.id)}: strict evaluation score per game (Δ vs base; "
                        f"red = negative transfer)")
    table.add_column("row", no_wrap=True)
    for game in matrix.games:
        table.add_column(safe_markup(game, one_line=True), justify="right", no_wrap=True)
    table.add_column("mean", justify="right", no_wrap=True)
    table.add_column("updates", justify="right", no_wrap=True)
    for row in matrix.rows:
        cells = []
        for game in matrix.games:
            c = row.cells[game]
            if c.mean is None:
                cells.append(Text("-", style="dim"))
                continue
            text = _fmt(c.mean)
            if row.kind != "base" and c.delta is not None:
                text += f" ({c.delta:+.3f})"
            style = "bold red" if c.negative else ("bold" if row.own_game == game else "")
            cells.append(Text(text, style=style))
        table.add_row(safe_markup(row.label), *cells, _fmt(row.mean), "-" if row.steps is None else str(row.steps))
    return table


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
    console.print(loss_table(matrix))
    negative = matrix.negative_cells
    if negative:
        console.print("[red]negative transfer[/] (below the base model): " +
                      "; ".join(f"{safe_markup(label)} on {safe_markup(game)}" for label, game in negative), soft_wrap=True)


def print_study_matrices(console: Console, store, run_ids) -> int:
    """The matrices of the studies that involve the given runs (for `s3gym report`); how many."""
    from s3gym_tui.training.matrix import studies_for_runs, study_matrix

    studies = studies_for_runs(store, run_ids)
    for study_id in studies:
        print_matrix(console, study_matrix(store, study_id))
    return len(studies)
