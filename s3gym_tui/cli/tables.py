"""Render report tables (engine.report_tables) on a terminal without cutting a number or an id,
and as JSON or CSV files."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path
from typing import Any, Iterable, Optional, Sequence

from rich.console import Console
from rich.table import Table

from s3gym_tui.engine.glossary import DASH, METRICS, REASONS, UNDEFINED, fmt_metric, fmt_share, fmt_signed, reasons_in
from s3gym_tui.engine.report_tables import ID, INT, NOTE, NUM, PCT, SIGNED, TEXT, USD, Column, Report, ReportTable
from s3gym_tui.textgate import safe, safe_json, safe_markup


TEXT_CELL_CHARS = 300  # a longer text (a note) is cut in a table, whole in --json


def cell(value: Any, kind: str) -> str:
    """The terminal text of a value in the app's one number format (engine.glossary): fixed
    decimals, '—' when missing or undefined, signed differences with their sign; a note is blank
    when there is none. Text is gated (s3gym_tui.textgate) to one line; long free text is cut,
    never an id or a number."""
    if kind == NOTE:
        return "" if value is None else safe(value, one_line=True, max_chars=TEXT_CELL_CHARS)
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return DASH
    return safe(_cell(value, kind), one_line=True, max_chars=TEXT_CELL_CHARS if kind == TEXT else None)


def _cell(value: Any, kind: str) -> str:
    if kind == NUM:
        return fmt_metric(value) if isinstance(value, (int, float)) else str(value)
    if kind == SIGNED:
        return fmt_signed(value) if isinstance(value, (int, float)) else str(value)
    if kind == USD:
        return f"{value:.4f}" if isinstance(value, (int, float)) else str(value)
    if kind == PCT:
        return fmt_share(value) if isinstance(value, (int, float)) else str(value)
    if kind == INT:
        return f"{value:d}" if isinstance(value, int) else str(value)
    return str(value)


FOLD_TO = 12  # a long text cell (a model string) wraps at this width when the table is too wide


def _widths(columns: Sequence[Column], rows: Sequence[Sequence[str]]) -> list[int]:
    return [max([len(c.header)] + [len(r[i]) for r in rows]) for i, c in enumerate(columns)]


def _folds(column: Column, width: int, level: int) -> bool:
    """Level 0: nothing wraps; 1: long text wraps; 2 (last resort): ids wrap too. Never numbers."""
    kinds = {0: (), 1: (TEXT, NOTE), 2: (TEXT, NOTE, ID)}[level]
    return column.kind in kinds and width > max(FOLD_TO, len(column.header))


def _needed(columns: Sequence[Column], widths: Sequence[int], level: int) -> int:
    """Terminal columns a table needs: cells, one space of padding each side, the borders."""
    cells = [max(FOLD_TO, len(c.header)) if _folds(c, w, level) else w for c, w in zip(columns, widths)]
    return sum(w + 2 for w in cells) + len(cells) + 1


def _rich_table(title: str, columns: Sequence[Column], rows: Sequence[Sequence[str]], level: int) -> Table:
    widths = _widths(columns, rows)
    table = Table(title=safe_markup(title), title_justify="left", expand=False)
    for col, width in zip(columns, widths):
        folds = _folds(col, width, level)
        table.add_column(safe_markup(col.header), justify="left" if col.kind in (ID, TEXT, NOTE) else "right",
                         no_wrap=not folds, overflow="fold",
                         min_width=max(FOLD_TO, len(col.header)) if folds else width)
    for row in rows:
        table.add_row(*(safe_markup(v) for v in row))
    return table


def fit_table(console: Console, table: ReportTable, width: Optional[int] = None) -> tuple[Table, list[str]]:
    """A rich Table of `table` that fits `width` (default: the console's) and never cuts a value:
    long text wraps first, then droppable columns go (highest `drop` first), and as a last resort
    ids wrap too. Numbers always keep their width. Returns the table and the dropped headers."""
    width = width or console.width
    columns = [c for i, c in enumerate(table.columns)
               if not c.hide_empty or any(row[i] is not None for row in table.rows)]
    texts = [[cell(v, c.kind) for v, c in zip(row, table.columns)] for row in table.rows]
    dropped: list[str] = []
    while True:
        keep = [table.columns.index(c) for c in columns]
        rows = [[r[i] for i in keep] for r in texts]
        widths = _widths(columns, rows)
        for level in (0, 1):
            if _needed(columns, widths, level) <= width:
                return _rich_table(table.title, columns, rows, level), dropped
        droppable = [c for c in columns if c.drop]
        if not droppable:
            return _rich_table(table.title, columns, rows, 2), dropped
        victim = max(droppable, key=lambda c: (c.drop, columns.index(c)))
        columns.remove(victim)
        dropped.append(victim.header)


def print_table(console: Console, table: ReportTable, more: str = "see --json or --csv") -> None:
    rich, dropped = fit_table(console, table)
    console.print(rich)
    notes = [table.note] if table.note else []
    if dropped:
        notes.append(f"not shown at {console.width} columns: {', '.join(dropped)} ({more})")
    for note in notes:
        console.print(f"[dim]{safe_markup(note)}[/]", highlight=False)


def print_report(console: Console, report: Report, skip: Iterable[str] = ()) -> None:
    skipped = set(skip)
    shown = [table for table in report.tables if table.name not in skipped]
    for table in shown:
        print_table(console, table)
    print_meanings(console, shown)


def _meaning_key(header: str) -> str:
    """A table header as the glossary names it ("agree" -> "agreement", "corr(A,g)" -> "corr(A, g)")."""
    aliases = {"agree": "agreement", "mean": "ΔNABA", "corr(A,g)": "corr(A, g)", "corr(-E,g)": "corr(−E, g)",
               "mean NABA": "NABA", "steps": "n"}
    return aliases.get(header, header)


def print_meanings(console: Console, tables: Sequence[ReportTable]) -> None:
    """What the shown figures mean, once under all tables (the app's help screen reads the same),
    and why the undefined ones are undefined (the reasons named in the tables' `why` columns)."""
    seen: dict[str, str] = {}
    for table in tables:
        for column in table.columns:
            key = _meaning_key(column.header)
            if key in METRICS and key not in seen:
                seen[key] = METRICS[key]
    if not seen:
        return
    console.print("[bold]what the figures mean[/]", highlight=False)
    for name, meaning in seen.items():
        console.print(f"[dim]  {safe_markup(name)}: {safe_markup(meaning)}[/]", highlight=False, soft_wrap=False)
    console.print(f"[dim]  {safe_markup(UNDEFINED)}[/]", highlight=False)
    whys = [row[i] for table in tables for i, c in enumerate(table.columns) if c.key == "why" for row in table.rows]
    for reason in reasons_in(whys):
        console.print(f"[dim]    {safe_markup(reason)}: {safe_markup(REASONS[reason])}[/]", highlight=False)


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
    return safe_json(json.dumps(_finite(report.as_json()), indent=2, ensure_ascii=False, allow_nan=False,
                                default=str))


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
