"""The data types of an episode's stored credit per action (TASPO) and their loader: what the credit view
and `s3gym credit` read (store/credit.py holds the rows)."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Optional

from s3gym_tui.engine.credit_math import DEFAULT_EPS_W, DEFAULT_KAPPA, DEFAULT_TAU

if TYPE_CHECKING:  # pragma: no cover
    from s3gym_tui.store.store import Store


@dataclass(frozen=True)
class PiItem:
    """One PI item: a requirement g (a task, ordering or progress rule), the condition c under which it
    applies (as the analyzer wrote it; `cues`: the words that must occur in the pre-action history for
    it to align), and its evidence: (episode id, step index) in successful siblings."""

    id: str
    requirement: str
    condition: str
    evidence: tuple[tuple[str, int], ...] = ()
    cues: tuple[str, ...] = ()


@dataclass(frozen=True)
class ActionCredit:
    """Credit of one action: its weight w (None: undefined, e.g. no advantage), its shift d_it (the mean
    filtered token shift; None: no aligned PI, so w = 1) and the PI items aligned with it."""

    step: int
    action: str
    weight: Optional[float]
    shift: Optional[float]
    items: tuple[PiItem, ...] = ()

    def advantage(self, episode_advantage: Optional[float]) -> Optional[float]:
        """A~_it = A_i * w_it (None when either is undefined)."""
        if episode_advantage is None or self.weight is None:
            return None
        return episode_advantage * self.weight


@dataclass(frozen=True)
class EpisodeCredit:
    """An episode's computed credit: its outcome advantage A_i (None: undefined), the sibling group it
    was computed in, the analyzer that wrote the PI and the scorer that measured the shifts, the
    per-action credit, and a note (why PI is missing, which scorer stood in, ...)."""

    episode_id: str
    advantage: Optional[float]
    group: tuple[str, ...]
    analyzer: str
    scorer: Optional[str]
    actions: tuple[ActionCredit, ...]
    note: str = ""
    reward: Optional[float] = None
    credit: str = "action"
    kappa: float = DEFAULT_KAPPA
    tau: float = DEFAULT_TAU
    eps_w: float = DEFAULT_EPS_W
    items: tuple[PiItem, ...] = ()  # every item of the extraction (aligned or not)
    successful: tuple[str, ...] = ()  # the siblings judged successful (the PI's sources)
    success_rule: str = "self"
    extraction_id: Optional[str] = None
    computed_at: str = ""
    id: str = ""

    @property
    def uniform(self) -> Optional[float]:
        """The plain-GRPO line: every action gets A_i."""
        return self.advantage

    def to_json(self) -> dict:
        data = asdict(self)
        data["group"] = list(self.group)
        return json.loads(json.dumps(data))  # tuples -> lists; None stays null


def episode_credit(store: "Store", episode_id: str) -> Optional[EpisodeCredit]:
    """The latest stored credit of the episode, or None when it was never computed (undefined)."""
    rows = store.credit.credit_rows(episode_id)
    if rows is None:
        return None
    return credit_from_rows(store, episode_id, rows)


def credit_from_rows(store: "Store", episode_id: str, rows: dict) -> EpisodeCredit:
    c = rows["credit"]
    evidence: dict[str, list[tuple[str, int]]] = {}
    for ev in rows["evidence"]:
        evidence.setdefault(ev["item_id"], []).append((ev["episode_id"], int(ev["step_index"])))
    items = tuple(PiItem(id=r["id"], requirement=r["requirement"], condition=r["condition"],
                         evidence=tuple(evidence.get(r["id"], ())), cues=tuple(json.loads(r["cues"] or "[]")))
                  for r in rows["items"])
    by_id = {i.id: i for i in items}
    actions_text = {s.index: s.action for s in store.episodes.steps(episode_id, include_prompt=False)}
    actions = tuple(ActionCredit(step=int(a["step_index"]), action=actions_text.get(int(a["step_index"]), ""),
                                 weight=a["weight"], shift=a["shift"],
                                 items=tuple(by_id[i] for i in json.loads(a["item_ids"] or "[]") if i in by_id))
                    for a in rows["actions"])
    ext = rows.get("extraction") or {}
    return EpisodeCredit(
        episode_id=episode_id, advantage=c["advantage"], group=tuple(json.loads(c["group_ids"])),
        analyzer=c["analyzer"], scorer=c["scorer"], actions=actions, note=c["note"], reward=c["reward"],
        credit=c["credit"], kappa=c["kappa"], tau=c["tau"], eps_w=c["eps_w"], items=items,
        successful=tuple(json.loads(ext.get("successful_ids") or "[]")),
        success_rule=ext.get("success_rule") or c.get("success_rule") or "self",
        extraction_id=c["extraction_id"], computed_at=c["created_at"], id=c["id"])
