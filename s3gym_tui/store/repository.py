"""The base of every repository of the store: record methods over the store's one Connection."""

from __future__ import annotations

from s3gym_tui.store.connection import Connection


class Repository:
    """A group of record methods sharing the store's Connection: its transactions (`_tx`), reads
    (`_reading`, `snapshot`) and held-out look-ups (`_phases`, `_require_experience`)."""

    def __init__(self, db: Connection) -> None:
        self._db = db

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self._db!r})"
