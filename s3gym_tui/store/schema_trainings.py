"""The trainings migration: trainings get tables of their own (no more JSON text in runs.note).

Self-contained on purpose (plain SQL and json, no app models): a migration must keep meaning the same
thing however the code around it changes. References to runs, datasets and episodes are plain
columns checked by the audit (dangling references), so deleting a run never fails on a training.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Any

from sqlite_utils import Database

OLD_NOTE_PREFIX = "training "

TABLES = [
    """CREATE TABLE trainings (
        id TEXT PRIMARY KEY,
        method TEXT NOT NULL DEFAULT 'sft',
        role TEXT NOT NULL DEFAULT 'expert',
        games TEXT NOT NULL DEFAULT '[]',
        source_run TEXT,
        dataset_id TEXT,
        study_id TEXT,
        parent_id TEXT,
        backend TEXT NOT NULL DEFAULT 'local',
        base TEXT NOT NULL DEFAULT '',
        reward TEXT,
        directory TEXT,
        status TEXT NOT NULL DEFAULT 'created',
        examples INTEGER NOT NULL DEFAULT 0,
        epochs INTEGER NOT NULL DEFAULT 0,
        steps INTEGER NOT NULL DEFAULT 0,
        train_seconds REAL NOT NULL DEFAULT 0,
        settings TEXT NOT NULL DEFAULT '{}',
        metrics TEXT NOT NULL DEFAULT '{}',
        remote_job TEXT,
        error TEXT,
        created_at TEXT NOT NULL,
        finished_at TEXT)""",
    """CREATE TABLE training_checkpoints (
        training_id TEXT NOT NULL REFERENCES trainings(id) ON DELETE CASCADE,
        x INTEGER NOT NULL,
        model TEXT NOT NULL,
        adapter TEXT,
        step INTEGER,
        repaired INTEGER,
        PRIMARY KEY (training_id, x))""",
    """CREATE TABLE training_losses (
        training_id TEXT NOT NULL REFERENCES trainings(id) ON DELETE CASCADE,
        phase TEXT NOT NULL DEFAULT 'train',
        step INTEGER NOT NULL,
        epoch REAL NOT NULL DEFAULT 0,
        loss REAL NOT NULL,
        metrics TEXT NOT NULL DEFAULT '{}',
        PRIMARY KEY (training_id, phase, step))""",
    """CREATE TABLE training_evals (
        training_id TEXT NOT NULL REFERENCES trainings(id) ON DELETE CASCADE,
        game TEXT NOT NULL,
        run_id TEXT NOT NULL,
        xs TEXT NOT NULL DEFAULT '[]',
        PRIMARY KEY (training_id, run_id))""",
    """CREATE TABLE training_sources (
        training_id TEXT NOT NULL REFERENCES trainings(id) ON DELETE CASCADE,
        kind TEXT NOT NULL,
        ref TEXT,
        game TEXT,
        seed INTEGER,
        mode TEXT,
        n INTEGER NOT NULL DEFAULT 1)""",
    """CREATE TABLE studies (
        id TEXT PRIMARY KEY,
        games TEXT NOT NULL DEFAULT '[]',
        experts TEXT NOT NULL DEFAULT '[]',
        settings TEXT NOT NULL DEFAULT '{}',
        status TEXT NOT NULL DEFAULT 'created',
        created_at TEXT NOT NULL)""",
    "CREATE INDEX idx_trainings_source ON trainings (source_run)",
    "CREATE INDEX idx_trainings_study ON trainings (study_id)",
    "CREATE INDEX idx_training_evals_run ON training_evals (run_id)",
    "CREATE INDEX idx_training_sources ON training_sources (training_id, kind)",
    "ALTER TABLE dataset_rows ADD COLUMN reason TEXT",
    "ALTER TABLE dataset_rows ADD COLUMN tokens INTEGER",
]


def _move_note(conn: sqlite3.Connection, run_id: str, game: str, created_at: str, status: str,
               data: dict[str, Any]) -> None:
    """One old `training {json}` note -> rows of the new tables (the run stays the evaluation run)."""
    checkpoints = {int(k): str(v) for k, v in (data.get("checkpoints") or {}).items()}
    repairs = {int(k): int(v) for k, v in (data.get("repairs") or {}).items()}
    directory = data.get("directory")
    conn.execute(
        "INSERT INTO trainings (id, method, role, games, source_run, dataset_id, backend, base, directory, "
        "status, examples, epochs, steps, train_seconds, settings, remote_job, created_at, finished_at) "
        "VALUES (?, 'sft', 'expert', ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (run_id, json.dumps([game]), data.get("source_run"), data.get("dataset_id"),
         data.get("backend") or "local", str(data.get("base") or ""), directory,
         "finished" if status == "finished" else "interrupted", int(data.get("examples") or 0),
         int(data.get("epochs") or 0), len(data.get("losses") or ()), float(data.get("train_seconds") or 0.0),
         json.dumps(data.get("settings") or {}), data.get("remote_job"), created_at,
         created_at if status == "finished" else None))
    for x, model in sorted(checkpoints.items()):
        adapter = None
        if directory and x > 0 and model.startswith("trained/"):
            adapter = f"{directory}/adapters/epoch-{x}"
        conn.execute("INSERT INTO training_checkpoints (training_id, x, model, adapter, repaired) "
                     "VALUES (?, ?, ?, ?, ?)", (run_id, x, model, adapter, repairs.get(x)))
    for point in data.get("losses") or ():
        conn.execute("INSERT OR IGNORE INTO training_losses (training_id, phase, step, epoch, loss) "
                     "VALUES (?, 'sft', ?, ?, ?)", (run_id, int(point["step"]), float(point.get("epoch") or 0.0),
                                                   float(point["loss"])))
    conn.execute("INSERT INTO training_evals (training_id, game, run_id) VALUES (?, ?, ?)", (run_id, game, run_id))
    if data.get("dataset_id"):
        conn.execute("INSERT INTO training_sources (training_id, kind, ref, game) VALUES (?, 'dataset', ?, ?)",
                     (run_id, data["dataset_id"], game))


def migrate_trainings(db: Database) -> None:
    """Create the training tables and move every readable `training {json}` run note into them (the
    note is then cleared); an unreadable note is left as it was."""
    conn = db.conn
    for sql in TABLES:
        conn.execute(sql)
    rows = conn.execute("SELECT id, game, created_at, status, note FROM runs WHERE pathway = 'trained' "
                        "AND note LIKE 'training %'").fetchall()
    for run_id, game, created_at, status, note in rows:
        try:
            data = json.loads(note[len(OLD_NOTE_PREFIX):])
        except ValueError:
            continue
        if not isinstance(data, dict) or "source_run" not in data:
            continue
        conn.execute("SAVEPOINT move_note")
        try:
            _move_note(conn, run_id, game, created_at, status, data)
        except (ValueError, TypeError, KeyError, AttributeError, sqlite3.IntegrityError):
            conn.execute("ROLLBACK TO move_note")
            conn.execute("RELEASE move_note")
            continue
        conn.execute("RELEASE move_note")
        conn.execute("UPDATE runs SET note = '' WHERE id = ?", (run_id,))
