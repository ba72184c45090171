"""Settings a database keeps about itself (the meta table beside schema_version): e.g. the demo's mark."""

from __future__ import annotations

from typing import Optional

from s3gym_tui.store.repository import Repository
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.schema import META_TABLE, VERSION_KEY


class Meta(Repository):
    """Reading and writing one meta row (table `meta`); the schema version is not one of them."""

    def meta_value(self, key: str) -> Optional[str]:
        with self._db._reading(f"read the meta row {key}") as conn:
            row = conn.execute(f"SELECT value FROM {META_TABLE} WHERE key = ?", (key,)).fetchone()
        return None if row is None else str(row[0])

    def set_meta_value(self, key: str, value: str) -> None:
        if key == VERSION_KEY:
            raise StoreError(f"{VERSION_KEY} is the store's own: migrations write it")
        with self._db._tx(f"write the meta row {key}") as conn:
            conn.execute(f"INSERT OR REPLACE INTO {META_TABLE} (key, value) VALUES (?, ?)", (key, str(value)))
