"""Read-only scrolling views that draw only the lines on screen and repaint only the lines that change."""

from __future__ import annotations

from typing import Any, Literal, Optional, Sequence

from rich.segment import Segment
from rich.text import Text
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.strip import Strip

from s3gym_tui.textgate import safe, safe_text
from s3gym_tui.widgets import textual_patches
from s3gym_tui.widgets.scrollbars import QuietScrollBar


def set_virtual_size(view: ScrollView, size: Size) -> None:
    """Set a scroll view's virtual size, with a layout only when a scrollbar appears or goes (an
    `overflow: scroll` bar never does): a view that grows by a line costs a repaint, not a layout."""
    if size == view.virtual_size:
        return
    if size.height == view.virtual_size.height and view.styles.overflow_x == "hidden" and view.is_mounted:
        view.set_reactive(ScrollView.virtual_size, size)  # only the width: no bar can change
        return
    height = view.scrollable_content_region.height
    same_bars = view.styles.overflow_y != "auto" or (size.height > height) == (view.virtual_size.height > height)
    if same_bars and view.is_mounted:
        view.set_reactive(ScrollView.virtual_size, size)
        textual_patches.update_scrollbars(view, size)
    else:
        view.virtual_size = size


Repaint = Literal["changed", "all", "none"]


class LinesView(ScrollView):
    """A Line API view of pre-rendered lines. `set_lines` compares each screen line's key with what
    is drawn and repaints only the lines that differ, and changes the layout only when it must (the
    number of lines changed for an auto-height view, or a scrollbar appears or goes): a new step
    whose text mostly equals the last one's costs a few lines of drawing.

    Lines that depend on the width are made in `fit_width`, which runs inside the layout that gives
    the view a new width, before that layout's frame is drawn: a screen's first frame shows them,
    and no second frame redraws them (a Resize handler would only run after the frame): the layout
    calls `laid_out` (textual_patches)."""

    SCROLLBAR_CLASS = QuietScrollBar

    DEFAULT_CSS = """
    LinesView { overflow-x: hidden; overflow-y: auto; }
    """
    AUTO_HEIGHT = False  # True: the view's height follows its line count (set in CSS: height: auto)
    _border_line: Optional[Region] = None  # set while a border text changes (see set_border)

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._strips: list[Strip] = []
        self._keys: list[Any] = []
        self._laid_width = -1
        self._borders: dict[str, str] = {}  # the border texts set (gated, plain)

    def set_border(self, title: Optional[str] = None, subtitle: Optional[str] = None) -> None:
        """Change the border's title and subtitle (None: keep it), plain text through the gate (no
        markup). Textual repaints the whole widget when either is set, even to the same text; here only
        the border line that changed is (a board whose subtitle counts the steps repainted all its lines
        every step: ~5 ms of a step's frame)."""
        offset, outer = self.content_offset, self.outer_size
        for attribute, value, line in (("border_title", title, 0), ("border_subtitle", subtitle, outer.height - 1)):
            if value is None:
                continue
            value = safe(value, one_line=True, max_chars=500)
            if value == self._borders.get(attribute, ""):
                continue
            self._borders[attribute] = value
            value = Text(value)  # a Text: Textual reads a string as markup
            if outer.area:  # the border line, in the content coordinates refresh() takes
                self._border_line = Region(-offset.x, line - offset.y, outer.width, 1)
            try:
                setattr(self, attribute, value)
            finally:
                self._border_line = None

    def refresh(self, *regions: Region, repaint: bool = True, layout: bool = False, recompose: bool = False):
        if self._border_line is not None and not regions:
            regions = (self._border_line,)
        return super().refresh(*regions, repaint=repaint, layout=layout, recompose=recompose)

    def fit_width(self, width: int, repaint: Repaint) -> None:
        """Make the lines for a new content width (subclasses whose lines depend on it)."""

    def laid_out(self, previous: Size) -> None:
        # Called as a layout places the view (textual_patches), and Textual draws the frame right after.
        redrawn = self.outer_size != previous  # a new size: Textual repaints the whole view in this frame
        width = self.scrollable_content_region.width
        if width != self._laid_width and width > 0 and self.is_mounted:
            self._laid_width = width
            self.fit_width(width, "none" if redrawn else "all")

    @property
    def line_count(self) -> int:
        return len(self._strips)

    def measure_lines(self, width: int) -> int:
        """How many lines the view has at content width `width` (subclasses whose lines depend on it),
        without changing what it shows."""
        return len(self._strips)

    def get_content_height(self, container: Size, viewport: Size, width: int) -> int:
        if not self.AUTO_HEIGHT:
            return super().get_content_height(container, viewport, width)
        # A view that could not draw yet (it did not know its width) answers the layout with its line
        # count at the width asked, so the first layout gives it the right height. One that has lines
        # answers with them: they were drawn at the width its screen said it would get, and a grid
        # also asks a column-spanning view at one column's width.
        inner = width - (self.styles.scrollbar_size_vertical if self.show_vertical_scrollbar else 0)
        if not self._strips and inner > 0 and self.is_mounted:
            return self.measure_lines(inner)
        return len(self._strips)

    def set_lines(self, strips: Sequence[Strip], keys: Sequence[Any], keep_scroll: bool = False,
                  repaint: Repaint = "changed") -> None:
        """Show `strips` (`keys[i]` identifies line i's look). `repaint`: the screen lines whose key
        changed, all of them, or none (the view is redrawn anyway: the layout resized it)."""
        old_keys, old_top = self._keys, int(self.scroll_offset.y)
        count_changed = len(strips) != len(self._strips)
        self._strips, self._keys = list(strips), list(keys)
        size = Size(max((s.cell_length for s in self._strips), default=0), len(self._strips))
        if self.AUTO_HEIGHT and count_changed:
            if repaint == "none" and size.height == self.scrollable_content_region.height:
                self.set_reactive(ScrollView.virtual_size, size)  # the layout placed it at this height
            else:
                self.virtual_size = size
                self.refresh(layout=True)
            return
        self._set_virtual(size)
        top = old_top if keep_scroll else 0
        if top != old_top:
            self.scroll_to(y=top, animate=False)  # scrolling repaints the whole view anyway
            return
        if repaint != "changed":
            if repaint == "all":
                self.refresh()
            return
        width = self.size.width
        for y in range(self.scrollable_content_region.height):
            i = top + y
            new = keys[i] if i < len(keys) else None
            old = old_keys[i] if i < len(old_keys) else None
            if new != old:
                self.refresh(Region(0, y, width, 1))

    def _set_virtual(self, size: Size) -> None:
        set_virtual_size(self, size)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        style = self.rich_style
        i = int(self.scroll_offset.y) + y
        if i >= len(self._strips):
            return Strip.blank(width, style)
        return self._strips[i].crop_extend(0, width, style).apply_style(style)


def _line_key(line: Text, width: int) -> tuple:
    return (line.plain, tuple(line.spans), line.style, width)  # spans and styles are hashable values


class TextView(LinesView, can_focus=True):
    """Shows a list of rich Text lines (or one Text), wrapped to the width. Prompts can be ~100k
    tokens: wrapping is cached per logical line (consecutive prompts share most of their lines, so a
    new step re-wraps only what changed), and only the screen lines that differ are repainted."""

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._lines: list[Text] = []
        self._wrapped: dict = {}  # line key -> strips
        self._wrapped_width = 0

    @property
    def text(self) -> Text:
        return Text("\n").join(self._lines)

    def show(self, text: Text | Sequence[Text], keep_scroll: bool = False) -> None:
        """Replace the text (scrolled to the top unless keep_scroll)."""
        self._lines = text.split("\n", allow_blank=True) if isinstance(text, Text) else list(text)
        self._rewrap(keep_scroll=keep_scroll)

    def fit_width(self, width: int, repaint: Repaint) -> None:
        if width != self._wrapped_width:
            self._rewrap(keep_scroll=True, repaint=repaint)

    def _rewrap(self, keep_scroll: bool = False, repaint: Repaint = "changed") -> None:
        width = self.scrollable_content_region.width
        if width <= 0 or not self.is_mounted:
            return
        console = self.app.console
        options = console.options.update_width(width)
        previous, cache = self._wrapped, {}
        strips: list[Strip] = []
        keys: list[tuple] = []
        for line in self._lines:
            key = _line_key(line, width)
            parts = cache.get(key) or previous.get(key)
            if parts is None:
                line = safe_text(line, max_chars=None)  # what a model or the store wrote, made harmless
                if line.cell_len <= width and "\t" not in line.plain:  # fits: no wrapping needed
                    parts = [Strip(list(line.render(console)))]
                else:
                    parts = Strip.from_lines(list(Segment.split_lines(console.render(line, options)))) or \
                        [Strip.blank(0)]
            cache[key] = parts
            strips.extend(parts)
            keys.extend((key, n) for n in range(len(parts)))
        self._wrapped, self._wrapped_width = cache, width
        self.set_lines(strips, keys, keep_scroll=keep_scroll, repaint=repaint)
