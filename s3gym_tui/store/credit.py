"""Stored credit per action (TASPO, issue 24): PI extractions (the analyzer's prompt and raw reply, the
sibling group it read), their items with evidence (episode, step), and computed episode credit (per
action: weight, shift, aligned items). Rows only; engine/credit.py turns them into data types.

The held-out line: an extraction made for training (`purpose='training'`) may read and cite
exploration episodes only (LeakageError otherwise); store/audit.py checks stored rows again."""

from __future__ import annotations

import json
from typing import Any, Iterable, Mapping, Optional, Sequence

from s3gym_tui.models import Episode, utcnow
from s3gym_tui.secrets import redact_values
from s3gym_tui.store.connection import _new_id, _q
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.episodes import episode_from_row
from s3gym_tui.store.errors import LeakageError, StoreError
from s3gym_tui.store.rows import one_row, row_dicts

PI_PURPOSES = ("view", "training")
PI_SOURCES = ("siblings", "off-trajectory")


class Credit(Repository):
    """PI extractions, their items and evidence, and computed credit. Reads and writes `pi_extractions`,
    `pi_items`, `pi_evidence`, `episode_credits`, `action_credits`; reads `episodes` (the held-out guard)."""

    def add_pi_extraction(self, *, game: str, mode: str, seed: int, episode_ids: Sequence[str],
                          successful_ids: Sequence[str], success_rule: str, analyzer: str, prompt: str,
                          reply: str, items: Iterable[Mapping[str, Any]], purpose: str = "view",
                          source: str = "siblings") -> str:
        """Store one extraction and its items (`requirement`, `condition`, `cues`, `evidence`: a list of
        (episode id, step index)) in one transaction; returns its id. Model text is redacted of secrets."""
        if purpose not in PI_PURPOSES:
            raise StoreError(f"bad PI purpose {purpose!r}: one of {', '.join(PI_PURPOSES)}")
        if source not in PI_SOURCES:
            raise StoreError(f"bad PI source {source!r}: one of {', '.join(PI_SOURCES)}")
        items = [dict(i) for i in items]
        ext_id = _new_id("pi")
        what = f"PI extraction for {game} seed {seed}"
        with self._db._tx(f"store the {what}") as conn:
            cited = [e for i in items for e, _ in i.get("evidence", ())]
            phases = self._db._phases(conn, [*episode_ids, *successful_ids, *cited])
            missing = [e for e in [*episode_ids, *successful_ids, *cited] if e not in phases]
            if missing:
                raise StoreError(f"{what}: no episode {missing[0]!r}")
            if purpose == "training":
                leaked = [e for e in [*episode_ids, *successful_ids, *cited]
                          if phases[e][0] == "eval" or phases[e][1] == "eval"]
                if leaked:
                    raise LeakageError(f"{what}: evaluation episode {leaked[0]!r} cannot be a source of "
                                       f"training PI (held-out data never becomes training data)")
            conn.execute("INSERT INTO pi_extractions (id, game, mode, seed, episode_ids, successful_ids, "
                         "success_rule, purpose, source, analyzer, created_at, prompt, reply) "
                         "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (ext_id, game, mode, int(seed), json.dumps(list(episode_ids)),
                          json.dumps(list(successful_ids)), success_rule, purpose, source,
                          redact_values(analyzer), utcnow(), redact_values(prompt), redact_values(reply)))
            for pos, item in enumerate(items):
                item_id = f"{ext_id}.{pos}"
                conn.execute("INSERT INTO pi_items (id, extraction_id, position, requirement, condition, cues) "
                             "VALUES (?, ?, ?, ?, ?, ?)",
                             (item_id, ext_id, pos, redact_values(str(item.get("requirement", ""))),
                              redact_values(str(item.get("condition", ""))),
                              redact_values(json.dumps([str(c) for c in item.get("cues", ())]))))
                for ep, step in dict.fromkeys((str(e), int(s)) for e, s in item.get("evidence", ())):
                    conn.execute("INSERT INTO pi_evidence (item_id, episode_id, step_index) VALUES (?, ?, ?)",
                                 (item_id, ep, step))
        return ext_id

    def add_episode_credit(self, episode_id: str, *, extraction_id: Optional[str], advantage: Optional[float],
                           reward: Optional[float], group_ids: Sequence[str], analyzer: str,
                           scorer: Optional[str], credit: str, kappa: float, tau: float, eps_w: float,
                           actions: Iterable[tuple[int, Optional[float], Optional[float], Sequence[str]]],
                           note: str = "", training_id: Optional[str] = None) -> str:
        """Store one computation of an episode's credit: per action (step index, weight, shift, aligned
        item ids). Returns its id; the latest computation is the one `credit_rows` reads."""
        credit_id = _new_id("credit")
        with self._db._tx(f"store the credit of episode {episode_id!r}") as conn:
            if not conn.execute("SELECT 1 FROM episodes WHERE id = ?", (episode_id,)).fetchone():
                raise StoreError(f"no episode {episode_id!r}")
            conn.execute("INSERT INTO episode_credits (id, episode_id, extraction_id, advantage, reward, "
                         "group_ids, analyzer, scorer, credit, kappa, tau, eps_w, training_id, note, "
                         "created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                         (credit_id, episode_id, extraction_id, advantage, reward, json.dumps(list(group_ids)),
                          redact_values(analyzer), redact_values(scorer) if scorer else scorer, credit,
                          kappa, tau, eps_w, training_id, redact_values(note), utcnow()))
            conn.executemany("INSERT INTO action_credits (credit_id, step_index, weight, shift, item_ids) "
                             "VALUES (?, ?, ?, ?, ?)",
                             [(credit_id, int(step), w, d, json.dumps(list(ids))) for step, w, d, ids in actions])
        return credit_id

    def credit_rows(self, episode_id: str) -> Optional[dict]:
        """The latest stored credit of the episode as raw rows ({credit, actions, items, evidence,
        extraction}), or None when none was computed."""
        with self._db._reading(f"read the credit of episode {episode_id!r}") as conn:
            credit = one_row(conn, "SELECT * FROM episode_credits WHERE episode_id = ? "
                                   "ORDER BY created_at DESC, rowid DESC LIMIT 1", (episode_id,))
            if credit is None:
                return None
            actions = row_dicts(conn.execute("SELECT * FROM action_credits WHERE credit_id = ? "
                                             "ORDER BY step_index", (credit["id"],)))
            items, evidence, extraction = [], [], None
            if credit["extraction_id"] is not None:
                extraction = one_row(conn, "SELECT id, game, mode, seed, episode_ids, successful_ids, "
                                           "success_rule, purpose, source, analyzer, created_at "
                                           "FROM pi_extractions WHERE id = ?", (credit["extraction_id"],))
                items = row_dicts(conn.execute("SELECT * FROM pi_items WHERE extraction_id = ? "
                                               "ORDER BY position", (credit["extraction_id"],)))
                evidence = row_dicts(conn.execute(
                    "SELECT v.* FROM pi_evidence v JOIN pi_items i ON i.id = v.item_id "
                    "WHERE i.extraction_id = ? ORDER BY i.position, v.episode_id, v.step_index",
                    (credit["extraction_id"],)))
        return {"credit": credit, "actions": actions, "items": items, "evidence": evidence,
                "extraction": extraction}

    def task_episodes(self, game: str, mode: str, seed: int, include: Optional[str] = None,
                      exclude_seed: bool = False) -> list:
        """The finished episodes of one task (game, mode, seed) in insertion order, plus `include` (an
        episode of the task in any status). With exclude_seed: the finished episodes of the game and
        mode on every OTHER seed (the off-trajectory ablation's sources)."""
        op = "!=" if exclude_seed else "="
        with self._db._reading("read a task's episodes") as conn:
            rows = row_dicts(conn.execute(
                f"SELECT {', '.join(_q(c) for c in Episode.model_fields)} FROM episodes WHERE game = ? AND mode = ? AND seed {op} ? AND (status = 'finished' OR id = ?) "
                "ORDER BY rowid", (game, mode, int(seed), include)))
        return [episode_from_row(r) for r in rows]

    def pi_extractions_for(self, episode_ids: Sequence[str], analyzer: str, success_rule: str, purpose: str,
                           source: str) -> Optional[str]:
        """The latest extraction made from exactly this group with these settings (reused, not asked
        again), or None."""
        with self._db._reading("find a PI extraction") as conn:
            row = conn.execute("SELECT id FROM pi_extractions WHERE episode_ids = ? AND analyzer = ? AND "
                               "success_rule = ? AND purpose = ? AND source = ? ORDER BY rowid DESC LIMIT 1",
                               (json.dumps(list(episode_ids)), analyzer, success_rule, purpose, source)).fetchone()
        return row[0] if row else None

    def pi_items_of(self, extraction_id: str) -> list[dict]:
        """An extraction's items with their evidence: dicts of id, requirement, condition, cues, evidence."""
        with self._db._reading("read PI items") as conn:
            items = row_dicts(conn.execute("SELECT * FROM pi_items WHERE extraction_id = ? ORDER BY position",
                                           (extraction_id,)))
            evidence = conn.execute("SELECT v.item_id, v.episode_id, v.step_index FROM pi_evidence v JOIN pi_items i "
                                    "ON i.id = v.item_id WHERE i.extraction_id = ? ORDER BY v.rowid",
                                    (extraction_id,)).fetchall()
        for item in items:
            item["cues"] = json.loads(item["cues"] or "[]")
            item["evidence"] = [(e, int(k)) for i, e, k in evidence if i == item["id"]]
        return items

    def pi_extraction(self, extraction_id: str) -> Optional[dict]:
        """One extraction's row (with its prompt and raw reply), or None."""
        with self._db._reading("read a PI extraction") as conn:
            return one_row(conn, "SELECT * FROM pi_extractions WHERE id = ?", (extraction_id,))
