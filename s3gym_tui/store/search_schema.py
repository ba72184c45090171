"""The full-text index of the store (SQLite FTS5) and the annotations table: tables, the triggers
that keep the index up to date, and the queue of steps not indexed yet.

Three FTS5 tables:

- `search_steps`: external content on `steps` (content_rowid = steps.id, an INTEGER PRIMARY KEY,
  stable across VACUUM): action, reply, feedback and observation. Only the inverted index is
  stored, never a second copy of the text. Prompts are not indexed (they repeat the observations
  and the history; they are the bulk of the file).
- `search_summaries`: the three sections of every summary version (a small, self-contained table
  keyed by summary id: summaries has a text primary key, whose rowid VACUUM may renumber), kept
  current by triggers.
- `search_notes`: external content on `annotations` (label and note), kept current by triggers.

Steps go through a queue. Indexing one step per transaction (as the runner stores them) makes FTS5
write a new segment each time, which made storing a step about 50 % slower (benchmarks/search.py);
so the insert trigger only queues the step's id in `search_pending` (one small row, written by
whichever process stores the step, inside its transaction), and the queue is indexed in one batch:
when an episode finishes (Episodes.finish_episode), and before every search by any writable store
(Search.find: a run in another terminal, the app or a sweep wrote them, it makes no difference).
A search therefore always sees every committed step; a store opened read-only says how many it
could not index.

A file upgraded to this schema already holds steps: the migrations (migrate_search.py, run with
upgrade.py's backup, in one transaction) queue them all, and the first search indexes the queue in short committed batches
with a progress bar, so Ctrl-C loses at most one batch and the next search goes on from there.
Deleting or updating a queued step never touches the index (deleting an FTS5 external-content row
that was never inserted would corrupt it); an indexed one is taken out of it.

A later migration that rebuilds `steps` (sqlite-utils transform drops the table's triggers) gets
them back from restore_triggers, which schema.migrate calls after the last migration: the rebuilt
table keeps its ids, so the index stays valid.
"""

from __future__ import annotations

import json
import sqlite3
from typing import Optional

STEP_FIELDS: tuple[str, ...] = ("action", "reply", "feedback", "observation")
SUMMARY_FIELDS: tuple[str, ...] = ("retain", "avoid", "next")
NOTE_FIELDS: tuple[str, ...] = ("label", "note")
TOKENIZER = "unicode61 remove_diacritics 2"
ANNOTATION_KINDS: tuple[str, ...] = ("step", "episode", "summary")

_INDEXED = "NOT EXISTS (SELECT 1 FROM search_pending p WHERE p.id = {row}.id)"


def _cols(fields: tuple[str, ...]) -> str:
    return ", ".join(fields)


def _step_values(row: str) -> str:
    return ", ".join(f"{row}.{f}" for f in STEP_FIELDS)


TRIGGERS: dict[str, str] = {
    # steps -> the queue (indexed in batches: see the module docstring)
    "search_steps_insert": """
CREATE TRIGGER IF NOT EXISTS search_steps_insert AFTER INSERT ON steps
BEGIN
  INSERT OR IGNORE INTO search_pending (id) VALUES (new.id);
END""",
    "search_steps_delete": f"""
CREATE TRIGGER IF NOT EXISTS search_steps_delete AFTER DELETE ON steps
BEGIN
  INSERT INTO search_steps (search_steps, rowid, {_cols(STEP_FIELDS)})
  SELECT 'delete', old.id, {_step_values("old")} WHERE {_INDEXED.format(row="old")};
  DELETE FROM search_pending WHERE id = old.id;
END""",
    "search_steps_update": f"""
CREATE TRIGGER IF NOT EXISTS search_steps_update AFTER UPDATE OF id, {_cols(STEP_FIELDS)} ON steps
WHEN {_INDEXED.format(row="old")}
BEGIN
  INSERT INTO search_steps (search_steps, rowid, {_cols(STEP_FIELDS)})
  VALUES ('delete', old.id, {_step_values("old")});
  INSERT OR IGNORE INTO search_pending (id) VALUES (new.id);
END""",
    # summaries -> search_summaries
    "search_summaries_insert": """
CREATE TRIGGER IF NOT EXISTS search_summaries_insert AFTER INSERT ON summaries
BEGIN
  INSERT INTO search_summaries (summary_id, retain, avoid, next)
  VALUES (new.id, new.retain, new.avoid, new.next);
END""",
    "search_summaries_delete": """
CREATE TRIGGER IF NOT EXISTS search_summaries_delete AFTER DELETE ON summaries
BEGIN
  DELETE FROM search_summaries WHERE summary_id = old.id;
END""",
    "search_summaries_update": """
CREATE TRIGGER IF NOT EXISTS search_summaries_update AFTER UPDATE OF id, retain, avoid, next ON summaries
BEGIN
  DELETE FROM search_summaries WHERE summary_id = old.id;
  INSERT INTO search_summaries (summary_id, retain, avoid, next)
  VALUES (new.id, new.retain, new.avoid, new.next);
END""",
    # annotations -> search_notes
    "search_notes_insert": """
CREATE TRIGGER IF NOT EXISTS search_notes_insert AFTER INSERT ON annotations
BEGIN
  INSERT INTO search_notes (rowid, label, note) VALUES (new.id, new.label, new.note);
END""",
    "search_notes_delete": """
CREATE TRIGGER IF NOT EXISTS search_notes_delete AFTER DELETE ON annotations
BEGIN
  INSERT INTO search_notes (search_notes, rowid, label, note) VALUES ('delete', old.id, old.label, old.note);
END""",
    "search_notes_update": """
CREATE TRIGGER IF NOT EXISTS search_notes_update AFTER UPDATE OF id, label, note ON annotations
BEGIN
  INSERT INTO search_notes (search_notes, rowid, label, note) VALUES ('delete', old.id, old.label, old.note);
  INSERT INTO search_notes (rowid, label, note) VALUES (new.id, new.label, new.note);
END""",
}


def has_search(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_steps'").fetchone() is not None


def restore_triggers(conn: sqlite3.Connection) -> None:
    """(Re)create any missing trigger of the index (a table rebuilt by a migration loses its own)."""
    if not has_search(conn):
        return
    for sql in TRIGGERS.values():
        conn.execute(sql.strip())


def backlog(conn: sqlite3.Connection) -> int:
    """Steps not indexed yet (0 when the index is complete)."""
    if not has_search(conn):
        return 0
    return conn.execute("SELECT count(*) FROM search_pending").fetchone()[0]


def index_batch(conn: sqlite3.Connection, size: Optional[int] = None) -> tuple[int, bool]:
    """Index the next `size` queued steps (all of them with None) inside the caller's write
    transaction: (steps indexed, whether the queue is now empty)."""
    limit = "" if size is None else f" LIMIT {int(size)}"
    ids = [r[0] for r in conn.execute(f"SELECT id FROM search_pending ORDER BY id{limit}")]
    if not ids:
        return 0, True
    last = ids[-1]
    conn.execute(f"INSERT INTO search_steps (rowid, {_cols(STEP_FIELDS)}) SELECT s.id, "
                 f"{', '.join('s.' + f for f in STEP_FIELDS)} FROM search_pending p JOIN steps s ON s.id = p.id "
                 f"WHERE p.id <= ?", (last,))
    conn.execute("DELETE FROM search_pending WHERE id <= ?", (last,))
    return len(ids), size is None or len(ids) < size


def index_episode(conn: sqlite3.Connection, episode_id: str) -> int:
    """Index the queued steps of one episode inside the caller's write transaction (its end)."""
    if not has_search(conn):
        return 0
    ids = [r[0] for r in conn.execute(
        "SELECT p.id FROM search_pending p JOIN steps s ON s.id = p.id WHERE s.episode_id = ?", (episode_id,))]
    if not ids:
        return 0
    json_ids = json.dumps(ids)
    conn.execute(f"INSERT INTO search_steps (rowid, {_cols(STEP_FIELDS)}) SELECT id, {_cols(STEP_FIELDS)} "
                 f"FROM steps WHERE id IN (SELECT value FROM json_each(?))", (json_ids,))
    conn.execute("DELETE FROM search_pending WHERE id IN (SELECT value FROM json_each(?))", (json_ids,))
    return len(ids)
