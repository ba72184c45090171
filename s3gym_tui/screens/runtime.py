"""Process-level tuning for a long-lived Textual app: garbage collection that does not stall frames, and
no render caches of closed screens kept alive."""

from __future__ import annotations

import gc

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
