"""Schema versions: opening is idempotent; a later migration upgrades an older file atomically."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest
from sqlite_utils import Database

from s3gym_tui.models import RunConfig
from s3gym_tui.store import SCHEMA_VERSION, Store, StoreError, schema


def _schema_sql(path: Path) -> list[tuple]:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("SELECT type, name, sql FROM sqlite_master ORDER BY name").fetchall()
    finally:
        conn.close()


def test_schema_version_is_the_number_of_migrations():
    assert SCHEMA_VERSION == len(schema.MIGRATIONS) == schema.current_version() >= 1


def test_opening_twice_is_idempotent(db_path: Path):
    with Store(db_path) as store:
        run = store.runs.create_run(RunConfig(model="m", game="trust"))
        store.summaries.add_summary(run.id, "r", "a", "n")
    first = _schema_sql(db_path)
    for _ in range(2):
        with Store(db_path) as store:
            assert store.schema_version == SCHEMA_VERSION
            assert store.runs.get_run(run.id) == run
            assert [s.version for s in store.summaries.list(run.id)] == [1]
    assert _schema_sql(db_path) == first
    conn = sqlite3.connect(db_path)
    assert conn.execute("SELECT count(*) FROM meta").fetchone()[0] == 1
    conn.close()


def _v_next(db: Database) -> None:
    """A stand-in future migration: a new column and a backfill."""
    db["runs"].add_column("tags", str, not_null_default="[]")
    db.execute("UPDATE runs SET note = note || ' (migrated)'")


def test_older_file_is_migrated_to_the_current_version(db_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    with Store(db_path) as store:  # written at today's version
        run = store.runs.create_run(RunConfig(model="m", game="trust"), note="old")
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, _v_next])
    with Store(db_path) as store:
        assert store.schema_version == SCHEMA_VERSION + 1
        assert store.runs.get_run(run.id).note == "old (migrated)"
        assert "tags" in store.db["runs"].columns_dict
    with Store(db_path) as store:  # and not applied twice
        assert store.runs.get_run(run.id).note == "old (migrated)"


def test_a_fresh_file_runs_every_migration_in_order(db_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, _v_next])
    with Store(db_path) as store:
        assert store.schema_version == SCHEMA_VERSION + 1
        assert "tags" in store.db["runs"].columns_dict


def test_failing_migration_leaves_the_previous_version(db_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    with Store(db_path) as store:
        run = store.runs.create_run(RunConfig(model="m", game="trust"))

    def broken(db: Database) -> None:
        db["half_done"].create({"x": int})
        db.execute("SELECT * FROM no_such_table")

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, broken])
    with pytest.raises(StoreError, match="no such table"):
        Store(db_path)
    monkeypatch.undo()
    with Store(db_path) as store:
        assert store.schema_version == SCHEMA_VERSION
        assert "half_done" not in store.db.table_names()
        assert store.runs.get_run(run.id) == run


def test_read_only_file_of_an_older_version_is_refused(db_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch):
    with Store(db_path):
        pass
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, _v_next])
    with pytest.raises(StoreError, match="is at schema .* and is read-only: .*s3gym migrate"):
        Store(db_path, read_only=True)
