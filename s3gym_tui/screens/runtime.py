"""Process-level tuning for a long-lived Textual app: garbage collection that does not stall frames, no
render caches of closed screens kept alive, and no layout passes that only redraw the same frame."""

from __future__ import annotations

import gc
from typing import Optional

GEN0_THRESHOLD = 20_000  # objects allocated between young collections (CPython's default: 700)


def tune_gc() -> None:
    """Freeze what exists once the app is up (imports, stylesheets, the first screen) and collect the
    young generation less often. A Textual screen allocates tens of thousands of objects when it
    opens; with the defaults that triggered full collections over the whole heap, 30-80 ms each,
    on most screen opens (measured with benchmarks/ui_step.py). Cycles are still collected."""
    gc.collect()
    gc.freeze()
    _, gen1, gen2 = gc.get_threshold()
    gc.set_threshold(GEN0_THRESHOLD, max(gen1, 20), max(gen2, 100))


def release_closed_screens() -> None:
    """Drop what Textual itself keeps of widgets that are gone. `StylesCache.get_inner_outer` is an
    `lru_cache` on a method (Textualize/textual#6665, open): its 1,024 keys hold StylesCache objects,
    each with the rendered lines of its widget, long after the widget is removed (~700 strips per
    Play screen opened, which every garbage collection then walked). Clearing it only costs the
    recomputation of two Style objects per widget the next time each draws."""
    from textual._styles_cache import StylesCache

    clear = getattr(StylesCache.get_inner_outer, "cache_clear", None)
    if clear is not None:  # a Textual that fixed it has no cache here to clear
        clear()
    gc.collect()


class SteadyLayout:
    """Mixed into every screen of the app (before Textual's Screen). A screen's first layout sends the
    screen itself a Resize, and Textual's handler lays the whole screen out again and renders it at
    the size it was just laid out at. When no layout request is pending that pass redraws an
    identical frame (~25 ms of a Compare opening), and it is skipped here. When one is pending (a
    scrollbar the first pass made appear) it runs at once, as in Textual: skipping it then left the
    work to the update timer, a frame later (measured: openings 10-15 ms slower at the median)."""

    _settle_passes: Optional[int] = None  # set while a layout runs: extra passes it may still make
    _settle_size = None

    def on_screen_resume(self) -> None:
        """Back on top: the size classes of the terminal as it is now (it may have been resized while
        this screen was below others), and the screen's own fitting (`fit_to_size`, if it has one).
        Textual calls this besides a subclass's own handler (handlers run for each class of the MRO)."""
        from s3gym_tui.screens.sizing import refit

        refit(self)
        fit = getattr(self, "fit_to_size", None)
        if fit is not None and self.is_mounted:
            fit()

    def _screen_resized(self, size) -> None:
        if size == self._compositor.size and not (self._layout_required or self._layout_widgets):
            return
        super()._screen_resized(size)

    # A layout gives each widget its size after the whole screen has been arranged. A widget whose
    # scrollbar that size makes appear (or whose content height depends on its width) only asks for
    # another layout then, and Textual draws the frame first: the bar came one frame late, with a
    # second full render (~30 ms of a Compare opening). Here such requests are taken at once, and the
    # screen is arranged again before the frame is drawn, at most SETTLE_PASSES more times.
    def _refresh_layout(self, size=None, scroll: bool = False) -> None:
        if self._settle_passes is not None:  # a settling pass of the layout under way
            super()._refresh_layout(size, scroll)
            return
        scroll_only = scroll and not self._layout_widgets  # Textual then only reflows what a scroll showed
        self._settle_passes = 0 if scroll_only else SETTLE_PASSES
        self._settle_size = size
        try:
            super()._refresh_layout(size, scroll)
        finally:
            self._settle_passes = None

    def _compositor_refresh(self) -> None:
        if self._settle_passes:
            pending = [widget for widget in self._compositor.widgets if widget._layout_required]
            if pending:
                self._settle_passes -= 1
                for widget in pending:
                    take_layout_request(widget)
                self._refresh_layout(self._settle_size)
                return
        super()._compositor_refresh()


SETTLE_PASSES = 2  # a bar that appears can make another appear (the other axis): two passes settle it


def take_layout_request(widget) -> None:
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


def without_mount_relayout(await_mount, screen) -> object:
    """`App.push_screen` schedules a task that waits for the new screen to mount and then asks for a
    whole layout of it. A pushed screen's children are all mounted before its first layout (compose
    mounts them and the layout comes on ScreenResume, after Mount), so that second layout only
    redraws the same frame. This takes the widgets out of Textual's awaitable (its scheduled task then
    does nothing) and returns one that still waits for them to mount."""
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
