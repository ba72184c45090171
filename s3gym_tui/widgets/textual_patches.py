"""Every use of Textual's private internals in the app: patches applied once at start, for Textual 8.2.8 only.

Each one says what it is for and what upstream says (the issue or PR, or that none was found). The
public API cannot do any of them in 8.2.8: what it could do went back to it (the DataTable's Resize
handler that keeps its caches, the runs table's click, the spinner's mount: public handlers that
prevent the default; a screen's size classes and fitting when it is back on top: the app's
screen_change_signal and the screens' own ScreenResume handlers).

On another Textual `apply()` refuses with one line (UnsupportedTextual, a ConfigError: the CLI prints
it without a traceback) instead of running unpatched: the widgets below do their layout work (wrap
the text to the width, fit the table's columns, measure the rows) in the `laid_out` hook only the
patch calls, so without it they would draw nothing, and the names patched must be checked against
the new version first (tests/ui/test_textual_patches.py lists what to check). pyproject pins
Textual exactly, so only a deliberate upgrade meets the refusal.

The patches:
1. Screen._screen_resized: a Resize to the size the screen was just laid out at, with no layout
   request pending, is skipped. A screen's first layout sends the screen a Resize, and Textual lays
   the whole screen (and the one below) out again for it and draws an identical frame (~25 ms of a
   Compare opening). Upstream: none found.
2. Screen._refresh_layout / _compositor_refresh: the layout requests a layout's own sizes cause (a
   scrollbar that appears, a height that follows the width) are taken before the frame is drawn,
   at most SETTLE_PASSES more passes; Textual draws first and lays out again a frame later (the bar
   came one frame late, with a second full render, ~30 ms of a Compare opening). Upstream: none
   found for this case (Textualize/textual#4315 fixed bars flickering between two states, not this).
3. App.push_screen's AwaitMount (without_mount_relayout): the awaiter's scheduled whole-screen
   layout after mounting is dropped; a pushed screen's children are all mounted before its first
   layout, so that layout only redraws the same frame. Upstream: none found.
4. StylesCache.get_inner_outer (release_closed_screens): an lru_cache on a method keeps the render
   caches of removed widgets alive (~700 strips per Play screen opened). Upstream:
   Textualize/textual#6665 (open).
5. Widget._size_updated / ScrollView._size_updated: a widget with a `laid_out(previous)` method gets
   it called as a layout places it, before that layout's frame (Textual's Resize event comes after
   the frame: a view wrapped or a table fitted there showed a wrong first frame, then the right
   one). Upstream: none found (no public "placed by this layout" hook).
6. DataTable rows measured now (measure_new_rows, scroll_cursor_into_view): DataTable measures added
   rows on idle and scrolls to the cursor after the next refresh, so a screen opened on a table's
   last row showed its first rows, then jumped. Upstream: Textualize/textual#3544 (closed), the fix
   Textualize/textual#3552 (open, not merged).
7. DataTable._update_dimensions: a change of the column widths invalidates the rows cached at the
   old widths (DataTable does not; its Resize handler used to hide it). Upstream:
   Textualize/textual#3533 (open).
8. Widget.vertical_scrollbar / horizontal_scrollbar: a widget's `SCROLLBAR_CLASS` makes its bars
   (the app's QuietScrollBar repaints only when its cells change, ~3 ms of a step). Textual builds
   a ScrollBar there with no way to choose the class. Upstream: none found.
9. Widget._scroll_update (update_scrollbars): a scroll view whose virtual size changed without a
   layout updates its bars, as Textual's own virtual-size watcher does after a whole layout (a
   view that grows by a line costs a repaint, not a layout). Upstream: none found.
10. DOMNode._bindings and App._keymap (own_bindings, app_keymap): a node's own bindings after the
   keymap; the public active_bindings leave out the keys a focused text field takes, which the key
   hints and the command palette still offer. Upstream: none found.
"""

from __future__ import annotations

from typing import Optional

from s3gym_tui.config import ConfigError

SUPPORTED_TEXTUAL = "8.2.8"  # the exact pin in pyproject.toml
SETTLE_PASSES = 2  # a bar that appears can make another appear (the other axis): two passes settle it

# What the patches rely on: "module:Class.name" -> its signature in 8.2.8 (None: an attribute).
# tests/ui/test_textual_patches.py fails when one moves, goes, or changes its signature.
PRIVATE_NAMES: dict[str, Optional[str]] = {
    "textual.screen:Screen._screen_resized": "(self, size: 'Size') -> 'None'",
    "textual.screen:Screen._refresh_layout": "(self, size: 'Size | None' = None, scroll: 'bool' = False) -> 'None'",
    "textual.screen:Screen._compositor_refresh": "(self) -> 'None'",
    "textual.screen:Screen._compositor": None,
    "textual.screen:Screen._layout_widgets": None,
    "textual.widget:Widget._size_updated":
        "(self, size: 'Size', virtual_size: 'Size', container_size: 'Size', layout: 'bool' = True) -> 'bool'",
    "textual.scroll_view:ScrollView._size_updated":
        "(self, size: 'Size', virtual_size: 'Size', container_size: 'Size', layout: 'bool' = True) -> 'bool'",
    "textual.widget:Widget.vertical_scrollbar": "(self) -> 'ScrollBar'",  # a property, re-implemented
    "textual.widget:Widget.horizontal_scrollbar": "(self) -> 'ScrollBar'",
    "textual.widget:Widget._scroll_update": "(self, virtual_size: 'Size') -> 'None'",
    "textual.widget:Widget._clear_arrangement_cache": "(self) -> 'None'",
    "textual.widget:Widget._layout_required": None,
    "textual.widget:Widget._layout_updates": None,
    "textual.widget:Widget._mounted_event": None,
    "textual.widget:Widget._size": None,
    "textual.widget:Widget._vertical_scrollbar": None,
    "textual.widget:Widget._horizontal_scrollbar": None,
    "textual.widget:Widget._bindings": None,
    "textual.widget:AwaitMount._parent": None,
    "textual.widget:AwaitMount._widgets": None,
    "textual.app:App._start_widget": "(self, parent: 'Widget', widget: 'Widget') -> 'None'",
    "textual.app:App._keymap": None,
    "textual._styles_cache:StylesCache.get_inner_outer":
        "(cls, base_background: 'Color', background: 'Color') -> 'tuple[Style, Style]'",
    "textual.widgets._data_table:DataTable._update_dimensions": "(self, new_rows: 'Iterable[RowKey]') -> 'None'",
    "textual.widgets._data_table:DataTable._scroll_cursor_into_view": "(self, animate: 'bool' = False) -> 'None'",
    "textual.widgets._data_table:DataTable._require_update_dimensions": None,
    "textual.widgets._data_table:DataTable._new_rows": None,
    "textual.widgets._data_table:DataTable._update_count": None,
}

_applied = False
_originals: dict[str, object] = {}  # "module:Class.name" -> what the patch replaced


class UnsupportedTextual(ConfigError):
    """The installed Textual is not the one the patches were checked against (one line)."""


def textual_version() -> str:
    from importlib.metadata import version

    return version("textual")


def apply() -> None:
    """Apply the patches (once per process); refuse another Textual than SUPPORTED_TEXTUAL."""
    global _applied
    if _applied:
        return
    found = textual_version()
    if found != SUPPORTED_TEXTUAL:
        raise UnsupportedTextual(
            f"s3gym needs Textual {SUPPORTED_TEXTUAL} (found {found}): its patches "
            f"(s3gym_tui/widgets/textual_patches.py) are checked against that version only; "
            f"install it with: pip install textual=={SUPPORTED_TEXTUAL}")
    from textual.scroll_view import ScrollView
    from textual.screen import Screen
    from textual.widget import Widget
    from textual.widgets import DataTable

    _patch(Screen, "_screen_resized", _skip_same_size_resize)
    _patch(Screen, "_refresh_layout", _settling_layout)
    _patch(Screen, "_compositor_refresh", _settled_frame)
    _patch(Widget, "_size_updated", _with_laid_out)
    _patch(ScrollView, "_size_updated", _with_laid_out)
    _patch(DataTable, "_update_dimensions", _invalidating_width_change)
    _patch(Widget, "vertical_scrollbar", lambda _: property(_vertical_scrollbar))
    _patch(Widget, "horizontal_scrollbar", lambda _: property(_horizontal_scrollbar))
    _applied = True


def _patch(owner: type, name: str, make) -> None:
    original = owner.__dict__[name]  # defined on this very class (KeyError: it moved)
    _originals[f"{owner.__module__}:{owner.__name__}.{name}"] = original
    setattr(owner, name, make(original))


def replaced(name: str):
    """What a patch replaced ("module:Class.name"), or the name as Textual has it if not patched."""
    if name in _originals:
        return _originals[name]
    import importlib

    module, path = name.split(":")
    owner_name, attribute = path.split(".")
    return getattr(getattr(importlib.import_module(module), owner_name), attribute)


# ----- 1, 2: screens -----------------------------------------------------------------------
def _skip_same_size_resize(original):
    def _screen_resized(self, size) -> None:
        if size == self._compositor.size and not (self._layout_required or self._layout_widgets):
            return
        original(self, size)

    return _screen_resized


def _settling_layout(original):
    def _refresh_layout(self, size=None, scroll: bool = False) -> None:
        if self.__dict__.get("_settle_passes") is not None:  # a settling pass of the layout under way
            original(self, size, scroll)
            return
        scroll_only = scroll and not self._layout_widgets  # Textual then only reflows what a scroll showed
        self._settle_passes = 0 if scroll_only else SETTLE_PASSES
        self._settle_size = size
        try:
            original(self, size, scroll)
        finally:
            self._settle_passes = None

    return _refresh_layout


def _settled_frame(original):
    def _compositor_refresh(self) -> None:
        if self.__dict__.get("_settle_passes"):
            pending = [widget for widget in self._compositor.widgets if widget._layout_required]
            if pending:
                self._settle_passes -= 1
                for widget in pending:
                    _take_layout_request(widget)
                self._refresh_layout(self._settle_size)
                return
        original(self)

    return _compositor_refresh


def _take_layout_request(widget) -> None:
    """Do now what a widget's idle handler does with its layout request (clear the request, and make
    the arrangements it can change be computed again), without posting the Layout message that would
    lay the screen out once more after this frame."""
    from textual.widget import Widget

    widget._layout_required = False
    for ancestor in widget.ancestors:
        if not isinstance(ancestor, Widget):
            break
        ancestor._clear_arrangement_cache()
        ancestor._layout_updates += 1
        if not ancestor.styles.auto_dimensions:
            break


# ----- 3, 4: the app's screen stack --------------------------------------------------------------
def without_mount_relayout(await_mount, screen) -> object:
    """`App.push_screen`'s awaitable, without the whole layout its scheduled task asks for once the
    screen has mounted: the widgets are taken out of it (the task then does nothing), and the object
    returned still waits for them to mount."""
    from textual.widget import AwaitMount

    if not isinstance(await_mount, AwaitMount) or getattr(await_mount, "_parent", None) is not screen:
        return await_mount
    widgets, await_mount._widgets = list(await_mount._widgets), []
    return _Mounted(widgets)


class _Mounted:
    def __init__(self, widgets) -> None:
        self._widgets = widgets

    def __await__(self):
        import asyncio

        async def mounted() -> None:
            await asyncio.gather(*(widget._mounted_event.wait() for widget in self._widgets))

        return mounted().__await__()


def release_closed_screens() -> None:
    """Drop what Textual keeps of widgets that are gone (StylesCache.get_inner_outer's lru_cache:
    1,024 keys holding StylesCache objects with their widgets' rendered lines), then collect.
    Clearing it costs the recomputation of two Style objects per widget the next time each draws."""
    import gc

    from textual._styles_cache import StylesCache

    clear = getattr(StylesCache.get_inner_outer, "cache_clear", None)
    if clear is not None:
        clear()
    gc.collect()


# ----- 5: the laid_out hook ------------------------------------------------------------------------
def _with_laid_out(original):
    def _size_updated(self, size, virtual_size, container_size, layout: bool = True) -> bool:
        laid_out = getattr(type(self), "laid_out", None)
        if laid_out is None:
            return original(self, size, virtual_size, container_size, layout)
        previous = self._size
        resized = original(self, size, virtual_size, container_size, layout)
        laid_out(self, previous)
        return resized

    return _size_updated


# ----- 6, 7: DataTable -----------------------------------------------------------------------------
def measure_new_rows(table) -> bool:
    """Measure the rows added since the last measure now, as DataTable's idle handler would later
    (column widths, row heights, the virtual size). True when there were any."""
    if not table._require_update_dimensions:
        return False
    table._require_update_dimensions = False
    new_rows = table._new_rows.copy()
    table._new_rows.clear()
    table._update_dimensions(new_rows)
    return True


def rows_pending(table) -> bool:
    """Rows were added that DataTable has not measured yet."""
    return bool(table._require_update_dimensions)


def scroll_cursor_into_view(table) -> None:
    """Scroll the table to its cursor now (move_cursor would post a highlight message)."""
    table._scroll_cursor_into_view()


def _invalidating_width_change(original):
    def _update_dimensions(self, new_rows) -> None:
        widths = [column.content_width for column in self.ordered_columns]
        original(self, new_rows)
        if [column.content_width for column in self.ordered_columns] != widths:
            self._update_count += 1  # rows cached at the old widths are drawn again
            self.refresh()

    return _update_dimensions


# ----- 8, 9: scrollbars ----------------------------------------------------------------------------
def _vertical_scrollbar(widget):
    """The vertical scrollbar (created as the widget's SCROLLBAR_CLASS if it has none yet)."""
    bar = widget._vertical_scrollbar
    return bar if bar is not None else _new_scrollbar(widget, vertical=True)


def _horizontal_scrollbar(widget):
    """The horizontal scrollbar (created as the widget's SCROLLBAR_CLASS if it has none yet)."""
    bar = widget._horizontal_scrollbar
    return bar if bar is not None else _new_scrollbar(widget, vertical=False)


def _new_scrollbar(widget, vertical: bool):
    from textual.scrollbar import ScrollBar

    bar_class = getattr(type(widget), "SCROLLBAR_CLASS", None) or ScrollBar
    thickness = widget.scrollbar_size_vertical if vertical else widget.scrollbar_size_horizontal
    bar = bar_class(vertical=vertical, name="vertical" if vertical else "horizontal", thickness=thickness)
    bar.display = False  # shown when the widget's content overflows
    if vertical:
        widget._vertical_scrollbar = bar
    else:
        widget._horizontal_scrollbar = bar
    widget.app._start_widget(widget, bar)
    return bar


def update_scrollbars(view, virtual_size) -> None:
    """Give a scroll view's bars its new virtual size (set without a layout)."""
    view._scroll_update(virtual_size)


# ----- 10: bindings --------------------------------------------------------------------------------
def own_bindings(node):
    """A node's own BindingsMap (after the keymap), focused text field or not: read it, or copy it."""
    return node._bindings


def app_keymap(app) -> dict:
    """The keymap set on the app (set_keymap), or {}."""
    return getattr(app, "_keymap", None) or {}
