"""Scrollbars that repaint only when what they show changes.

Textual repaints a scrollbar whenever the size or position of the view it belongs to changes, and a
repaint draws every cell of the bar through the whole style pipeline (~0.1 ms a cell). A view that
grows by a line each step (the prompt, the steps table) moved no thumb by a visible amount most of
the time, yet both bars were redrawn on every step: ~5 ms of a step's ~22 ms frame.

QuietScrollBar renders the bar it would draw (the bar's own renderable at its size, a few dozen
segments) and skips a repaint request when that equals what was last drawn. Anything that changes
the bar's look (its thumb, the hover and grab colours, a theme) changes those segments, and is drawn.
A widget has these bars with `SCROLLBAR_CLASS = QuietScrollBar` (textual_patches, patch 8).
"""

from __future__ import annotations

from typing import Optional

from rich.segment import Segment
from textual.geometry import Region
from textual.scrollbar import ScrollBar
from textual.strip import Strip


class QuietScrollBar(ScrollBar):
    _drawn: Optional[tuple] = None  # the look last drawn: (size, segments)
    _strips: list[Strip] = []

    def _look(self) -> tuple:
        size = self.size
        options = self.app.console_options.update_dimensions(size.width, size.height)
        return size, tuple(self.app.console.render(self.render(), options))

    def render_lines(self, crop: Region) -> list[Strip]:
        look = self._look()
        if look != self._drawn:
            size, segments = look
            base = self.visual_style.rich_style  # under the bar's own colours, as Textual draws it
            self._strips = [Strip(line, size.width).apply_style(base)
                            for line in Segment.split_and_crop_lines(segments, size.width, pad=True,
                                                                        include_new_lines=False)]
            self._drawn = look
        return super().render_lines(crop)

    def render_line(self, y: int) -> Strip:
        # The Line API: the bar's own lines (Textual renders the renderable again for each repaint).
        return self._strips[y] if y < len(self._strips) else Strip.blank(self.size.width)

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False):
        if (repaint and not (regions or layout or recompose) and self._drawn is not None
                and self.is_mounted and self.parent is not None and self._look() == self._drawn):
            return self  # the same cells as on screen
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)
