"""Stored ASPIRE runs (issue 25): a run, its decisions, candidates with lineage, claims, hidden scores.

The data API the CLI, the report and the ASPIRE screen read (plain frozen dataclasses, JSON decoded).
Hidden scores are written by the controller only, after the agent is done (or, in the adaptive
protocol, as one aggregate per request); the agent's tools never read this module.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

from s3gym_tui.models import utcnow
from s3gym_tui.secrets import redact_values
from s3gym_tui.store.connection import _new_id
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.rows import one_row, row_dicts

PROTOCOLS = ("final", "adaptive")
ASPIRE_STATUSES = ("created", "running", "interrupted", "failed", "finished")
CANDIDATE_KINDS = ("base", "memory", "sft", "grpo")
CANDIDATE_STATUSES = ("active", "rolled_back", "final")
OUTCOMES = ("ok", "error", "over_budget", "refused")
CATEGORIES = ("interpretation", "practice", "update", "validation", "submit", "other")
SCORE_PURPOSES = ("base", "request", "final", "retained", "candidate")
LINK_ROLES = ("practice", "validation", "hidden", "training", "memory")
SUITES = ("drawn", "fixed")  # a run's hidden suite: seeds drawn from the store's secret, or the source's


def _loads(text: Any, default: Any) -> Any:
    try:
        return json.loads(text) if text not in (None, "") else default
    except (TypeError, ValueError):
        return default


@dataclass(frozen=True)
class AspireRun:
    id: str
    goal_id: str
    goal_text: str
    explicit: bool
    control_of: Optional[str]  # the vague run this explicit-goal control is paired with
    model: str
    operator: str  # 'model' (litellm tool calling) or 'scripted'
    protocol: str  # 'final' or 'adaptive'
    budget: dict[str, Any]
    usage: dict[str, Any]
    settings: dict[str, Any]
    status: str
    status_reason: str
    base_candidate_id: Optional[str]
    final_candidate_id: Optional[str]
    retained_candidate_id: Optional[str]
    created_at: str
    finished_at: Optional[str]
    suite: str = "drawn"  # see SUITES


@dataclass(frozen=True)
class Decision:
    aspire_run_id: str
    idx: int
    tool: str
    arguments: dict[str, Any]  # as the agent sent them (a call that is no JSON object keeps its text in 'raw')
    result: str
    outcome: str  # ok / error / over_budget / refused
    category: str  # interpretation / practice / update / validation / submit / other
    reply: str  # the agent's own text with the call (may be empty)
    calls: int  # model calls this decision cost (the agent's turn and any episodes it played)
    tokens_in: int
    tokens_out: int
    cost: Optional[float]  # None: not priced (unknown, never 0)
    seconds: float
    created_at: str
    fault: Optional[str] = None  # what was cut of its reply, arguments or result (None: nothing)


@dataclass(frozen=True)
class Candidate:
    id: str
    aspire_run_id: str
    parent_id: Optional[str]
    kind: str  # base / memory / sft / grpo
    model: str
    game: Optional[str]
    summary_id: Optional[str]
    training_id: Optional[str]
    frozen_ref: str  # what fixes it: the summary text's id, the adapter directory, the model name
    status: str  # active / rolled_back / final
    note: str
    decision_idx: Optional[int]
    created_at: str


@dataclass(frozen=True)
class Claim:
    aspire_run_id: str
    candidate_id: Optional[str]
    text: str
    claimed_delta: Optional[float]  # None: the agent named no number
    decision_idx: Optional[int]
    created_at: str


@dataclass(frozen=True)
class HiddenScore:
    aspire_run_id: str
    candidate_id: str
    purpose: str  # base / request / final / retained / candidate
    score: Optional[float]  # None: could not be computed (never 0)
    per_game: dict[str, Optional[float]]
    episodes: int
    run_ids: list[str] = field(default_factory=list)
    created_at: str = ""


@dataclass(frozen=True)
class RunLink:
    aspire_run_id: str
    run_id: str
    role: str
    candidate_id: Optional[str]


def _run(row: Mapping[str, Any]) -> AspireRun:
    return AspireRun(id=row["id"], goal_id=row["goal_id"], goal_text=row["goal_text"],
                     explicit=bool(row["explicit"]), control_of=row["control_of"], model=row["model"],
                     operator=row["operator"], protocol=row["protocol"], budget=_loads(row["budget"], {}),
                     usage=_loads(row["usage"], {}), settings=_loads(row["settings"], {}),
                     status=row["status"], status_reason=row["status_reason"],
                     base_candidate_id=row["base_candidate_id"], final_candidate_id=row["final_candidate_id"],
                     retained_candidate_id=row["retained_candidate_id"], created_at=row["created_at"],
                     finished_at=row["finished_at"], suite=row["suite"])


def _arguments(text: Any) -> dict[str, Any]:
    """A decision's arguments: the JSON object the agent sent, else its text as {'raw': text}."""
    value = _loads(text, None)
    if isinstance(value, dict):
        return value
    return {} if text in (None, "") else {"raw": text}


def _decision(row: Mapping[str, Any]) -> Decision:
    return Decision(aspire_run_id=row["aspire_run_id"], idx=row["idx"], tool=row["tool"],
                    arguments=_arguments(row["arguments"]), result=row["result"], outcome=row["outcome"],
                    category=row["category"], reply=row["reply"], calls=row["calls"],
                    tokens_in=row["tokens_in"], tokens_out=row["tokens_out"], cost=row["cost"],
                    seconds=row["seconds"], created_at=row["created_at"], fault=row["fault"])


def _score(row: Mapping[str, Any]) -> HiddenScore:
    return HiddenScore(aspire_run_id=row["aspire_run_id"], candidate_id=row["candidate_id"],
                       purpose=row["purpose"], score=row["score"], per_game=_loads(row["per_game"], {}),
                       episodes=row["episodes"], run_ids=_loads(row["run_ids"], []),
                       created_at=row["created_at"])


class Aspire(Repository):
    """ASPIRE runs and everything they record. Reads and writes `aspire_runs`, `aspire_decisions`,
    `aspire_candidates`, `aspire_claims`, `aspire_scores`, `aspire_run_links`, `aspire_suite_secret`."""

    # ------------------------------------------------------------------ runs

    def create_aspire_run(self, *, goal_id: str, goal_text: str, model: str, protocol: str,
                          budget: Mapping[str, Any], operator: str = "model", explicit: bool = False,
                          control_of: Optional[str] = None, settings: Optional[Mapping[str, Any]] = None,
                          aspire_id: Optional[str] = None) -> AspireRun:
        if protocol not in PROTOCOLS:
            raise StoreError(f"bad protocol {protocol!r}: one of {', '.join(PROTOCOLS)}")
        aspire_id = aspire_id or _new_id(f"aspire-{goal_id}")
        with self._db._tx("create an ASPIRE run") as conn:
            if conn.execute("SELECT 1 FROM aspire_runs WHERE id = ?", (aspire_id,)).fetchone():
                raise StoreError(f"ASPIRE run {aspire_id!r} already exists")
            conn.execute(
                "INSERT INTO aspire_runs (id, goal_id, goal_text, explicit, control_of, model, operator, "
                "protocol, budget, settings, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (aspire_id, goal_id, goal_text, int(explicit), control_of, model, operator, protocol,
                 json.dumps(dict(budget)), redact_values(json.dumps(dict(settings or {}))), utcnow()))
        return self.get_aspire_run(aspire_id)

    def find_aspire_run(self, aspire_id: str) -> Optional[AspireRun]:
        with self._db._reading("read an ASPIRE run") as conn:
            row = one_row(conn, "SELECT * FROM aspire_runs WHERE id = ?", (aspire_id,))
        return None if row is None else _run(row)

    def get_aspire_run(self, aspire_id: str) -> AspireRun:
        run = self.find_aspire_run(aspire_id)
        if run is None:
            raise StoreError(f"no ASPIRE run {aspire_id!r}")
        return run

    def aspire_suite_secret(self) -> str:
        """The store's secret the hidden suites of its ASPIRE runs are drawn from (controller side: no
        tool of the agent reads this table)."""
        with self._db._reading("read the hidden suites' secret") as conn:
            row = conn.execute("SELECT secret FROM aspire_suite_secret WHERE id = 1").fetchone()
        if row is None or not row[0]:
            raise StoreError("this store has no secret for hidden suites (schema 15 makes it): upgrade it")
        return row[0]

    def list_aspire_runs(self, limit: int = 100) -> list[AspireRun]:
        """Newest first."""
        with self._db._reading("list ASPIRE runs") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM aspire_runs ORDER BY created_at DESC, rowid DESC "
                                          "LIMIT ?", (int(limit),)))
        return [_run(r) for r in rows]

    def set_aspire_status(self, aspire_id: str, status: str, reason: Optional[str] = None) -> None:
        if status not in ASPIRE_STATUSES:
            raise StoreError(f"bad ASPIRE status {status!r}: one of {', '.join(ASPIRE_STATUSES)}")
        finished = utcnow() if status in ("finished", "failed") else None
        with self._db._tx("set an ASPIRE run's status") as conn:
            if conn.execute("UPDATE aspire_runs SET status = ?, status_reason = coalesce(?, status_reason), "
                            "finished_at = ? WHERE id = ?",
                            (status, reason, finished, aspire_id)).rowcount == 0:
                raise StoreError(f"no ASPIRE run {aspire_id!r}")

    def set_aspire_usage(self, aspire_id: str, usage: Mapping[str, Any]) -> None:
        with self._db._tx("record an ASPIRE run's usage") as conn:
            conn.execute("UPDATE aspire_runs SET usage = ? WHERE id = ?", (json.dumps(dict(usage)), aspire_id))

    def set_aspire_candidates(self, aspire_id: str, *, base: Optional[str] = None, final: Optional[str] = None,
                              retained: Optional[str] = None) -> None:
        """Name the base, final or retained candidate (None leaves it as stored)."""
        with self._db._tx("name an ASPIRE run's candidates") as conn:
            conn.execute("UPDATE aspire_runs SET base_candidate_id = coalesce(?, base_candidate_id), "
                         "final_candidate_id = coalesce(?, final_candidate_id), "
                         "retained_candidate_id = coalesce(?, retained_candidate_id) WHERE id = ?",
                         (base, final, retained, aspire_id))

    # ------------------------------------------------------------------ decisions

    def add_aspire_decision(self, aspire_id: str, *, tool: str, arguments: Mapping[str, Any] | str,
                            result: str, outcome: str, category: str, reply: str = "", calls: int = 0,
                            tokens_in: int = 0, tokens_out: int = 0, cost: Optional[float] = None,
                            seconds: float = 0.0, fault: Optional[str] = None) -> Decision:
        if outcome not in OUTCOMES:
            raise StoreError(f"bad decision outcome {outcome!r}: one of {', '.join(OUTCOMES)}")
        if category not in CATEGORIES:
            raise StoreError(f"bad compute category {category!r}: one of {', '.join(CATEGORIES)}")
        args = arguments if isinstance(arguments, str) else json.dumps(dict(arguments), sort_keys=True)
        with self._db._tx("record an ASPIRE decision") as conn:
            idx = conn.execute("SELECT coalesce(max(idx) + 1, 0) FROM aspire_decisions WHERE aspire_run_id = ?",
                               (aspire_id,)).fetchone()[0]
            conn.execute(
                "INSERT INTO aspire_decisions (aspire_run_id, idx, tool, arguments, result, outcome, category, "
                "reply, calls, tokens_in, tokens_out, cost, seconds, created_at, fault) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (aspire_id, idx, tool, redact_values(args), redact_values(result), outcome, category,
                 redact_values(reply), int(calls), int(tokens_in), int(tokens_out), cost, float(seconds),
                 utcnow(), fault))
        return self.aspire_decisions(aspire_id, after=idx - 1)[0]

    def aspire_decisions(self, aspire_id: str, after: int = -1) -> list[Decision]:
        """The decisions with idx > `after`, in order (a live view polls with the last idx it has)."""
        with self._db._reading("read ASPIRE decisions") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM aspire_decisions WHERE aspire_run_id = ? AND idx > ? "
                                          "ORDER BY idx", (aspire_id, int(after))))
        return [_decision(r) for r in rows]

    def compute_split(self, aspire_id: str) -> dict[str, dict[str, Any]]:
        """Per compute category: decisions, model calls, tokens, cost (None when a call was unpriced), seconds."""
        with self._db._reading("read an ASPIRE compute split") as conn:
            rows = conn.execute("SELECT category, count(*), sum(calls), sum(tokens_in + tokens_out), sum(cost), "
                                "sum(cost IS NULL AND calls > 0), sum(seconds) FROM aspire_decisions "
                                "WHERE aspire_run_id = ? GROUP BY category", (aspire_id,)).fetchall()
        return {cat: {"decisions": n, "calls": calls or 0, "tokens": tokens or 0,
                      "cost": None if unpriced else cost, "seconds": seconds or 0.0}
                for cat, n, calls, tokens, cost, unpriced, seconds in rows}

    # ------------------------------------------------------------------ candidates

    def add_aspire_candidate(self, aspire_id: str, *, kind: str, model: str, parent_id: Optional[str] = None,
                             game: Optional[str] = None, summary_id: Optional[str] = None,
                             training_id: Optional[str] = None, frozen_ref: str = "", note: str = "",
                             decision_idx: Optional[int] = None, candidate_id: Optional[str] = None) -> Candidate:
        if kind not in CANDIDATE_KINDS:
            raise StoreError(f"bad candidate kind {kind!r}: one of {', '.join(CANDIDATE_KINDS)}")
        candidate_id = candidate_id or _new_id(f"cand-{kind}")
        with self._db._tx("record an ASPIRE candidate") as conn:
            if parent_id is not None and not conn.execute(
                    "SELECT 1 FROM aspire_candidates WHERE id = ? AND aspire_run_id = ?",
                    (parent_id, aspire_id)).fetchone():
                raise StoreError(f"no candidate {parent_id!r} in ASPIRE run {aspire_id!r}")
            conn.execute(
                "INSERT INTO aspire_candidates (id, aspire_run_id, parent_id, kind, model, game, summary_id, "
                "training_id, frozen_ref, note, decision_idx, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (candidate_id, aspire_id, parent_id, kind, model, game, summary_id, training_id, frozen_ref,
                 redact_values(note), decision_idx, utcnow()))
        return self.get_aspire_candidate(candidate_id)

    def get_aspire_candidate(self, candidate_id: str) -> Candidate:
        with self._db._reading("read an ASPIRE candidate") as conn:
            row = one_row(conn, "SELECT * FROM aspire_candidates WHERE id = ?", (candidate_id,))
        if row is None:
            raise StoreError(f"no candidate {candidate_id!r}")
        return Candidate(**row)

    def aspire_candidates(self, aspire_id: str) -> list[Candidate]:
        """In the order they were made (parents before children)."""
        with self._db._reading("read ASPIRE candidates") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM aspire_candidates WHERE aspire_run_id = ? "
                                          "ORDER BY rowid", (aspire_id,)))
        return [Candidate(**r) for r in rows]

    def set_candidate_status(self, candidate_id: str, status: str) -> None:
        if status not in CANDIDATE_STATUSES:
            raise StoreError(f"bad candidate status {status!r}: one of {', '.join(CANDIDATE_STATUSES)}")
        with self._db._tx("set a candidate's status") as conn:
            if conn.execute("UPDATE aspire_candidates SET status = ? WHERE id = ?",
                            (status, candidate_id)).rowcount == 0:
                raise StoreError(f"no candidate {candidate_id!r}")

    # ------------------------------------------------------------------ claims, scores, links

    def add_aspire_claim(self, aspire_id: str, *, text: str, candidate_id: Optional[str],
                         claimed_delta: Optional[float], decision_idx: Optional[int] = None) -> Claim:
        now = utcnow()
        with self._db._tx("record an ASPIRE claim") as conn:
            conn.execute("INSERT INTO aspire_claims (aspire_run_id, candidate_id, text, claimed_delta, "
                         "decision_idx, created_at) VALUES (?, ?, ?, ?, ?, ?)",
                         (aspire_id, candidate_id, redact_values(text), claimed_delta, decision_idx, now))
        return Claim(aspire_id, candidate_id, text, claimed_delta, decision_idx, now)

    def aspire_claims(self, aspire_id: str) -> list[Claim]:
        with self._db._reading("read ASPIRE claims") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM aspire_claims WHERE aspire_run_id = ? ORDER BY rowid",
                                          (aspire_id,)))
        return [Claim(**r) for r in rows]

    def set_hidden_score(self, aspire_id: str, candidate_id: str, purpose: str, score: Optional[float],
                         per_game: Mapping[str, Optional[float]], episodes: int,
                         run_ids: Sequence[str] = ()) -> HiddenScore:
        if purpose not in SCORE_PURPOSES:
            raise StoreError(f"bad score purpose {purpose!r}: one of {', '.join(SCORE_PURPOSES)}")
        with self._db._tx("record a hidden score") as conn:
            conn.execute("INSERT OR REPLACE INTO aspire_scores (aspire_run_id, candidate_id, purpose, score, "
                         "per_game, episodes, run_ids, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                         (aspire_id, candidate_id, purpose, score, json.dumps(dict(per_game)), int(episodes),
                          json.dumps(list(run_ids)), utcnow()))
        return [s for s in self.hidden_scores(aspire_id) if s.candidate_id == candidate_id
                and s.purpose == purpose][0]

    def hidden_scores(self, aspire_id: str) -> list[HiddenScore]:
        with self._db._reading("read hidden scores") as conn:
            rows = row_dicts(conn.execute("SELECT * FROM aspire_scores WHERE aspire_run_id = ? ORDER BY rowid",
                                          (aspire_id,)))
        return [_score(r) for r in rows]

    def link_aspire_run(self, aspire_id: str, run_id: str, role: str, candidate_id: Optional[str] = None) -> None:
        if role not in LINK_ROLES:
            raise StoreError(f"bad link role {role!r}: one of {', '.join(LINK_ROLES)}")
        with self._db._tx("link a run to an ASPIRE run") as conn:
            conn.execute("INSERT OR REPLACE INTO aspire_run_links (aspire_run_id, run_id, role, candidate_id) "
                         "VALUES (?, ?, ?, ?)", (aspire_id, run_id, role, candidate_id))

    def aspire_links(self, aspire_id: str, role: Optional[str] = None) -> list[RunLink]:
        sql, params = "SELECT * FROM aspire_run_links WHERE aspire_run_id = ?", [aspire_id]
        if role is not None:
            sql, params = sql + " AND role = ?", params + [role]
        with self._db._reading("read an ASPIRE run's runs") as conn:
            rows = row_dicts(conn.execute(sql + " ORDER BY rowid", params))
        return [RunLink(**r) for r in rows]

    def aspire_made_runs(self) -> set[str]:
        """Ids of every ordinary run (and training) an ASPIRE run made."""
        with self._db._reading("read the runs ASPIRE made") as conn:
            return {row[0] for row in conn.execute("SELECT run_id FROM aspire_run_links")}


__all__ = ["AspireRun", "Aspire", "Candidate", "Claim", "Decision", "HiddenScore", "RunLink",
           "PROTOCOLS", "CANDIDATE_KINDS", "CATEGORIES", "OUTCOMES", "SCORE_PURPOSES", "SUITES"]
