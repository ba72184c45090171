"""The full-text index of the store (SQLite FTS5) and the annotations table: tables, the triggers
that keep the index up to date, and the backlog of steps stored before the index existed.

Three FTS5 tables, all kept current by triggers inside the writer's own transaction, so a step,
summary or annotation stored by any process (a run in another terminal, the app, a sweep) is
searchable the moment it is committed:

- `search_steps`: external content on `steps` (content_rowid = steps.id, an INTEGER PRIMARY KEY,
  stable across VACUUM): action, reply, feedback and observation. Only the inverted index is
  stored, never a second copy of the text. Prompts are not indexed (they repeat the observations
  and the history; they are the bulk of the file).
- `search_summaries`: the three sections of every summary version (a small, self-contained table
  keyed by summary id: summaries has a text primary key, whose rowid VACUUM may renumber).
- `search_notes`: external content on `annotations` (label and note).

The backlog. A file upgraded to this schema already holds steps; indexing a million of them is
minutes of work, so the migration (which runs with upgrade.py's backup, in one transaction) only
records the range of step ids still to index in `search_backlog` (lo < id <= hi). The first search
indexes that range in short committed batches with a progress bar (store.search: index_backlog),
so Ctrl-C loses at most one batch and the next search goes on from there. The triggers never touch
a step inside the range: its row is added by the backlog, exactly once (deleting an FTS5
external-content row that was never inserted would corrupt the index).

A later migration that rebuilds `steps` (sqlite-utils transform drops the table's triggers) gets
them back from restore_triggers, which schema.migrate calls after the last migration: the rebuilt
table keeps its ids, so the index stays valid.
"""

from __future__ import annotations

import sqlite3

STEP_FIELDS: tuple[str, ...] = ("action", "reply", "feedback", "observation")
SUMMARY_FIELDS: tuple[str, ...] = ("retain", "avoid", "next")
NOTE_FIELDS: tuple[str, ...] = ("label", "note")
TOKENIZER = "unicode61 remove_diacritics 2"
ANNOTATION_KINDS: tuple[str, ...] = ("step", "episode", "summary")

_OUTSIDE_BACKLOG = ("NOT EXISTS (SELECT 1 FROM search_backlog b WHERE {row}.id > b.lo "
                    "AND {row}.id <= b.hi)")


def _cols(fields: tuple[str, ...], prefix: str = "") -> str:
    return ", ".join(f"{prefix}{f}" if prefix else f for f in fields)


def _step_values(row: str) -> str:
    return ", ".join(f"{row}.{f}" for f in STEP_FIELDS)


TRIGGERS: dict[str, str] = {
    # steps -> search_steps (outside the backlog range only: see the module docstring)
    "search_steps_insert": f"""
CREATE TRIGGER IF NOT EXISTS search_steps_insert AFTER INSERT ON steps
WHEN {_OUTSIDE_BACKLOG.format(row="new")}
BEGIN
  INSERT INTO search_steps (rowid, {_cols(STEP_FIELDS)}) VALUES (new.id, {_step_values("new")});
END""",
    "search_steps_delete": f"""
CREATE TRIGGER IF NOT EXISTS search_steps_delete AFTER DELETE ON steps
WHEN {_OUTSIDE_BACKLOG.format(row="old")}
BEGIN
  INSERT INTO search_steps (search_steps, rowid, {_cols(STEP_FIELDS)})
  VALUES ('delete', old.id, {_step_values("old")});
END""",
    "search_steps_update": f"""
CREATE TRIGGER IF NOT EXISTS search_steps_update AFTER UPDATE OF id, {_cols(STEP_FIELDS)} ON steps
WHEN {_OUTSIDE_BACKLOG.format(row="old")} AND {_OUTSIDE_BACKLOG.format(row="new")}
BEGIN
  INSERT INTO search_steps (search_steps, rowid, {_cols(STEP_FIELDS)})
  VALUES ('delete', old.id, {_step_values("old")});
  INSERT INTO search_steps (rowid, {_cols(STEP_FIELDS)}) VALUES (new.id, {_step_values("new")});
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


def create_search_and_annotations(conn: sqlite3.Connection) -> None:
    """The migration's work (inside its transaction): the annotations table, the three FTS5
    tables, their triggers, summaries indexed at once (few), steps recorded as the backlog."""
    conn.execute("""
CREATE TABLE annotations (
  id INTEGER PRIMARY KEY,
  kind TEXT NOT NULL CHECK (kind IN ('step', 'episode', 'summary')),
  episode_id TEXT REFERENCES episodes(id),
  step_index INTEGER,
  summary_id TEXT REFERENCES summaries(id),
  label TEXT NOT NULL,
  note TEXT NOT NULL DEFAULT '',
  correction TEXT,
  author TEXT NOT NULL,
  created_at TEXT NOT NULL,
  FOREIGN KEY (episode_id, step_index) REFERENCES steps(episode_id, "index"),
  CHECK ((kind = 'step' AND episode_id IS NOT NULL AND step_index IS NOT NULL AND summary_id IS NULL)
      OR (kind = 'episode' AND episode_id IS NOT NULL AND step_index IS NULL AND summary_id IS NULL)
      OR (kind = 'summary' AND summary_id IS NOT NULL AND episode_id IS NULL AND step_index IS NULL)),
  CHECK (correction IS NULL OR kind = 'step')
)""")
    conn.execute("CREATE INDEX idx_annotations_step ON annotations (episode_id, step_index)")
    conn.execute("CREATE INDEX idx_annotations_summary ON annotations (summary_id)")
    conn.execute("CREATE INDEX idx_annotations_label ON annotations (label)")
    conn.execute(f"CREATE VIRTUAL TABLE search_steps USING fts5({_cols(STEP_FIELDS)}, "
                 f"content='steps', content_rowid='id', tokenize='{TOKENIZER}')")
    conn.execute(f"CREATE VIRTUAL TABLE search_summaries USING fts5(summary_id UNINDEXED, "
                 f"{_cols(SUMMARY_FIELDS)}, tokenize='{TOKENIZER}')")
    conn.execute(f"CREATE VIRTUAL TABLE search_notes USING fts5({_cols(NOTE_FIELDS)}, "
                 f"content='annotations', content_rowid='id', tokenize='{TOKENIZER}')")
    conn.execute("CREATE TABLE search_backlog (lo INTEGER NOT NULL, hi INTEGER NOT NULL)")
    hi = conn.execute("SELECT max(id) FROM steps").fetchone()[0]
    if hi is not None:
        conn.execute("INSERT INTO search_backlog (lo, hi) VALUES (0, ?)", (int(hi),))
    conn.execute("INSERT INTO search_summaries (summary_id, retain, avoid, next) "
                 "SELECT id, retain, avoid, next FROM summaries")
    restore_triggers(conn)


def has_search(conn: sqlite3.Connection) -> bool:
    return conn.execute("SELECT 1 FROM sqlite_master WHERE name = 'search_steps'").fetchone() is not None


def restore_triggers(conn: sqlite3.Connection) -> None:
    """(Re)create any missing trigger of the index (a table rebuilt by a migration loses its own)."""
    if not has_search(conn):
        return
    for sql in TRIGGERS.values():
        conn.execute(sql.strip())


def backlog(conn: sqlite3.Connection) -> int:
    """Steps stored before the index existed and not indexed yet (0 when the index is complete)."""
    row = conn.execute("SELECT lo, hi FROM search_backlog").fetchone() if has_search(conn) else None
    if row is None:
        return 0
    return conn.execute("SELECT count(*) FROM steps WHERE id > ? AND id <= ?", row).fetchone()[0]


def index_batch(conn: sqlite3.Connection, size: int) -> tuple[int, bool]:
    """Index the next `size` backlog steps inside the caller's write transaction: (steps indexed,
    whether the backlog is now empty)."""
    row = conn.execute("SELECT rowid, lo, hi FROM search_backlog").fetchone()
    if row is None:
        return 0, True
    key, lo, hi = row
    ids = [r[0] for r in conn.execute("SELECT id FROM steps WHERE id > ? AND id <= ? ORDER BY id LIMIT ?",
                                      (lo, hi, int(size)))]
    if not ids:
        conn.execute("DELETE FROM search_backlog WHERE rowid = ?", (key,))
        return 0, True
    conn.execute(f"INSERT INTO search_steps (rowid, {_cols(STEP_FIELDS)}) "
                 f"SELECT id, {_cols(STEP_FIELDS)} FROM steps WHERE id > ? AND id <= ?", (lo, ids[-1]))
    if ids[-1] >= hi or len(ids) < size:
        conn.execute("DELETE FROM search_backlog WHERE rowid = ?", (key,))
        return len(ids), True
    conn.execute("UPDATE search_backlog SET lo = ? WHERE rowid = ?", (ids[-1], key))
    return len(ids), False
