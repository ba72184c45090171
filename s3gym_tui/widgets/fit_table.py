"""A data table that fits its width: its least important columns give way first, and it says which.

Each column may be given `drop` (0: always shown; otherwise the highest goes first, as the CLI's
report tables do) and `shorten` (a minimum width: a long text column, e.g. a model id or a GGUF path,
is shortened in the middle to the room left instead of pushing the columns after it off the table).
The table keeps every cell of every column, shown or not: `get_cell` answers for a column left out,
`full_cell` gives a shortened cell whole, and a refit (a resize, rows added) shows them again as soon
as they fit. After each refit the table posts FitTable.Fitted with the headers left out, so the screen
can name them (`note()` says it in one line, as the CLI does at 80 columns)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from rich.cells import cell_len
from rich.text import Text
from textual.message import Message
from textual.widgets.data_table import ColumnKey, RowKey

from s3gym_tui.widgets import textual_patches
from s3gym_tui.widgets.table import DataTable, gated

ELLIPSIS = "…"


def shorten_middle(text: str, width: int) -> str:
    """`text` in at most `width` cells: its start and its end kept, "…" between (ids and paths differ
    at both ends: a provider prefix, a quantisation suffix)."""
    if cell_len(text) <= width:
        return text
    if width <= 1:
        return ELLIPSIS[:width]
    keep = width - 1
    head = (keep + 1) // 2
    tail = keep - head
    return text[:head] + ELLIPSIS + (text[-tail:] if tail else "")


def _plain(cell: Any) -> str:
    if isinstance(cell, Text):
        return cell.plain
    return "" if cell is None else str(cell)


def _shortened(cell: Any, width: int) -> Any:
    plain = _plain(cell)
    if cell_len(plain) <= width:
        return cell
    short = shorten_middle(plain, width)
    if isinstance(cell, Text):
        return Text(short, style=cell.style, justify=cell.justify)
    return short


@dataclass
class FitColumn:
    key: str
    label: str
    drop: int = 0
    shorten: int = 0  # 0: never shortened; else the narrowest it may become
    width: Optional[int] = None  # a fixed width (as DataTable's add_column)
    natural: int = 0  # the widest cell or label seen


@dataclass
class _Row:
    cells: dict[str, Any]
    kwargs: dict = field(default_factory=dict)


class FitTable(DataTable):
    """DataTable with columns that give way (see the module docstring). Add columns with
    `add_column(label, key=..., drop=..., shorten=...)`; rows, cells and clear as on any DataTable."""

    @dataclass
    class Fitted(Message):
        """The shown columns changed; `dropped` are the headers left out (empty: all shown)."""

        table: "FitTable"
        dropped: list[str]

        @property
        def control(self) -> "FitTable":
            return self.table

    def __init__(self, *args, note_in_subtitle: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.note_in_subtitle = note_in_subtitle  # name the columns left out in the border's subtitle
        self._fit_columns: list[FitColumn] = []
        self._fit_rows: dict[str, _Row] = {}
        self._shown: list[tuple[str, int]] = []  # (key, width given; 0 = natural) as built
        self._fit_width = 0
        self._refit_pending = False
        self._row_serial = 0
        self.dropped: list[str] = []

    # ----- the columns and rows kept ----------------------------------------------------------
    def add_column(self, label=None, *, width: Optional[int] = None, key: Optional[str] = None,
                   default: Any = None, drop: int = 0, shorten: int = 0) -> ColumnKey:
        key = key or (label if isinstance(label, str) else f"col{len(self._fit_columns)}")
        column = FitColumn(key, _plain(label), drop, shorten, width, cell_len(_plain(label)))
        self._fit_columns.append(column)
        self._shown.append((key, 0))
        self._ask_refit()
        return super().add_column(label, width=width, key=key, default=default)

    def add_row(self, *cells, height: Optional[int] = 1, key: Optional[str] = None, label=None) -> RowKey:
        if key is None:
            self._row_serial += 1
            key = f"row-{self._row_serial}"
        values = {c.key: gated(v) for c, v in zip(self._fit_columns, cells)}
        for column in self._fit_columns:
            column.natural = max(column.natural, cell_len(_plain(values.get(column.key))))
        self._fit_rows[key] = _Row(values, {"height": height, "label": label})
        self._ask_refit()
        return super().add_row(*self._visible_cells(values), height=height, key=key, label=label)

    def clear(self, columns: bool = False):
        self._fit_rows.clear()
        if columns:
            self._fit_columns.clear()
            self._shown = []
        else:
            for column in self._fit_columns:
                column.natural = cell_len(column.label)
        return super().clear(columns=columns)

    def remove_row(self, row_key):
        self._fit_rows.pop(getattr(row_key, "value", row_key), None)
        return super().remove_row(row_key)

    def update_cell(self, row_key, column_key, value, *, update_width: bool = False):
        row = getattr(row_key, "value", row_key)
        col = getattr(column_key, "value", column_key)
        value = gated(value)
        if row in self._fit_rows:
            self._fit_rows[row].cells[col] = value
        column = self._column(col)
        if column is not None:
            if cell_len(_plain(value)) > column.natural:
                column.natural = cell_len(_plain(value))
                self._ask_refit()
        width = dict(self._shown).get(col)
        if width is None:
            return None  # a column left out: kept, shown when it fits
        return super().update_cell(row_key, column_key, _shortened(value, width) if width else value,
                                   update_width=update_width)

    def update_cell_at(self, coordinate, value, *, update_width: bool = False):
        cell_key = self.coordinate_to_cell_key(coordinate)
        return self.update_cell(cell_key.row_key, cell_key.column_key, value, update_width=update_width)

    def get_cell(self, row_key, column_key):
        col = getattr(column_key, "value", column_key)
        row = getattr(row_key, "value", row_key)
        if col not in dict(self._shown) and row in self._fit_rows:
            return self._fit_rows[row].cells.get(col)
        return super().get_cell(row_key, column_key)

    def full_cell(self, row_key, column_key) -> Any:
        """The cell as added (whole, even where a shortened column shows it cut in the middle)."""
        row = self._fit_rows.get(getattr(row_key, "value", row_key))
        return None if row is None else row.cells.get(getattr(column_key, "value", column_key))

    def full_row(self, row_key) -> list[Any]:
        """Every cell of a row, shown or not, in the order of the columns as added."""
        row = self._fit_rows.get(getattr(row_key, "value", row_key))
        return [] if row is None else [row.cells.get(c.key) for c in self._fit_columns]

    @property
    def shown_columns(self) -> list[str]:
        return [key for key, _ in self._shown]

    def note(self) -> str:
        """"not shown at N columns: A, B" (empty when every column is shown)."""
        if not self.dropped:
            return ""
        return f"not shown at {self.app.size.width} columns: {', '.join(self.dropped)}"

    # ----- fitting ------------------------------------------------------------------------------
    def _column(self, key: str) -> Optional[FitColumn]:
        return next((c for c in self._fit_columns if c.key == key), None)

    def _visible_cells(self, cells: dict[str, Any]) -> list[Any]:
        return [_shortened(cells.get(key), width) if width else cells.get(key) for key, width in self._shown]

    def _ask_refit(self) -> None:
        if not self._refit_pending and self.is_mounted:
            self._refit_pending = True
            self.call_later(self._refit)

    def _room(self) -> int:
        return self.scrollable_content_region.width

    def layout_for(self, room: int) -> tuple[list[tuple[str, int]], list[str]]:
        """(shown columns as (key, width; 0 = natural), dropped labels) for `room` cells."""
        pad = 2 * self.cell_padding
        columns = list(self._fit_columns)
        dropped: set[str] = set()

        def low(c: FitColumn) -> int:  # the narrowest a shortened column gets: never below its header
            return max(c.shorten, cell_len(c.label))

        def need(cols: list[FitColumn]) -> int:
            return sum((c.width if c.width is not None else min(c.natural, low(c)) if c.shorten else c.natural)
                       + pad for c in cols)

        while need(columns) > room:
            droppable = [c for c in columns if c.drop]
            if not droppable:
                break
            victim = max(droppable, key=lambda c: (c.drop, columns.index(c)))
            columns.remove(victim)
            dropped.add(victim.key)
        spare = room - need(columns)
        shown = []
        for c in columns:
            if c.shorten and c.width is None and c.natural > low(c):
                give = min(c.natural, low(c) + max(0, spare))
                spare -= give - low(c)
                shown.append((c.key, give if give < c.natural else 0))
            else:
                shown.append((c.key, 0))
        return shown, [c.label for c in self._fit_columns if c.key in dropped]

    def _refit(self) -> None:
        self._refit_pending = False
        room = self._room()
        if room <= 0 or not self._fit_columns:
            return
        shown, dropped = self.layout_for(room)
        if shown == self._shown:
            return
        self._rebuild(shown)
        self.dropped = dropped
        if self.note_in_subtitle:  # a border has little room: just the headers
            self.border_subtitle = f"not shown: {', '.join(dropped)}" if dropped else None
        self.post_message(self.Fitted(self, list(dropped)))

    def _rebuild(self, shown: list[tuple[str, int]]) -> None:
        """Lay the table out again with these columns (the cursor stays on its row)."""
        cursor_key = None
        if self.row_count and 0 <= self.cursor_row < self.row_count:
            cursor_key = self.coordinate_to_cell_key((self.cursor_row, 0)).row_key
        scroll_y = self.scroll_y
        self._shown = shown
        DataTable.clear(self, columns=True)
        for key, _width in shown:
            column = self._column(key)
            DataTable.add_column(self, column.label, width=column.width, key=key)
        for key, row in self._fit_rows.items():
            DataTable.add_row(self, *self._visible_cells(row.cells), key=key, **row.kwargs)
        if cursor_key is not None and cursor_key.value in self._fit_rows:
            self.move_cursor(row=self.get_row_index(cursor_key), animate=False, scroll=False)
        self.scroll_to(y=scroll_y, animate=False)

    def laid_out(self, previous) -> None:
        """A layout gave the table a new width: fit it now, before that layout's frame is drawn (a
        refit after it showed every column first, then the fitted table: two frames)."""
        super().laid_out(previous)
        if self.is_mounted and self.outer_size.area and self._room() != self._fit_width:
            self._fit_width = self._room()
            self._refit_pending = False
            self._refit()
            if textual_patches.measure_new_rows(self):  # the rows just added, measured as the base class does
                textual_patches.scroll_cursor_into_view(self)
