"""Schema migrations of the search index, self-contained (they name tables, columns and triggers as
they were then, never the current search_schema.py), run by `schema.migrate` inside its transaction.

- v8 made the index, the annotations table, and indexed each step in its own writer's transaction
  (triggers), with a range of older steps left to index (`search_backlog`).
- v10 queues steps instead (`search_pending`, see search_schema.py): indexing one step per
  transaction made storing a step about 50 % slower. The steps of the backlog range are queued, the
  per-step triggers are replaced by the queueing ones.
"""

from __future__ import annotations

import sqlite3

_FIELDS = "action, reply, feedback, observation"
_OLD = "new.action, new.reply, new.feedback, new.observation"
_OUTSIDE = "NOT EXISTS (SELECT 1 FROM search_backlog b WHERE {row}.id > b.lo AND {row}.id <= b.hi)"
_TOKENIZER = "unicode61 remove_diacritics 2"


def search_v8(conn: sqlite3.Connection) -> None:
    """Version 8: annotations, three FTS5 tables with their triggers, summaries indexed, steps a backlog."""
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
    conn.execute(f"CREATE VIRTUAL TABLE search_steps USING fts5({_FIELDS}, content='steps', content_rowid='id', "
                 f"tokenize='{_TOKENIZER}')")
    conn.execute(f"CREATE VIRTUAL TABLE search_summaries USING fts5(summary_id UNINDEXED, retain, avoid, next, "
                 f"tokenize='{_TOKENIZER}')")
    conn.execute(f"CREATE VIRTUAL TABLE search_notes USING fts5(label, note, content='annotations', "
                 f"content_rowid='id', tokenize='{_TOKENIZER}')")
    conn.execute("CREATE TABLE search_backlog (lo INTEGER NOT NULL, hi INTEGER NOT NULL)")
    hi = conn.execute("SELECT max(id) FROM steps").fetchone()[0]
    if hi is not None:
        conn.execute("INSERT INTO search_backlog (lo, hi) VALUES (0, ?)", (int(hi),))
    conn.execute("INSERT INTO search_summaries (summary_id, retain, avoid, next) "
                 "SELECT id, retain, avoid, next FROM summaries")
    old_values = _OLD.replace("new.", "old.")
    for sql in (
            f"CREATE TRIGGER search_steps_insert AFTER INSERT ON steps WHEN {_OUTSIDE.format(row='new')} BEGIN "
            f"INSERT INTO search_steps (rowid, {_FIELDS}) VALUES (new.id, {_OLD}); END",
            f"CREATE TRIGGER search_steps_delete AFTER DELETE ON steps WHEN {_OUTSIDE.format(row='old')} BEGIN "
            f"INSERT INTO search_steps (search_steps, rowid, {_FIELDS}) VALUES ('delete', old.id, {old_values}); END",
            f"CREATE TRIGGER search_steps_update AFTER UPDATE OF id, {_FIELDS} ON steps WHEN "
            f"{_OUTSIDE.format(row='old')} AND {_OUTSIDE.format(row='new')} BEGIN "
            f"INSERT INTO search_steps (search_steps, rowid, {_FIELDS}) VALUES ('delete', old.id, {old_values}); "
            f"INSERT INTO search_steps (rowid, {_FIELDS}) VALUES (new.id, {_OLD}); END",
            "CREATE TRIGGER search_summaries_insert AFTER INSERT ON summaries BEGIN INSERT INTO search_summaries "
            "(summary_id, retain, avoid, next) VALUES (new.id, new.retain, new.avoid, new.next); END",
            "CREATE TRIGGER search_summaries_delete AFTER DELETE ON summaries BEGIN DELETE FROM search_summaries "
            "WHERE summary_id = old.id; END",
            "CREATE TRIGGER search_summaries_update AFTER UPDATE OF id, retain, avoid, next ON summaries BEGIN "
            "DELETE FROM search_summaries WHERE summary_id = old.id; INSERT INTO search_summaries (summary_id, "
            "retain, avoid, next) VALUES (new.id, new.retain, new.avoid, new.next); END",
            "CREATE TRIGGER search_notes_insert AFTER INSERT ON annotations BEGIN INSERT INTO search_notes "
            "(rowid, label, note) VALUES (new.id, new.label, new.note); END",
            "CREATE TRIGGER search_notes_delete AFTER DELETE ON annotations BEGIN INSERT INTO search_notes "
            "(search_notes, rowid, label, note) VALUES ('delete', old.id, old.label, old.note); END",
            "CREATE TRIGGER search_notes_update AFTER UPDATE OF id, label, note ON annotations BEGIN "
            "INSERT INTO search_notes (search_notes, rowid, label, note) VALUES ('delete', old.id, old.label, "
            "old.note); INSERT INTO search_notes (rowid, label, note) VALUES (new.id, new.label, new.note); END"):
        conn.execute(sql)


def search_queue_v10(conn: sqlite3.Connection) -> None:
    """Version 10: steps are queued for the index (search_pending) instead of indexed one by one."""
    for name in ("search_steps_insert", "search_steps_delete", "search_steps_update"):
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute("CREATE TABLE search_pending (id INTEGER PRIMARY KEY)")
    conn.execute("INSERT OR IGNORE INTO search_pending (id) SELECT s.id FROM steps s JOIN search_backlog b "
                 "ON s.id > b.lo AND s.id <= b.hi")
    conn.execute("DROP TABLE search_backlog")
    indexed = "NOT EXISTS (SELECT 1 FROM search_pending p WHERE p.id = {row}.id)"
    old_values = _OLD.replace("new.", "old.")
    conn.execute("CREATE TRIGGER search_steps_insert AFTER INSERT ON steps BEGIN "
                 "INSERT OR IGNORE INTO search_pending (id) VALUES (new.id); END")
    conn.execute(f"CREATE TRIGGER search_steps_delete AFTER DELETE ON steps BEGIN "
                 f"INSERT INTO search_steps (search_steps, rowid, {_FIELDS}) SELECT 'delete', old.id, {old_values} "
                 f"WHERE {indexed.format(row='old')}; DELETE FROM search_pending WHERE id = old.id; END")
    conn.execute(f"CREATE TRIGGER search_steps_update AFTER UPDATE OF id, {_FIELDS} ON steps "
                 f"WHEN {indexed.format(row='old')} BEGIN "
                 f"INSERT INTO search_steps (search_steps, rowid, {_FIELDS}) VALUES ('delete', old.id, {old_values}); "
                 f"INSERT OR IGNORE INTO search_pending (id) VALUES (new.id); END")
