"""Process-level tuning for a long-lived Textual app: garbage collection that does not stall frames (what
touches Textual's internals, the screens' layout passes and closed screens' caches included, is in
widgets/textual_patches.py)."""

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
