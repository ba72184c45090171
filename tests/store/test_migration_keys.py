"""The sweeps-and-keys migration: an older file upgrades with every row kept, every id reference
becomes a declared foreign key, steps get a primary key, and the views read it."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, schema

from tests.store.conftest import make_episode, make_step
from tests.store.old_schema import NEWER_STEP_COLUMNS


# the index of this migration in MIGRATIONS (the file before it is at that version)
KEYS = next(i for i, m in enumerate(schema.MIGRATIONS) if "sweeps" in (m.__doc__ or "").lower())


def _old_file(path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """A file at the schema before this migration, written in that version's shape: runs,
    explore and eval episodes, steps, summaries (one for a state no episode was played from),
    a fork, a dataset."""
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:KEYS])
    conn = sqlite3.connect(path, isolation_level=None)
    from sqlite_utils import Database

    db = Database(conn)
    conn.execute("PRAGMA foreign_keys = ON")
    schema.migrate(db, path)
    assert schema.stored_version(conn) == KEYS
    run = {"id": "trust-summary-1", "config": RunConfig(model="scripted/trust", game="trust",
                                                        pathway="summary").model_dump_json(),
           "game": "trust", "model": "scripted/trust", "pathway": "summary", "status": "stopped",
           "created_at": "2026-01-01T00:00:00", "note": "old"}
    db["runs"].insert(run)
    episodes = []
    columns = {r[1] for r in conn.execute("PRAGMA table_info(episodes)")}  # that version's shape
    for i, phase in enumerate(["explore", "explore", "eval"]):
        ep = make_episode(None, phase=phase, index=i if phase == "explore" else 0,
                          id=f"trust-summary-1-x{i:03d}" if phase == "explore" else "trust-summary-1-c000-e0")
        data = {k: v for k, v in ep.model_dump().items() if k in columns}
        data.update(run_id=run["id"], checkpoint=0 if phase == "eval" else None,
                    history_episode_ids="[]", pathway="summary")
        episodes.append(data)
    episodes.append({**episodes[0], "id": "fork-1", "run_id": None, "fork_of": episodes[0]["id"],
                     "fork_step": 1})
    db["episodes"].insert_all(episodes)
    steps = [{name: value for name, value in make_step(e["id"], k).model_dump().items()  # that version's step columns
              if NEWER_STEP_COLUMNS.get(name, 0) <= KEYS} for e in episodes for k in range(2)]
    db["steps"].insert_all(steps)
    summaries = [
        {"id": "sum-1", "run_id": run["id"], "game": "trust", "version": 1, "retain": "r", "avoid": "a",
         "next": "n", "source_episode_ids": json.dumps([episodes[0]["id"]]), "status": "active",
         "pinned": 0, "author": "model:scripted/trust", "parent_version": None,
         "created_at": "2026-01-01T00:00:01", "for_episode_id": episodes[1]["id"]},
        {"id": "sum-2", "run_id": run["id"], "game": "trust", "version": 2, "retain": "r2", "avoid": "a2",
         "next": "n2", "source_episode_ids": json.dumps([e["id"] for e in episodes[:2]]),
         "status": "active", "pinned": 0, "author": "model:scripted/trust", "parent_version": None,
         "created_at": "2026-01-01T00:00:02", "for_episode_id": "trust-summary-1-x002"},  # never played
        {"id": "sum-3", "run_id": run["id"], "game": "trust", "version": 3, "retain": "h", "avoid": "h",
         "next": "h", "source_episode_ids": "[]", "status": "vetoed", "pinned": 0,
         "author": "human:alice", "parent_version": 2, "created_at": "2026-01-01T00:00:03",
         "for_episode_id": None},
    ]
    db["summaries"].insert_all(summaries)
    conn.execute("UPDATE episodes SET summary_id = 'sum-1' WHERE id = ?", (episodes[1]["id"],))
    db["checkpoints"].insert({"run_id": run["id"], "x": 0, "episode_ids": json.dumps([episodes[2]["id"]]),
                              "scores": json.dumps([3.0])})
    db["datasets"].insert({"id": "ds-1", "run_id": run["id"], "rule": "{}", "created_at": "t",
                           "counts": json.dumps({"kept": 1})})
    db["dataset_rows"].insert({"dataset_id": "ds-1", "episode_id": episodes[0]["id"], "step_index": 1,
                               "kind": "kept", "messages": "[]"})
    db["texts"].insert({"key": "k" * 32, "text": "shared"})
    counts = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in db.table_names()}
    conn.close()
    monkeypatch.undo()
    return {"counts": counts, "steps": steps}


def _fks(conn: sqlite3.Connection, table: str) -> set[tuple]:
    rows = conn.execute(f'PRAGMA foreign_key_list("{table}")').fetchall()
    return {(r[3], r[2], r[4]) for r in rows}  # (from, table, to)


def test_an_older_file_upgrades_with_every_row_kept(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "old.db"
    old = _old_file(path, monkeypatch)
    with Store(path) as store:
        assert store.schema_version == schema.current_version() >= 3
        conn = store.conn
        counts = {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0]
                  for t in old["counts"]}
        # every row kept; one experience state added (the state of the summary whose episode was never stored)
        assert counts == {**old["counts"], "experience_states": old["counts"]["experience_states"] + 1}
        assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
        # every id reference is a declared foreign key
        assert ("summary_id", "summaries", "id") in _fks(conn, "episodes")
        assert ("fork_of", "episodes", "id") in _fks(conn, "episodes")
        assert ("run_id", "runs", "id") in _fks(conn, "episodes")
        assert ("for_episode_id", "episodes", "id") in _fks(conn, "summaries")
        assert ("sweep_id", "sweeps", "id") in _fks(conn, "runs")
        assert {("episode_id", "steps", "episode_id"), ("step_index", "steps", "index")} <= _fks(conn, "dataset_rows")
        # steps have a primary key, numbered in insertion order, with every value kept
        info = conn.execute("PRAGMA table_info(steps)").fetchall()
        assert [(r[1], r[5]) for r in info if r[5]] == [("id", 1)]
        rows = conn.execute('SELECT id, episode_id, "index", reply FROM steps ORDER BY id').fetchall()
        assert [r[0] for r in rows] == list(range(1, len(old["steps"]) + 1))
        assert [(r[1], r[2], r[3]) for r in rows] == [(s["episode_id"], s["index"], s["reply"])
                                                       for s in old["steps"]]
        # summaries: a reference to an episode never stored became NULL, its state kept as what
        # state x uses (where a resumed run finds it)
        summaries = {s.id: s for s in store.summaries.list("trust-summary-1")}
        assert summaries["sum-1"].for_episode_id == "trust-summary-1-x001"
        assert summaries["sum-2"].for_episode_id is None
        assert conn.execute("SELECT summary_id FROM experience_states WHERE run_id = 'trust-summary-1' "
                            "AND x = 2").fetchall() == [("sum-2",)]
        assert summaries["sum-3"].cost is None and summaries["sum-3"].tokens_in == 0
        assert store.episodes.get_episode("trust-summary-1-x001").summary_id == "sum-1"
        assert store.episodes.get_episode("fork-1").fork_of == "trust-summary-1-x000"
        assert store.runs.get_run("trust-summary-1").sweep_id is None
        assert store.runs.get_run("trust-summary-1").note == "old"
        assert store.datasets.dataset_rows("ds-1")[0].step_index == 1
        # the views join steps to their run, game, pathway and phase
        view = conn.execute("SELECT run_id, game, pathway, phase, step_index FROM steps_in_runs "
                            "WHERE episode_id = 'trust-summary-1-c000-e0' ORDER BY step_index").fetchall()
        assert view == [("trust-summary-1", "trust", "summary", "eval", 0),
                        ("trust-summary-1", "trust", "summary", "eval", 1)]
        assert conn.execute("SELECT source_episode_id FROM summary_sources WHERE summary_id = 'sum-2' "
                            "ORDER BY position").fetchall() == [("trust-summary-1-x000",),
                                                                 ("trust-summary-1-x001",)]
        assert conn.execute("SELECT episode_id, score FROM checkpoint_episodes").fetchall() == \
            [("trust-summary-1-c000-e0", 3.0)]
        overview = conn.execute("SELECT explore_done, eval_done, steps FROM run_overview").fetchone()
        assert overview == (0, 0, 0)  # the old rows were inserted 'running' with n_steps 0


def test_foreign_keys_are_enforced_after_the_upgrade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "old.db"
    _old_file(path, monkeypatch)
    with Store(path) as store:
        assert store.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        with pytest.raises(sqlite3.IntegrityError):
            store.conn.execute("UPDATE episodes SET fork_of = 'ghost' WHERE id = 'fork-1'")
        with pytest.raises(sqlite3.IntegrityError):
            store.conn.execute("UPDATE summaries SET for_episode_id = 'ghost' WHERE id = 'sum-3'")
        with pytest.raises(sqlite3.IntegrityError):
            store.conn.execute("UPDATE dataset_rows SET step_index = 9")


def test_a_broken_reference_stops_the_migration_and_leaves_the_file(tmp_path: Path,
                                                                    monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "old.db"
    _old_file(path, monkeypatch)
    conn = sqlite3.connect(path)
    conn.execute("UPDATE dataset_rows SET step_index = 7")  # a training row of a step that is not there
    conn.commit()
    conn.close()
    from s3gym_tui.store import StoreError

    with pytest.raises(StoreError, match="row .* of dataset_rows names a missing steps row"):
        Store(path)
    conn = sqlite3.connect(path)
    assert schema.stored_version(conn) == KEYS
    assert "sweeps" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
    assert conn.execute("PRAGMA foreign_keys").fetchone()[0] == 0  # a plain connection
    conn.close()


def test_a_users_own_view_survives_the_upgrade(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "old.db"
    _old_file(path, monkeypatch)
    conn = sqlite3.connect(path)
    conn.execute("CREATE VIEW my_rewards AS SELECT episode_id, sum(reward) AS total FROM steps "
                 "GROUP BY episode_id")
    conn.commit()
    conn.close()
    with Store(path) as store:
        assert len(store.conn.execute("SELECT * FROM my_rewards").fetchall()) == 4
