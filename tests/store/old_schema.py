"""Builds a store file of an older schema the way an older s3gym left it: the first migrations of the
real chain applied to an empty file, rows inserted with plain SQL (no code of today's store)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from sqlite_utils import Database

from s3gym_tui.store import schema

RUN_ID = "trust-summary-old"


def build_old_store(path: Path, version: int = 2, *, episodes: int = 4, steps: int = 3,
                    prompt_chars: int = 200) -> dict[str, int]:
    """A WAL file at schema `version` (MIGRATIONS[:version]) holding one summary run: `episodes`
    finished exploration episodes of `steps` steps (prompts of `prompt_chars` characters), a summary,
    a checkpoint with one evaluation episode, a shared text. Returns the row count of every table."""
    path.parent.mkdir(parents=True, exist_ok=True)
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        conn.execute("PRAGMA journal_mode = WAL")
        db = Database(conn)
        conn.execute("BEGIN")
        for migration in schema.MIGRATIONS[:version]:
            migration(db)
        conn.execute("INSERT INTO meta (key, value) VALUES ('schema_version', ?)", (str(version),))
        config = json.dumps({"model": "scripted/trust", "game": "trust", "pathway": "summary"})
        conn.execute("INSERT INTO runs (id, config, game, model, pathway, status, created_at, note) "
                     "VALUES (?, ?, 'trust', 'scripted/trust', 'summary', 'stopped', "
                     "'2026-01-01T00:00:00+00:00', 'made by an older s3gym')", (RUN_ID, config))
        filler = ("an old prompt " * (prompt_chars // 14 + 1))[:prompt_chars]
        ids = []
        for i in range(episodes + 1):
            phase = "explore" if i < episodes else "eval"
            ep = f"{RUN_ID}-x{i:03d}" if phase == "explore" else f"{RUN_ID}-c000-e0"
            ids.append(ep)
            conn.execute(
                'INSERT INTO episodes (id, run_id, game, mode, phase, seed, "index", checkpoint, model, '
                'pathway, status, score, n_steps, history_episode_ids, history_cut, started_at, '
                "finished_at) VALUES (?, ?, 'trust', ?, ?, ?, ?, ?, 'scripted/trust', 'summary', "
                "'finished', ?, ?, '[]', 0, '2026-01-01T00:00:01+00:00', '2026-01-01T00:00:02+00:00')",
                (ep, RUN_ID, phase, phase, i if phase == "explore" else 1_000_000,
                 i if phase == "explore" else 0, 0 if phase == "eval" else None, float(i), steps))
            for k in range(steps):
                prompt = json.dumps([{"role": "user", "content": f"{filler} {ep} {k}"}])
                conn.execute(
                    'INSERT INTO steps (episode_id, "index", action, self_score, reward, valid, '
                    "terminated, truncated, actor, tokens_in, tokens_out, latency_ms, created_at, "
                    "feedback, observation, reply, prompt) VALUES (?, ?, 'C', ?, 1.0, 1, ?, 0, "
                    "'model', 10, 5, 1.5, '2026-01-01T00:00:01+00:00', 'ok', ?, ?, ?)",
                    (ep, k, float(k), int(k == steps - 1), f"board {k}", f"Answer: C, Score: {k}", prompt))
        conn.execute("INSERT INTO summaries (id, run_id, game, version, retain, avoid, next, "
                     "source_episode_ids, status, pinned, author, created_at, for_episode_id) VALUES "
                     "('sum-old-1', ?, 'trust', 1, 'cooperate first', 'grudges', 'forgive', ?, "
                     "'active', 0, 'model:scripted/trust', '2026-01-01T00:00:03+00:00', ?)",
                     (RUN_ID, json.dumps(ids[:1]), ids[1] if episodes > 1 else None))
        conn.execute("INSERT INTO checkpoints (run_id, x, episode_ids, scores) VALUES (?, 0, ?, ?)",
                     (RUN_ID, json.dumps(ids[-1:]), json.dumps([float(episodes)])))
        if version >= 2:
            conn.execute("INSERT INTO texts (key, text) VALUES (?, 'a shared hint')", ("k" * 32,))
        conn.execute("COMMIT")
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()


def stored_version(path: Path) -> int | None:
    """The schema version recorded in the file, read with a plain connection (read-only)."""
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        return schema.stored_version(conn)
    finally:
        conn.close()


# The step columns a later migration added, with the schema version that added it: the code of an
# older schema neither writes nor reads them.
NEWER_STEP_COLUMNS = {"tokens_cached": 11, "tokens_cache_write": 11}


def as_older_code(monkeypatch, version: int) -> None:
    """Today's store behaving as the code of schema `version` did: only its migrations, and only the
    step columns that schema has (undo with monkeypatch.undo())."""
    from s3gym_tui.store import episodes as store_module

    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:version])
    cols = tuple(c for c in store_module._STEP_COLS if NEWER_STEP_COLUMNS.get(c, 0) <= version)
    quoted = ", ".join(f'"{c}"' for c in cols)
    monkeypatch.setattr(store_module, "_STEP_COLS", cols)
    monkeypatch.setattr(store_module, "_INSERT_STEP", store_module._insert_sql("steps", cols))
    monkeypatch.setattr(store_module, "_SELECT_STEPS", f"SELECT {quoted} FROM steps")
