"""sqlite_utils imported without pandas and numpy (the store's first import of it).

sqlite_utils imports both whenever they are installed (the training extra brings them) only to add
their scalar types to the column types it infers from Python values. The store declares its tables
and never infers a column from a pandas or numpy value, and the two imports were ~1 s of every start
of the app and of each CLI command on a 2-core machine (benchmarks/ui_start.py). Hidden for that one
import only: anything that imports pandas or numpy later gets them as usual."""

from __future__ import annotations

import sys

HIDDEN = ("pandas", "numpy")


def import_sqlite_utils() -> None:
    if "sqlite_utils.db" in sys.modules:
        return
    hidden = [name for name in HIDDEN if name not in sys.modules]
    for name in hidden:
        sys.modules[name] = None  # type: ignore[assignment]  # an import of it raises ImportError
    try:
        import sqlite_utils  # noqa: F401
    finally:
        for name in hidden:
            if sys.modules.get(name, False) is None:
                del sys.modules[name]
