"""Tables of stored credit per action (TASPO; see store/credit.py), created by one migration."""

from __future__ import annotations

import json


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
    conn.execute("CREATE INDEX idx_episodes_task ON episodes (game, seed, mode)")  # sibling groups
    conn.execute("CREATE TABLE action_credits (credit_id TEXT NOT NULL REFERENCES episode_credits(id), "
                 "step_index INTEGER NOT NULL, weight REAL, shift REAL, item_ids TEXT NOT NULL DEFAULT '[]', "
                 "PRIMARY KEY (credit_id, step_index))")


_IN = "(SELECT value FROM json_each(?))"


def remove_credit_of(conn, episodes_json: str) -> None:
    """Inside a removal's transaction: the credit of the doomed episodes (a JSON list of ids), and every PI
    extraction that read or cited one of them (its prompt holds their text) with its items, evidence
    and the credit computed from it."""
    doomed_ext = (f"SELECT id FROM pi_extractions x WHERE EXISTS (SELECT 1 FROM json_each(x.episode_ids) j "
                  f"WHERE j.value IN {_IN}) OR id IN (SELECT i.extraction_id FROM pi_items i JOIN pi_evidence v "
                  f"ON v.item_id = i.id WHERE v.episode_id IN {_IN})")
    ext = [r[0] for r in conn.execute(doomed_ext, (episodes_json, episodes_json))]
    ext_json = json.dumps(ext)
    credits = (f"SELECT id FROM episode_credits WHERE episode_id IN {_IN} OR extraction_id IN {_IN}")
    conn.execute(f"DELETE FROM action_credits WHERE credit_id IN ({credits})", (episodes_json, ext_json))
    conn.execute(f"DELETE FROM episode_credits WHERE id IN ({credits})", (episodes_json, ext_json))
    conn.execute(f"DELETE FROM pi_evidence WHERE item_id IN (SELECT id FROM pi_items WHERE extraction_id IN {_IN})",
                 (ext_json,))
    conn.execute(f"DELETE FROM pi_items WHERE extraction_id IN {_IN}", (ext_json,))
    conn.execute(f"DELETE FROM pi_extractions WHERE id IN {_IN}", (ext_json,))
