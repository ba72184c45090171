"""The runs repository: a run's config, status and note (table runs)."""

from __future__ import annotations

from typing import Any, Mapping, Optional, get_args

from pydantic import ValidationError

from s3gym_tui.models import Run, RunConfig
from s3gym_tui.secrets import redact_values, strip_url_credentials
from s3gym_tui.store.connection import _insert_sql, _new_id
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.rows import from_row, one_row, row_dicts

RUN_STATUSES: tuple[str, ...] = get_args(Run.model_fields["status"].annotation)


def run_from_row(row: Mapping[str, Any]) -> Run:
    """A stored runs row as a Run."""
    data = {"id": row["id"], "config": row["config"], "status": row["status"],
            "created_at": row["created_at"], "note": row["note"],
            "status_reason": row.get("status_reason") or "", "sweep_id": row.get("sweep_id")}
    return from_row(Run, data, f"run {row['id']!r}", {"config": None})


class Runs(Repository):
    """Runs. Reads and writes `runs`; reads `sweeps` (a run's sweep must exist)."""

    def create_run(self, config: RunConfig | Mapping[str, Any], run_id: Optional[str] = None,
                   note: str = "", sweep_id: Optional[str] = None) -> Run:
        """Record a new run (status 'created'); the id defaults to '<game>-<pathway>-<hex>'.
        `sweep_id` names the stored sweep it belongs to (see Sweeps.create_sweep)."""
        if not isinstance(config, RunConfig):
            try:
                config = RunConfig.model_validate(config)
            except ValidationError as err:
                raise StoreError(f"invalid run config: {err.errors()[0].get('msg')}") from err
        run = Run(id=run_id or _new_id(f"{config.game}-{config.pathway}"), config=config, note=note,
                  sweep_id=sweep_id)
        from s3gym_tui.engine.decoding import storable_args

        stored = config.model_copy(update={"api_base": strip_url_credentials(config.api_base),
                                           "api_bases": tuple(strip_url_credentials(b) for b in config.api_bases),
                                           "model_args": storable_args(config.model_args)})
        with self._db._tx("create a run") as conn:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run.id,)).fetchone():
                raise StoreError(f"run {run.id!r} already exists")
            if sweep_id is not None and not conn.execute("SELECT 1 FROM sweeps WHERE id = ?",
                                                         (sweep_id,)).fetchone():
                raise StoreError(f"no sweep {sweep_id!r}")
            conn.execute(_insert_sql("runs", ("id", "config", "game", "model", "pathway", "status",
                                              "created_at", "note", "sweep_id")),
                         (run.id, redact_values(stored.model_dump_json()), config.game,
                          redact_values(config.model), config.pathway, run.status,
                          run.created_at, redact_values(run.note), sweep_id))
        return run

    def get_run(self, run_id: str) -> Run:
        with self._db._reading("read a run") as conn:
            row = one_row(conn, "SELECT * FROM runs WHERE id = ?", (run_id,))
        if row is None:
            raise StoreError(f"no run {run_id!r}")
        return run_from_row(row)

    def list_runs(self, limit: int = 100, offset: int = 0,
                  damaged: Optional[list[tuple[str, str]]] = None) -> list[Run]:
        """Newest first (index on created_at). With `damaged` (a list), a row that cannot be read
        (hand-edited JSON, a bad status) is skipped and reported there as (run id, reason), so one
        damaged run does not hide the others; without it, it raises StoreError."""
        with self._db._reading("list runs") as conn:
            rows = row_dicts(conn.execute(
                "SELECT * FROM runs ORDER BY created_at DESC, rowid DESC LIMIT ? OFFSET ?",
                (int(limit), int(offset))))
        if damaged is None:
            return [run_from_row(r) for r in rows]
        runs = []
        for row in rows:
            try:
                runs.append(run_from_row(row))
            except StoreError as exc:
                damaged.append((str(row.get("id")), str(exc)))
        return runs

    def set_run_status(self, run_id: str, status: str, reason: str = "") -> Run:
        """Set the status and why (the reason is cleared when a run runs again or finishes)."""
        if status not in RUN_STATUSES:
            raise StoreError(f"bad run status {status!r}: one of {', '.join(RUN_STATUSES)}")
        with self._db._tx("set a run's status") as conn:
            if conn.execute("UPDATE runs SET status = ?, status_reason = ? WHERE id = ?",
                            (status, " ".join(str(reason).split())[:500], run_id)).rowcount == 0:
                raise StoreError(f"no run {run_id!r}")
        return self.get_run(run_id)

    def set_run_note(self, run_id: str, note: str) -> Run:
        with self._db._tx("set a run's note") as conn:
            if conn.execute("UPDATE runs SET note = ? WHERE id = ?", (note, run_id)).rowcount == 0:
                raise StoreError(f"no run {run_id!r}")
        return self.get_run(run_id)

