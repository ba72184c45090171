"""Schema migration: sweeps, a declared foreign key for every id reference, a primary key on steps.

Self-contained (it names tables and columns, never the current models), run by `schema.migrate`
inside one transaction with foreign-key enforcement off and `PRAGMA foreign_key_check` before the
commit (SQLite's procedure for rebuilding tables). Tables are rebuilt with sqlite-utils
`transform`, which keeps every column and index, also ones other migrations added.
"""

from __future__ import annotations

import re

from sqlite_utils import Database

_STATE = re.compile(r"-x(\d+)$")


def sweeps_and_keys(db: Database) -> None:
    """Sweeps (runs.sweep_id); FKs episodes.summary_id, episodes.fork_of, summaries.for_episode_id,
    dataset_rows -> steps; steps.id; the summary call's tokens and cost on summaries."""
    conn = db.conn
    db["sweeps"].create(
        {"id": str, "config": str, "status": str, "created_at": str, "note": str},
        pk="id", not_null={"config", "status", "created_at", "note"},
        defaults={"status": "created", "note": ""},
    )
    conn.execute('ALTER TABLE "runs" ADD COLUMN "sweep_id" TEXT REFERENCES "sweeps"("id")')
    db["runs"].create_index(["sweep_id"], index_name="idx_runs_sweep")

    # summaries: what the summary's model call used and cost
    summaries = db["summaries"]
    summaries.add_column("tokens_in", int, not_null_default=0)
    summaries.add_column("tokens_out", int, not_null_default=0)
    summaries.add_column("cost", float)
    # for_episode_id named episodes never stored (the last checkpoint's state, or a run stopped
    # between its summary and its episode): a reference must point at a row, so those become NULL.
    # Their state x is not lost: a model summary written for `<run>-x<NNN>` is recorded as what
    # state x uses (experience_states), where the runner finds it on resume.
    dangling = conn.execute("SELECT id, run_id, for_episode_id, created_at FROM summaries "
                            "WHERE for_episode_id IS NOT NULL AND for_episode_id NOT IN "
                            "(SELECT id FROM episodes)").fetchall()
    states = "experience_states" in db.table_names()
    for summary_id, run_id, producer, created_at in dangling:
        match = _STATE.search(producer)
        if states and match and producer == f"{run_id}-x{match.group(1)}":
            conn.execute("INSERT OR IGNORE INTO experience_states (run_id, x, summary_id, began_at) "
                         "VALUES (?, ?, ?, ?)", (run_id, int(match.group(1)), summary_id, created_at))
            conn.execute("UPDATE experience_states SET summary_id = ? WHERE run_id = ? AND x = ? "
                         "AND summary_id IS NULL", (summary_id, run_id, int(match.group(1))))
        conn.execute("UPDATE summaries SET for_episode_id = NULL WHERE id = ?", (summary_id,))
    summaries.transform(add_foreign_keys=[("for_episode_id", "episodes", "id")])
    summaries.create_index(["for_episode_id"], index_name="idx_summaries_for_episode")

    db["episodes"].transform(add_foreign_keys=[("summary_id", "summaries", "id"),
                                               ("fork_of", "episodes", "id")])
    db["episodes"].create_index(["summary_id"], index_name="idx_episodes_summary")
    db["episodes"].create_index(["fork_of"], index_name="idx_episodes_fork_of")

    steps = db["steps"]
    steps.add_column("id", int)
    steps.transform(pk="id", column_order=["id"])  # NULL ids are numbered in insertion order

    db["dataset_rows"].transform(
        add_foreign_keys=[(("episode_id", "step_index"), "steps", ("episode_id", "index"))])
