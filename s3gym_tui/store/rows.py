"""One way to read a stored row into a model: JSON columns decoded, a bad row named in one line."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Mapping, Optional, Sequence, TypeVar

from pydantic import BaseModel, ValidationError

from s3gym_tui.store.errors import StoreError, one_line

M = TypeVar("M", bound=BaseModel)


def row_dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    """Every row of the cursor as a dict of column name -> value."""
    keys = [d[0] for d in cursor.description]
    return [dict(zip(keys, row)) for row in cursor.fetchall()]


def one_row(conn: sqlite3.Connection, sql: str, params: Sequence[Any]) -> Optional[dict[str, Any]]:
    """The first row of the query as a dict, or None."""
    cursor = conn.execute(sql, params)
    row = cursor.fetchone()
    return None if row is None else dict(zip([d[0] for d in cursor.description], row))


def json_column(text: Any, what: str) -> Any:
    """A stored JSON column, or a one-line StoreError naming the row (a hand-edited file)."""
    try:
        return json.loads(text)
    except (TypeError, ValueError) as err:
        raise StoreError(f"stored {what} is not valid JSON ({one_line(err)}); fix or remove "
                         f"that row") from err


def from_row(cls: type[M], row: Mapping[str, Any], what: str,
             json_columns: Mapping[str, Optional[str]] = {}) -> M:
    """The model `cls` of a stored row; `json_columns` names the JSON text columns with the text an
    empty value stands for (None: none may be empty). A row that does not decode or validate raises
    a one-line StoreError naming `what`."""
    data = dict(row)
    for column, empty in json_columns.items():
        text = data[column] if empty is None else (data[column] or empty)
        data[column] = json_column(text, f"{what} ({column})")
    try:
        return cls.model_validate(data)
    except ValidationError as err:
        first = err.errors()[0]
        loc = ".".join(str(p) for p in first.get("loc", ()))
        raise StoreError(f"stored {what} does not validate ({loc}: {first.get('msg')})") from err
