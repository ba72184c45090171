"""The ASPIRE migration: self-directed improvement runs (issue 25) get tables of their own.

Self-contained on purpose (plain SQL): a migration must keep meaning the same thing however the code
around it changes. References to runs, summaries and trainings are plain columns (as for trainings),
so deleting a run never fails on an ASPIRE run; the ASPIRE tables reference each other.

- `aspire_runs`: one agent's attempt at one goal under one protocol and budget. `goal_id` names the
  goal of the goal set (engine/aspire/goals.py); the hidden suite is NOT stored here (it is looked up
  by the controller only, so nothing the agent can read through the store names it).
- `aspire_decisions`: every tool call in order (tool, arguments, result, what it cost, its compute
  category, and whether it was ok, an error, over budget or refused).
- `aspire_candidates`: every candidate (base, memory, sft, grpo) with its parent and what freezes it
  (a summary id, a training id / adapter, a model name), and whether retention rolled it back.
- `aspire_claims`: what the agent claims on submit (text and, when it gave one, a number).
- `aspire_scores`: the hidden scores (controller side): per candidate and purpose (base, request,
  final, retained), the aggregate and per-game figures, with the evaluation runs they came from.
- `aspire_run_links`: the ordinary s3gym runs an ASPIRE run made (practice, validation, hidden).
"""

from __future__ import annotations

TABLES = [
    """CREATE TABLE aspire_runs (
        id TEXT PRIMARY KEY,
        goal_id TEXT NOT NULL,
        goal_text TEXT NOT NULL,
        explicit INTEGER NOT NULL DEFAULT 0,
        control_of TEXT REFERENCES aspire_runs(id) ON DELETE SET NULL,
        model TEXT NOT NULL,
        operator TEXT NOT NULL DEFAULT 'model',
        protocol TEXT NOT NULL,
        budget TEXT NOT NULL DEFAULT '{}',
        usage TEXT NOT NULL DEFAULT '{}',
        settings TEXT NOT NULL DEFAULT '{}',
        status TEXT NOT NULL DEFAULT 'created',
        status_reason TEXT NOT NULL DEFAULT '',
        base_candidate_id TEXT,
        final_candidate_id TEXT,
        retained_candidate_id TEXT,
        created_at TEXT NOT NULL,
        finished_at TEXT)""",
    """CREATE TABLE aspire_decisions (
        aspire_run_id TEXT NOT NULL REFERENCES aspire_runs(id) ON DELETE CASCADE,
        idx INTEGER NOT NULL,
        tool TEXT NOT NULL,
        arguments TEXT NOT NULL DEFAULT '{}',
        result TEXT NOT NULL DEFAULT '',
        outcome TEXT NOT NULL DEFAULT 'ok',
        category TEXT NOT NULL,
        reply TEXT NOT NULL DEFAULT '',
        calls INTEGER NOT NULL DEFAULT 0,
        tokens_in INTEGER NOT NULL DEFAULT 0,
        tokens_out INTEGER NOT NULL DEFAULT 0,
        cost REAL,
        seconds REAL NOT NULL DEFAULT 0,
        created_at TEXT NOT NULL,
        PRIMARY KEY (aspire_run_id, idx))""",
    """CREATE TABLE aspire_candidates (
        id TEXT PRIMARY KEY,
        aspire_run_id TEXT NOT NULL REFERENCES aspire_runs(id) ON DELETE CASCADE,
        parent_id TEXT REFERENCES aspire_candidates(id),
        kind TEXT NOT NULL,
        model TEXT NOT NULL,
        game TEXT,
        summary_id TEXT,
        training_id TEXT,
        frozen_ref TEXT NOT NULL DEFAULT '',
        status TEXT NOT NULL DEFAULT 'active',
        note TEXT NOT NULL DEFAULT '',
        decision_idx INTEGER,
        created_at TEXT NOT NULL)""",
    """CREATE TABLE aspire_claims (
        aspire_run_id TEXT NOT NULL REFERENCES aspire_runs(id) ON DELETE CASCADE,
        candidate_id TEXT REFERENCES aspire_candidates(id),
        text TEXT NOT NULL,
        claimed_delta REAL,
        decision_idx INTEGER,
        created_at TEXT NOT NULL)""",
    """CREATE TABLE aspire_scores (
        aspire_run_id TEXT NOT NULL REFERENCES aspire_runs(id) ON DELETE CASCADE,
        candidate_id TEXT NOT NULL REFERENCES aspire_candidates(id),
        purpose TEXT NOT NULL,
        score REAL,
        per_game TEXT NOT NULL DEFAULT '{}',
        episodes INTEGER NOT NULL DEFAULT 0,
        run_ids TEXT NOT NULL DEFAULT '[]',
        created_at TEXT NOT NULL,
        PRIMARY KEY (aspire_run_id, candidate_id, purpose))""",
    """CREATE TABLE aspire_run_links (
        aspire_run_id TEXT NOT NULL REFERENCES aspire_runs(id) ON DELETE CASCADE,
        run_id TEXT NOT NULL,
        role TEXT NOT NULL,
        candidate_id TEXT,
        PRIMARY KEY (aspire_run_id, run_id))""",
    "CREATE INDEX idx_aspire_runs_created ON aspire_runs (created_at)",
    "CREATE INDEX idx_aspire_candidates_run ON aspire_candidates (aspire_run_id)",
    "CREATE INDEX idx_aspire_claims_run ON aspire_claims (aspire_run_id)",
    "CREATE INDEX idx_aspire_links_run ON aspire_run_links (run_id)",
]


def migrate_aspire(conn) -> None:
    for sql in TABLES:
        conn.execute(sql)
