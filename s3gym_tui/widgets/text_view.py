"""Read-only scrolling text that draws only the lines on screen and repaints only the lines that change."""

from __future__ import annotations

from typing import Optional

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip


def _line_key(line: Text, width: int) -> tuple:
    return (line.plain, tuple((span.start, span.end, str(span.style)) for span in line.spans),
            str(line.style), width)


class TextView(ScrollView, can_focus=True):
    """Shows one rich Text, wrapped to the width. Prompts can be ~100k tokens: wrapping is cached per
    logical line (consecutive prompts share most of their lines, so a new step re-wraps only what
    changed), and `show` repaints only the screen lines whose content differs from what is drawn, so
    a new step whose prompt starts like the last one costs almost nothing to draw. Updating it never
    changes the layout around it."""

    DEFAULT_CSS = """
    TextView { overflow-x: hidden; overflow-y: auto; }
    """

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._text: Optional[Text] = None
        self._wrapped: dict = {}  # line key -> strips
        self._wrapped_width = 0
        self._strips: list[Strip] = []
        self._keys: list[tuple] = []  # per screen line: (logical line key, part) to diff repaints

    @property
    def text(self) -> Optional[Text]:
        return self._text

    @property
    def line_count(self) -> int:
        return len(self._strips)

    def show(self, text: Text, keep_scroll: bool = False) -> None:
        """Replace the text (scrolled to the top unless keep_scroll)."""
        self._text = text
        self._rewrap(keep_scroll=keep_scroll)

    def on_resize(self) -> None:
        if self.scrollable_content_region.width != self._wrapped_width:
            self._rewrap(keep_scroll=True, repaint_all=True)

    def _rewrap(self, keep_scroll: bool = False, repaint_all: bool = False) -> None:
        width = self.scrollable_content_region.width
        if width <= 0 or not self.is_mounted:
            return
        text = self._text or Text()
        console = self.app.console
        options = console.options.update_width(width)
        previous, cache = self._wrapped, {}
        strips: list[Strip] = []
        keys: list[tuple] = []
        for line in text.split("\n", allow_blank=True):
            key = _line_key(line, width)
            parts = cache.get(key) or previous.get(key)
            if parts is None:
                parts = Strip.from_lines(list(Segment.split_lines(console.render(line, options)))) or \
                    [Strip.blank(0)]
            cache[key] = parts
            strips.extend(parts)
            keys.extend((key, n) for n in range(len(parts)))
        old_keys, old_top = self._keys, int(self.scroll_offset.y)
        self._wrapped, self._wrapped_width = cache, width
        self._strips, self._keys = strips, keys
        self._set_virtual(Size(max((s.cell_length for s in strips), default=0), len(strips)))
        top = old_top if keep_scroll else 0
        if top != old_top:
            self.scroll_to(y=top, animate=False)  # scrolling repaints the whole view anyway
            return
        if repaint_all:
            self.refresh()
            return
        height = self.scrollable_content_region.height
        for y in range(height):  # repaint only the screen lines that differ
            i = top + y
            new = keys[i] if i < len(keys) else None
            old = old_keys[i] if i < len(old_keys) else None
            if new != old:
                self.refresh(Region(0, y, self.size.width, 1))

    def _set_virtual(self, size: Size) -> None:
        height = self.scrollable_content_region.height
        if size == self.virtual_size:
            return
        if (size.height > height) == (self.virtual_size.height > height):
            self.set_reactive(ScrollView.virtual_size, size)  # same scrollbars: no layout needed
            self._scroll_update(size)
        else:
            self.virtual_size = size

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        i = int(self.scroll_offset.y) + y
        if i >= len(self._strips):
            return Strip.blank(width, self.rich_style)
        style = self.rich_style
        return self._strips[i].crop_extend(0, width, style).apply_style(style)
