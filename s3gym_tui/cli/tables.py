"""Render report tables (engine.report_tables) on a terminal without cutting a number or an id,
and as JSON or CSV files."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from rich.console import Console
from rich.markup import escape
from rich.measure import Measurement
from rich.table import Table

from s3gym_tui.engine.report_tables import ID, INT, NUM, SIGNED, TEXT, Column, Report, ReportTable


def cell(value: Any, kind: str) -> str:
    """The terminal text of a value: '-' for missing, 3 decimals, signed with 2."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return "-"
    if kind == NUM:
        return f"{value:.3f}" if isinstance(value, (int, float)) else str(value)
    if kind == SIGNED:
        return f"{value:+.2f}" if isinstance(value, (int, float)) else str(value)
    if kind == INT:
        return f"{value:d}" if isinstance(value, int) else str(value)
    return str(value)


def _rich_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]], fold: bool) -> Table:
    table = Table(title=escape(title), title_justify="left", expand=False)
    for col in columns:
        text_like = col.kind in (TEXT,)
        table.add_column(escape(col.header), justify="left" if col.kind in (ID, TEXT) else "right",
                         no_wrap=not (fold and text_like), overflow="fold")
    for row in rows:
        table.add_row(*(escape(v) for v in row))
    return table


def fit_table(console: Console, table: ReportTable, width: Optional[int] = None) -> tuple[Table, list[str]]:
    """A rich Table of `table` that fits `width` (default: the console's) with every id and number
    whole: first text columns may wrap, then droppable columns go (highest `drop` first). Returns
    the table and the headers of the dropped columns."""
    width = width or console.width
    columns = list(table.columns)
    texts = [[cell(v, c.kind) for v, c in zip(row, table.columns)] for row in table.rows]
    dropped: list[str] = []
    options = console.options.update_width(width)
    while True:
        keep = [table.columns.index(c) for c in columns]
        rows = [[r[i] for i in keep] for r in texts]
        for fold in (False, True):
            rich = _rich_table(table.title, columns, rows, fold)
            if Measurement.get(console, options, rich).minimum <= width:
                return rich, dropped
        droppable = [c for c in columns if c.drop]
        if not droppable:
            return rich, dropped  # nothing left to drop: the terminal is narrower than the ids
        victim = max(droppable, key=lambda c: (c.drop, columns.index(c)))
        columns.remove(victim)
        dropped.append(victim.header)


def print_table(console: Console, table: ReportTable) -> None:
    rich, dropped = fit_table(console, table)
    console.print(rich)
    notes = [table.note] if table.note else []
    if dropped:
        notes.append(f"not shown at {console.width} columns: {', '.join(dropped)} (see --json or --csv)")
    for note in notes:
        console.print(f"[dim]{escape(note)}[/]", soft_wrap=True, highlight=False)


def print_report(console: Console, report: Report, skip: Iterable[str] = ()) -> None:
    skipped = set(skip)
    for table in report.tables:
        if table.name not in skipped:
            print_table(console, table)


def _finite(value: Any) -> Any:
    """NaN and infinities become null (JSON has no such numbers)."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, dict):
        return {k: _finite(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_finite(v) for v in value]
    return value


def report_json(report: Report) -> str:
    return json.dumps(_finite(report.as_json()), indent=2, ensure_ascii=False, allow_nan=False, default=str)


def write_csv(report: Report, directory: Path) -> list[Path]:
    """One CSV per table (header row = the JSON keys; missing values are empty cells)."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = []
    for table in report.tables:
        path = directory / f"{table.name}.csv"
        with open(path, "w", encoding="utf-8", newline="") as handle:
            writer = csv.writer(handle)
            writer.writerow([c.key for c in table.columns])
            for row in table.rows:
                writer.writerow(["" if v is None else v for v in row])
        paths.append(path)
    return paths
