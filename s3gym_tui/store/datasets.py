"""The datasets repository: training sets and their rows, exploration steps only (tables datasets,
dataset_rows)."""

from __future__ import annotations

import json
import sqlite3
from typing import Any, Iterable, Mapping, Optional

from pydantic import ValidationError

from s3gym_tui.store.connection import _new_id
from s3gym_tui.store.errors import StoreError, one_line
from s3gym_tui.store.records import ROW_KINDS, Dataset, DatasetRow
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.rows import from_row, one_row


class Datasets(Repository):
    """Training datasets. Reads and writes `datasets`, `dataset_rows`; reads `runs`, `episodes` and
    `steps` (every row must be a stored exploration step)."""

    # ------------------------------------------------------------------ training datasets

    def add_dataset(self, run_id: Optional[str], rule: Mapping[str, Any],
                    rows: Iterable[DatasetRow | Mapping[str, Any]], *,
                    dataset_id: Optional[str] = None) -> Dataset:
        """Store a training set and its rows; every row must be an existing exploration step."""
        try:
            items = [r if isinstance(r, DatasetRow) else DatasetRow.model_validate(r) for r in rows]
        except ValidationError as err:
            raise StoreError(f"invalid dataset row: {err.errors()[0].get('msg')}") from err
        counts = {kind: sum(1 for r in items if r.kind == kind) for kind in ROW_KINDS}
        dataset = Dataset(id=dataset_id or _new_id("ds"), run_id=run_id, rule=dict(rule),
                          counts=counts)
        with self._db._tx("add a dataset") as conn:
            if run_id is not None and not conn.execute("SELECT 1 FROM runs WHERE id = ?",
                                                       (run_id,)).fetchone():
                raise StoreError(f"no run {run_id!r}")
            self._db._require_experience(conn, [r.episode_id for r in items], "training row",
                                     f"dataset {dataset.id!r}")
            pairs = json.dumps([[r.episode_id, r.step_index] for r in items])
            missing = conn.execute(
                "SELECT json_extract(j.value, '$[0]'), json_extract(j.value, '$[1]') "
                "FROM json_each(?) AS j WHERE NOT EXISTS (SELECT 1 FROM steps s WHERE "
                "s.episode_id = json_extract(j.value, '$[0]') AND "
                "s.\"index\" = json_extract(j.value, '$[1]')) LIMIT 1", (pairs,)).fetchone()
            if missing:
                raise StoreError(f"dataset {dataset.id!r}: no step {missing[1]} in episode "
                                 f"{missing[0]!r}")
            try:
                conn.execute("INSERT INTO datasets (id, run_id, rule, created_at, counts) "
                             "VALUES (?, ?, ?, ?, ?)", (dataset.id, run_id, json.dumps(dataset.rule),
                                                        dataset.created_at, json.dumps(counts)))
                self._db.db["dataset_rows"].insert_all(
                    ({"dataset_id": dataset.id, "episode_id": r.episode_id,
                      "step_index": r.step_index, "kind": r.kind,
                      "messages": json.dumps(list(r.messages)), "reason": r.reason,
                      "tokens": r.tokens} for r in items),
                    batch_size=500)
            except sqlite3.IntegrityError as err:
                raise StoreError(f"dataset {dataset.id!r}: {one_line(err)} (duplicate id or "
                                 f"row)") from err
        return dataset

    def get_dataset(self, dataset_id: str) -> Dataset:
        with self._db._reading("read a dataset") as conn:
            row = one_row(conn, "SELECT * FROM datasets WHERE id = ?", (dataset_id,))
        if row is None:
            raise StoreError(f"no dataset {dataset_id!r}")
        return from_row(Dataset, row, f"dataset {dataset_id!r}", {"rule": None, "counts": None})

    def list(self, run_id: Optional[str] = None) -> list[Dataset]:
        with self._db._reading("list datasets") as conn:
            ids = [r[0] for r in conn.execute(
                "SELECT id FROM datasets" + (" WHERE run_id = ?" if run_id else "") +
                " ORDER BY created_at, rowid", (run_id,) if run_id else ()).fetchall()]
        return [self.get_dataset(i) for i in ids]

    def dataset_rows(self, dataset_id: str, kind: Optional[str] = None) -> list[DatasetRow]:
        sql = ("SELECT episode_id, step_index, kind, messages, reason, tokens FROM dataset_rows "
               "WHERE dataset_id = ?")
        params: list[Any] = [dataset_id]
        if kind is not None:
            sql += " AND kind = ?"
            params.append(kind)
        with self._db._reading("read dataset rows") as conn:
            rows = conn.execute(sql + " ORDER BY rowid", params).fetchall()
        return [from_row(DatasetRow, dict(zip(("episode_id", "step_index", "kind", "messages", "reason", "tokens"), r)),
                         f"row of dataset {dataset_id!r}", {"messages": None}) for r in rows]
