"""The app's data table: Textual's DataTable, minus a re-render of every cell on a resize that
does not change its size.

Textual's DataTable drops all its render caches on every Resize event. A newly shown screen
gets its first Resize after the first frame has been drawn at that very size, so each table was
rendered twice as it opened (a 30-row table: ~17 ms of the Summaries screen's opening). Cells do
not depend on the widget's size and the line cache is keyed by width, so a Resize to the size
already drawn can keep the caches; any other resize invalidates them as before.

That Resize also hid a stale cache: DataTable measures column widths on idle, after rows drawn
at the old widths may be cached, and does not invalidate them when the widths change
(textual_patches, patch 7, invalidates them).

Rows added before a layout are measured, and the cursor scrolled into view, as that layout places
the table (DataTable leaves both to its idle handler and to after the next refresh, that is after
the first frame: a screen opened on a table's last row showed its first rows, then jumped). The
layout calls `laid_out` (textual_patches, patches 5 and 6).

Every cell and column label passes the gate (s3gym_tui.textgate) as it is added: one line, no
markup read, controls shown visibly. Tables show stored text (ids, models, actions): this is where
all of it enters."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import events
from textual.geometry import Size
from textual.widgets import DataTable as TextualDataTable

from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets import textual_patches
from s3gym_tui.widgets.scrollbars import QuietScrollBar

CELL_CHARS = 400  # a cell shows at most this much of a text (stored whole)


def gated(cell):
    """A cell as the table may show it: text (plain or styled) through the gate, anything else as is.
    A string becomes plain text (DataTable would read it as markup), as a string cell is drawn."""
    if isinstance(cell, str):
        text = safe_text(cell, one_line=True, max_chars=CELL_CHARS)
        text.end = ""
        return text
    if isinstance(cell, Text):
        return safe_text(cell, one_line=True, max_chars=CELL_CHARS)
    return cell


class DataTable(TextualDataTable):
    SCROLLBAR_CLASS = QuietScrollBar

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._drawn_size: Optional[Size] = None  # the outer size last drawn at

    def add_column(self, label=None, *args, **kwargs):
        return super().add_column(gated(label) if label is not None else label, *args, **kwargs)

    def add_row(self, *cells, **kwargs):
        return super().add_row(*(gated(cell) for cell in cells), **kwargs)

    def update_cell(self, row_key, column_key, value, *args, **kwargs):
        return super().update_cell(row_key, column_key, gated(value), *args, **kwargs)

    def update_cell_at(self, coordinate, value, *args, **kwargs):
        return super().update_cell_at(coordinate, gated(value), *args, **kwargs)

    def render_lines(self, crop):
        self._drawn_size = self.outer_size  # a Resize event carries the outer size
        return super().render_lines(crop)

    def on_resize(self, event: events.Resize) -> None:
        # Textual calls the handlers of every class in the MRO, this class's first: preventing the
        # default skips DataTable's own Resize handler, which drops the caches.
        if event.size == self._drawn_size:
            event.prevent_default()

    def laid_out(self, previous: Size) -> None:
        """A layout placed the table (textual_patches): on its first size, or with rows added since,
        measure them and scroll to the cursor before that layout's frame."""
        if self.is_mounted and self.outer_size.area and (not previous.area or textual_patches.rows_pending(self)):
            textual_patches.measure_new_rows(self)  # what the idle handler would do, before the frame
            textual_patches.scroll_cursor_into_view(self)
