"""Tables of stored credit per action (TASPO; see store/credit.py), created by one migration."""

from __future__ import annotations


def credit_tables(conn) -> None:
    """The migration's DDL (schema.py appends it as one migration)."""
    conn.execute("CREATE TABLE pi_extractions (id TEXT PRIMARY KEY, game TEXT NOT NULL, mode TEXT NOT NULL, "
                 "seed INTEGER NOT NULL, episode_ids TEXT NOT NULL, successful_ids TEXT NOT NULL, "
                 "success_rule TEXT NOT NULL, purpose TEXT NOT NULL, source TEXT NOT NULL, "
                 "analyzer TEXT NOT NULL, created_at TEXT NOT NULL, prompt TEXT NOT NULL, "
                 "reply TEXT NOT NULL)")
    conn.execute("CREATE INDEX idx_pi_extractions_task ON pi_extractions (game, mode, seed)")
    conn.execute("CREATE TABLE pi_items (id TEXT PRIMARY KEY, extraction_id TEXT NOT NULL "
                 "REFERENCES pi_extractions(id), position INTEGER NOT NULL, requirement TEXT NOT NULL, "
                 "condition TEXT NOT NULL, cues TEXT NOT NULL DEFAULT '[]')")
    conn.execute("CREATE INDEX idx_pi_items_extraction ON pi_items (extraction_id)")
    conn.execute("CREATE TABLE pi_evidence (item_id TEXT NOT NULL REFERENCES pi_items(id), "
                 "episode_id TEXT NOT NULL REFERENCES episodes(id), step_index INTEGER NOT NULL, "
                 "PRIMARY KEY (item_id, episode_id, step_index))")
    conn.execute("CREATE INDEX idx_pi_evidence_episode ON pi_evidence (episode_id)")
    conn.execute("CREATE TABLE episode_credits (id TEXT PRIMARY KEY, episode_id TEXT NOT NULL "
                 "REFERENCES episodes(id), extraction_id TEXT REFERENCES pi_extractions(id), "
                 "advantage REAL, reward REAL, group_ids TEXT NOT NULL, analyzer TEXT NOT NULL, "
                 "scorer TEXT, credit TEXT NOT NULL, kappa REAL NOT NULL, tau REAL NOT NULL, "
                 "eps_w REAL NOT NULL, training_id TEXT, note TEXT NOT NULL DEFAULT '', "
                 "created_at TEXT NOT NULL)")
    conn.execute("CREATE INDEX idx_episode_credits_episode ON episode_credits (episode_id)")
    conn.execute("CREATE INDEX idx_episode_credits_extraction ON episode_credits (extraction_id)")
    conn.execute("CREATE TABLE action_credits (credit_id TEXT NOT NULL REFERENCES episode_credits(id), "
                 "step_index INTEGER NOT NULL, weight REAL, shift REAL, item_ids TEXT NOT NULL DEFAULT '[]', "
                 "PRIMARY KEY (credit_id, step_index))")
