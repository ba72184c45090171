"""Noticing that any process changed the store: SQLite's `PRAGMA data_version` on a connection of
its own, which changes whenever another connection (of this or any process) commits. Polling it
costs a few microseconds, so a screen can follow a headless run without a key press."""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Optional


class StoreWatcher:
    """`changed()` is True once after every commit made anywhere since the previous call."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self._conn: Optional[sqlite3.Connection] = None
        self._version: Optional[int] = None

    def _connection(self) -> sqlite3.Connection:
        if self._conn is None:
            # Through SQLite only (never open() the file: see connection.py); read-only, no writes.
            self._conn = sqlite3.connect(self.path.resolve().as_uri() + "?mode=ro", uri=True,
                                         isolation_level=None, check_same_thread=True)
        return self._conn

    def changed(self) -> bool:
        try:
            version = self._connection().execute("PRAGMA data_version").fetchone()[0]
        except sqlite3.Error:
            self.close()  # e.g. the file was replaced: reconnect at the next poll
            return False
        if self._version is None:
            self._version = version
            return False
        if version != self._version:
            self._version = version
            return True
        return False

    def close(self) -> None:
        if self._conn is not None:
            try:
                self._conn.close()
            except sqlite3.Error:
                pass
            self._conn = None
