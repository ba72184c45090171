"""What a person watching an ASPIRE run sees, computed once from the store's records (store/aspire.py):
the lineage of each candidate, its hidden score and deltas, the claim against the measurement, the
compute split in shares. The screen only draws this (the UI computes no figure itself).

Hidden scores are shown only once the run has ended (finished or failed): before, every measured
figure is undefined (None) with the reason why, so nobody watching a live run reads the hidden suite's
verdict before the agent has submitted. A figure that cannot be computed is None with its reason,
never 0."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Mapping, Optional, Sequence

ENDED = ("finished", "failed")
# the compute categories a person reads (store/aspire.py CATEGORIES), in the order of the issue
SPLIT_ORDER = ("interpretation", "practice", "update", "validation", "submit", "other")
SPLIT_LABELS = {"interpretation": "goal interpretation", "practice": "practice", "update": "updates",
                "validation": "validation", "submit": "submit", "other": "other"}
# which stored score of a candidate is its hidden score (one evaluation; the purposes name why it was made)
SCORE_PREFERENCE = ("candidate", "final", "retained", "base", "request")
OUTCOME_MARKS = {"ok": "", "error": "✗ error", "over_budget": "✗ over budget", "refused": "⊘ refused"}
OUTCOME_GLYPHS = {"ok": " ", "error": "✗", "over_budget": "✗", "refused": "⊘"}  # one cell, before the tool
CATEGORY_SHORT = {"interpretation": "goal", "practice": "practice", "update": "update", "validation": "validate",
                  "submit": "submit", "other": "other"}
STATUS_MARKS = {"active": "", "rolled_back": "↺ rolled back", "final": "★ final"}
HIDDEN_WHY = "hidden until the run ends"


@dataclass(frozen=True)
class Figure:
    """A number or, when undefined, the reason why (never 0 in its place)."""

    value: Optional[float]
    why: str = ""


def short_id(candidate_id: str, aspire_id: str) -> str:
    """A candidate's id without its run's id in front (`aspire-rules-0c16…-c2` -> `c2`): what the tree
    and the tables show; the whole id is in the candidate's details."""
    prefix = f"{aspire_id}-"
    return candidate_id[len(prefix):] if candidate_id.startswith(prefix) and len(candidate_id) > len(prefix) \
        else candidate_id


@dataclass(frozen=True)
class CandidateView:
    id: str
    label: str  # the id shown (short_id)
    kind: str
    parent_id: Optional[str]
    depth: int
    lineage: tuple[str, ...]  # labels (short ids) from the base down to this one
    status: str  # active / rolled_back / final (stored)
    retained: bool
    is_base: bool
    is_final: bool
    note: str
    frozen_ref: str
    decision_idx: Optional[int]
    score: Figure  # the hidden score
    vs_parent: Figure
    vs_base: Figure
    claimed: Figure  # the agent's claimed delta for this candidate (only the submitted one has a claim)
    claim_text: str
    validations: tuple[str, ...]  # the agent's own validation results of this candidate (its judgement)

    @property
    def marks(self) -> str:
        parts = [STATUS_MARKS.get(self.status, self.status)]
        if self.retained:
            parts.append("✓ retained")
        return " ".join(p for p in parts if p)


@dataclass(frozen=True)
class ComputeShare:
    category: str
    label: str
    decisions: int
    calls: int
    tokens: int
    cost: Optional[float]
    seconds: float
    share: Optional[float]  # of the model calls (None when no call was made yet)
    token_share: Optional[float] = None  # of the tokens (None when none was counted yet)
    time_share: Optional[float] = None  # of the decisions' wall time (None when none passed yet)


@dataclass(frozen=True)
class AspireView:
    ended: bool
    hidden_why: str  # why measured figures are undefined ('' once they can be shown)
    candidates: tuple[CandidateView, ...]
    claimed_delta: Figure
    measured_delta: Figure  # final − base, hidden
    retained_delta: Figure  # retained − base, hidden
    base_score: Figure
    final_score: Figure
    retained_score: Figure
    claim_text: str
    split: tuple[ComputeShare, ...] = field(default_factory=tuple)

    def candidate(self, candidate_id: Optional[str]) -> Optional[CandidateView]:
        return next((c for c in self.candidates if c.id == candidate_id), None)


def _minus(a: Figure, b: Figure, what: str) -> Figure:
    if a.value is None:
        return Figure(None, a.why or f"no score of the {what}")
    if b.value is None:
        return Figure(None, b.why or "no score to compare with")
    return Figure(a.value - b.value)


def hidden_why(run) -> str:
    """Why the hidden scores of `run` are not shown now ('' when they are)."""
    if run.status in ENDED:
        return ""
    if run.protocol == "adaptive":
        return f"{HIDDEN_WHY} (adaptive: the agent gets one aggregate per request, in its timeline)"
    return f"{HIDDEN_WHY} (final-only: no score before the end)"


def candidate_scores(run, scores: Sequence) -> dict[str, Figure]:
    """candidate id -> its hidden score (once the run has ended; before, undefined with the reason)."""
    why = hidden_why(run)
    found: dict[str, Figure] = {}
    rank = {p: i for i, p in enumerate(SCORE_PREFERENCE)}
    best: dict[str, int] = {}
    for s in scores:
        r = rank.get(s.purpose, len(rank))
        if s.candidate_id not in best or r < best[s.candidate_id]:
            best[s.candidate_id] = r
            found[s.candidate_id] = (Figure(s.score, "" if s.score is not None else
                                            f"not computed ({s.episodes} episode(s))") if not why else Figure(None, why))
    return found


def _score_of(found: Mapping[str, Figure], candidate_id: Optional[str], run, what: str) -> Figure:
    if candidate_id is None:
        return Figure(None, hidden_why(run) or f"no {what} candidate")
    if candidate_id in found:
        return found[candidate_id]
    return Figure(None, hidden_why(run) or f"the {what} candidate was not evaluated")


def _validations(candidate_id: str, decisions: Sequence) -> tuple[str, ...]:
    """The results of the agent's own validations that name this candidate (its judgement, no reward)."""
    out = []
    for d in decisions:
        if d.category != "validation" or d.outcome != "ok":
            continue
        args = d.arguments if isinstance(d.arguments, Mapping) else {}
        if candidate_id in (str(v) for v in args.values()):
            out.append(d.result)
    return tuple(out)


def compute_split(split: Mapping[str, Mapping[str, Any]]) -> tuple[ComputeShare, ...]:
    """store.aspire.compute_split() as shares of the model calls, in the issue's order."""
    total = sum(int(v.get("calls") or 0) for v in split.values())
    tokens = sum(int(v.get("tokens") or 0) for v in split.values())
    seconds = sum(float(v.get("seconds") or 0.0) for v in split.values())
    order = list(SPLIT_ORDER) + sorted(k for k in split if k not in SPLIT_ORDER)
    rows = []
    for cat in order:
        if cat not in split and cat not in SPLIT_ORDER[:4]:
            continue
        v = split.get(cat, {})
        calls = int(v.get("calls") or 0)
        rows.append(ComputeShare(cat, SPLIT_LABELS.get(cat, cat), int(v.get("decisions") or 0), calls,
                                 int(v.get("tokens") or 0), v.get("cost") if v else None,
                                 float(v.get("seconds") or 0.0), calls / total if total else None,
                                 int(v.get("tokens") or 0) / tokens if tokens else None,
                                 float(v.get("seconds") or 0.0) / seconds if seconds else None))
    return tuple(rows)


def aspire_view(run, decisions: Sequence, candidates: Sequence, claims: Sequence, scores: Sequence,
                split: Optional[Mapping[str, Mapping[str, Any]]] = None) -> AspireView:
    """Everything the ASPIRE screen shows of one run, from its stored records."""
    why = hidden_why(run)
    found = candidate_scores(run, scores)
    by_id = {c.id: c for c in candidates}
    base_id = run.base_candidate_id or next((c.id for c in candidates if c.parent_id is None), None)
    claim = claims[-1] if claims else None
    views = []
    for c in candidates:
        chain, cur, seen = [], c, set()
        while cur is not None and cur.id not in seen:
            seen.add(cur.id)
            chain.append(short_id(cur.id, run.id))
            cur = by_id.get(cur.parent_id) if cur.parent_id else None
        chain.reverse()
        score = found.get(c.id, Figure(None, why or "not evaluated"))
        parent = found.get(c.parent_id, Figure(None, why or "parent not evaluated")) if c.parent_id else \
            Figure(None, "(base)")
        base = found.get(base_id, Figure(None, why or "base not evaluated")) if base_id else Figure(None, "no base")
        mine = claim is not None and (claim.candidate_id == c.id or (claim.candidate_id is None
                                                                     and run.final_candidate_id == c.id))
        views.append(CandidateView(
            id=c.id, label=short_id(c.id, run.id), kind=c.kind, parent_id=c.parent_id, depth=len(chain) - 1, lineage=tuple(chain),
            status=c.status, retained=run.retained_candidate_id == c.id, is_base=c.id == base_id,
            is_final=run.final_candidate_id == c.id or c.status == "final", note=c.note, frozen_ref=c.frozen_ref,
            decision_idx=c.decision_idx, score=score,
            vs_parent=_minus(score, parent, "candidate") if c.parent_id else parent,
            vs_base=_minus(score, base, "candidate") if c.id != base_id else Figure(None, "(base)"),
            claimed=Figure(claim.claimed_delta, "" if claim.claimed_delta is not None else "no number claimed")
            if mine else Figure(None, "no claim"),
            claim_text=claim.text if mine else "", validations=_validations(c.id, decisions)))
    base_score = _score_of(found, base_id, run, "base")
    final_score = _score_of(found, run.final_candidate_id, run, "final")
    retained_score = _score_of(found, run.retained_candidate_id, run, "retained")
    if claim is None:
        claimed = Figure(None, "no claim yet" if run.status not in ENDED else "no claim submitted")
    else:
        claimed = Figure(claim.claimed_delta, "" if claim.claimed_delta is not None else "no number claimed")
    return AspireView(
        ended=not why, hidden_why=why, candidates=tuple(views), claimed_delta=claimed,
        measured_delta=_minus(final_score, base_score, "final candidate"),
        retained_delta=_minus(retained_score, base_score, "retained candidate"),
        base_score=base_score, final_score=final_score, retained_score=retained_score,
        claim_text=claim.text if claim is not None else "",
        split=compute_split(split or {}))
