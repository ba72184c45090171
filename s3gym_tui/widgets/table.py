"""The app's data table: Textual's DataTable, minus a re-render of every cell on a resize that
does not change its size.

Textual's DataTable drops all its render caches on every Resize event. A newly shown screen
gets its first Resize after the first frame has been drawn at that very size, so each table was
rendered twice as it opened (a 30-row table: ~17 ms of the Summaries screen's opening). Cells do
not depend on the widget's size and the line cache is keyed by width, so a Resize to the size
already drawn can keep the caches; any other resize invalidates them as before.

That Resize also hid a stale cache: DataTable measures column widths on idle, after rows drawn
at the old widths may be cached, and does not invalidate them when the widths change. Here a
change of the column widths invalidates the caches itself."""

from __future__ import annotations

from typing import Optional

from textual import events
from textual.geometry import Size
from textual.widgets import DataTable as TextualDataTable


class DataTable(TextualDataTable):
    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self._drawn_size: Optional[Size] = None  # the outer size last drawn at

    def render_lines(self, crop):
        self._drawn_size = self.outer_size  # a Resize event carries the outer size
        return super().render_lines(crop)

    def _on_resize(self, event: events.Resize) -> None:
        # Textual calls the handler of every class in the MRO: preventing the default skips
        # DataTable's (the only other Resize handler in the chain), which drops the caches.
        if event.size == self._drawn_size:
            event.prevent_default()

    def _update_dimensions(self, new_rows) -> None:
        widths = [column.content_width for column in self.ordered_columns]
        super()._update_dimensions(new_rows)
        if [column.content_width for column in self.ordered_columns] != widths:
            self._update_count += 1  # rows cached at the old widths are drawn again
            self.refresh()
