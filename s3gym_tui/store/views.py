"""SQL views for browsing a store (Datasette, sqlite3): steps with their run, game, pathway and
phase; each step's prompt as sent; the JSON id lists (history sources, summary sources, checkpoint
episodes) as rows.

Views are derived: `schema.migrate` drops them before any migration (so a table can be rebuilt
under them) and creates the current ones after the last (migrations add views here, not in a
migration). A user's own views are left alone.
"""

from __future__ import annotations

import sqlite3

def _joined_parts(base: str) -> str:
    """SQL for the prompt the parts of `c.prompt` make (stored_prompt.py), copies sliced from `base`:
    the parts in array order (json_each reads them in order, one row each), as bytes (a BLOB's substr
    finds its offset at once); the concatenation is text again."""
    return f"""(SELECT group_concat(CASE p.type WHEN 'text' THEN CAST(p.value AS BLOB)
                         WHEN 'array' THEN substr(CAST({base} AS BLOB), json_extract(p.value, '$[0]') + 1,
                                                  json_extract(p.value, '$[1]'))
                         ELSE (SELECT CAST(t.text AS BLOB) FROM texts t WHERE t.key = json_extract(p.value, '$.text'))
                         END, '')
          FROM json_each(c.prompt, '$.parts') p)"""


# Each step's prompt exactly as sent, computed for the rows a query asks for (a filter on step_id,
# episode_id or step_index is applied first): `chain` walks from the step down its bases to one without
# a base, `built` joins their parts back up, each from the prompt of the one below.
STEP_PROMPTS = f"""
SELECT s.id AS step_id, s.episode_id, s."index" AS step_index, (
  WITH RECURSIVE chain(depth, step_index, prompt) AS (
    SELECT 0, s."index", s.prompt
    UNION ALL
    SELECT c.depth + 1, x."index", x.prompt FROM chain c JOIN steps x
      ON x.episode_id = s.episode_id AND x."index" = json_extract(c.prompt, '$.base') AND x."index" < c.step_index
  ),
  built(depth, prompt) AS (
    SELECT c.depth, {_joined_parts("NULL")} FROM chain c WHERE json_extract(c.prompt, '$.base') IS NULL
    UNION ALL
    SELECT b.depth - 1, {_joined_parts("b.prompt")} FROM built b JOIN chain c ON c.depth = b.depth - 1
  )
  SELECT CAST(prompt AS TEXT) FROM built WHERE depth = 0) AS prompt
FROM steps s WHERE s.prompt <> ''"""

VIEWS: dict[str, str] = {
    "step_prompts": STEP_PROMPTS,
    "steps_in_runs": """
SELECT s.id AS step_id, s.episode_id, s."index" AS step_index, r.sweep_id, e.run_id, e.game,
       e.model, e.pathway, e.phase, e.mode, e.checkpoint, e."index" AS episode_index, e.seed,
       s.action, s.self_score, s.reward, s.valid, s.terminated, s.truncated, s.actor, s.fault,
       s.tokens_in, s.tokens_out, s.latency_ms, s.cost, s.created_at, s.feedback, s.tokens_cached,
       s.tokens_cache_write
FROM steps s JOIN episodes e ON e.id = s.episode_id LEFT JOIN runs r ON r.id = e.run_id""",
    "run_overview": """
SELECT r.id AS run_id, r.sweep_id, r.game, r.model, r.pathway, r.status, r.created_at,
       (SELECT count(*) FROM episodes e WHERE e.run_id = r.id AND e.phase = 'explore'
          AND e.status = 'finished') AS explore_done,
       (SELECT count(*) FROM episodes e WHERE e.run_id = r.id AND e.phase = 'eval'
          AND e.status = 'finished') AS eval_done,
       (SELECT count(*) FROM checkpoints c WHERE c.run_id = r.id) AS checkpoints_done,
       (SELECT coalesce(sum(e.n_steps), 0) FROM episodes e WHERE e.run_id = r.id) AS steps,
       (SELECT coalesce(sum(s.tokens_in), 0) FROM steps s JOIN episodes e ON e.id = s.episode_id
          WHERE e.run_id = r.id) AS tokens_in,
       (SELECT coalesce(sum(s.tokens_out), 0) FROM steps s JOIN episodes e ON e.id = s.episode_id
          WHERE e.run_id = r.id) AS tokens_out,
       (SELECT sum(s.cost) FROM steps s JOIN episodes e ON e.id = s.episode_id
          WHERE e.run_id = r.id) AS step_cost,
       (SELECT sum(s.tokens_cached) FROM steps s JOIN episodes e ON e.id = s.episode_id
          WHERE e.run_id = r.id) AS tokens_cached
FROM runs r""",
    "history_sources": """
SELECT e.id AS episode_id, e.run_id, CAST(j.key AS INTEGER) AS position,
       j.value AS source_episode_id
FROM episodes e, json_each(CASE WHEN json_valid(e.history_episode_ids)
                                THEN e.history_episode_ids ELSE '[]' END) j""",
    "summary_sources": """
SELECT m.id AS summary_id, m.run_id, m.version, CAST(j.key AS INTEGER) AS position,
       j.value AS source_episode_id
FROM summaries m, json_each(CASE WHEN json_valid(m.source_episode_ids)
                                 THEN m.source_episode_ids ELSE '[]' END) j""",
    "checkpoint_episodes": """
SELECT c.run_id, c.x, CAST(j.key AS INTEGER) AS position, j.value AS episode_id,
       json_extract(CASE WHEN json_valid(c.scores) THEN c.scores ELSE '[]' END,
                    '$[' || j.key || ']') AS score
FROM checkpoints c, json_each(CASE WHEN json_valid(c.episode_ids) THEN c.episode_ids
                                   ELSE '[]' END) j""",
    "summary_search": """
SELECT f.rowid AS search_rowid, m.id AS summary_id, m.run_id, m.game, m.version, m.status, m.pinned, m.author,
       m.created_at, m.retain, m.avoid, m.next
FROM search_summaries f JOIN summaries m ON m.id = f.summary_id""",
}
# views that read a table only later schemas have (skipped on a file of an older schema)
NEEDS: dict[str, str] = {"summary_search": "search_summaries"}


def drop_views(conn: sqlite3.Connection) -> None:
    """Drop our views (a user's own views are left alone)."""
    for name in VIEWS:
        conn.execute(f'DROP VIEW IF EXISTS "{name}"')


def create_views(conn: sqlite3.Connection) -> None:
    """(Re)create every view of VIEWS; the tables they read must exist."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    for name, sql in VIEWS.items():
        conn.execute(f'DROP VIEW IF EXISTS "{name}"')
        if NEEDS.get(name, "") and NEEDS[name] not in tables:
            continue
        conn.execute(f'CREATE VIEW "{name}" AS {sql.strip()}')
