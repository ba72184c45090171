"""Credit per action (TASPO, issue 24): how an episode's outcome advantage is spread over its actions.

Outcome-based GRPO gives every action of a trajectory the same advantage A_i. TASPO moves credit
between the actions of ONE trajectory, guided by privileged information (PI) that a frozen analyzer
model wrote from the successful siblings of the same task. The outcome keeps setting the direction
and the size; PI only says which actions the outcome is more (or less) due to.

The method, in our notation (i: trajectory, t: action, k: token of action t):

    A_i      = (R_i - mean_G R) / (std_G R + delta)                      outcome advantage in group G
    Delta_itk = log pi_old(token_k | context + P_it) - log pi_old(token_k | context)
                                                                         shift of each action token
    phi(x)   = x if |x| >= kappa else 0                                  small shifts are noise
    d_it     = mean_k phi(Delta_itk)                                     per action (action-level)
    d^_it    = d_it - mean_t d_it                                        centred on the trajectory
    q_it     = tanh(sign(A_i) * d^_it / tau)
    w_it     = 1 + eta * (q_it - mean_t q_it),   eta = eps_w / 2
    A~_it    = A_i * w_it                                                the per-action advantage

The means over t run over the actions WITH aligned PI; an action without aligned PI (its shifts are
None) keeps w = 1. Since |q| < 1, |q - mean q| < 2 and so 1 - eps_w <= w <= 1 + eps_w, and the
weights of a trajectory average 1. With sign(A_i) = 0 every q is 0 and every w is 1. tanh is odd, so
flipping the sign of A_i mirrors every weight around 1.

Token-level credit (`token_weights`, the paper's weaker ablation) applies the same centring and
squashing to each token's phi(Delta) instead of each action's mean.

This module is torch-free and Textual-free: the math, the data types of an episode's stored credit,
and the loader the credit view and `s3gym credit` read.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Optional, Sequence

if TYPE_CHECKING:  # pragma: no cover
    from s3gym_tui.store.store import Store

# Defaults: the paper leaves kappa and tau open; these are ours (exposed on every command).
DEFAULT_KAPPA = 0.05
DEFAULT_TAU = 1.0
DEFAULT_EPS_W = 0.5
DEFAULT_DELTA = 1e-4
CREDIT_MODES = ("action", "token", "uniform")

Shifts = Optional[Sequence[float]]


def _check(kappa: float, tau: float, eps_w: float) -> None:
    if not (kappa >= 0 and math.isfinite(kappa)):
        raise ValueError(f"kappa must be a finite number >= 0, not {kappa!r}")
    if not (tau > 0 and math.isfinite(tau)):
        raise ValueError(f"tau must be a finite number > 0, not {tau!r}")
    if not (0 <= eps_w <= 1):
        raise ValueError(f"eps_w must be between 0 and 1 (weights stay >= 0), not {eps_w!r}")


def phi(delta: float, kappa: float) -> float:
    """The shift filter: Delta when |Delta| >= kappa, else 0 (a non-finite shift counts as 0)."""
    if not math.isfinite(delta):
        return 0.0
    return delta if abs(delta) >= kappa else 0.0


def _sign(x: float) -> float:
    return 1.0 if x > 0 else -1.0 if x < 0 else 0.0


def _centre_and_squash(values: Sequence[float], advantage: float, tau: float, eps_w: float) -> list[float]:
    """w for each value: centre, q = tanh(sign(A) * centred / tau), w = 1 + eps_w/2 * (q - mean q)."""
    if not values:
        return []
    mean_d = math.fsum(values) / len(values)
    s = _sign(advantage)
    q = [math.tanh(s * (d - mean_d) / tau) for d in values]
    mean_q = math.fsum(q) / len(q)
    eta = eps_w / 2.0
    # Clamp the last ulp: |q - mean q| < 2 holds exactly, rounding could step past the bound.
    return [min(1.0 + eps_w, max(1.0 - eps_w, 1.0 + eta * (qi - mean_q))) for qi in q]


def action_shifts(shifts_per_action: Sequence[Shifts], kappa: float) -> list[Optional[float]]:
    """d_it per action: the mean of phi over the action's token shifts; None without aligned PI.
    An aligned action with no tokens has d = 0."""
    out: list[Optional[float]] = []
    for shifts in shifts_per_action:
        if shifts is None:
            out.append(None)
        else:
            vals = [phi(float(x), kappa) for x in shifts]
            out.append(math.fsum(vals) / len(vals) if vals else 0.0)
    return out


def taspo_weights(advantage: float, shifts_per_action: Sequence[Shifts], kappa: float = DEFAULT_KAPPA,
                  tau: float = DEFAULT_TAU, eps_w: float = DEFAULT_EPS_W) -> list[float]:
    """Action-level TASPO weights w_it, one per action (see the module's formulas).

    `shifts_per_action[t]`: the per-token shifts Delta_itk of action t, or None when no PI item aligned
    with its pre-action history (w = 1). The per-action advantage is `advantage * w`."""
    _check(kappa, tau, eps_w)
    d = action_shifts(shifts_per_action, kappa)
    aligned = [i for i, x in enumerate(d) if x is not None]
    weights = [1.0] * len(d)
    if not math.isfinite(advantage):
        raise ValueError(f"the advantage must be a finite number, not {advantage!r}")
    for i, w in zip(aligned, _centre_and_squash([d[i] for i in aligned], advantage, tau, eps_w)):
        weights[i] = w
    return weights


def token_weights(advantage: float, shifts_per_action: Sequence[Shifts], kappa: float = DEFAULT_KAPPA,
                  tau: float = DEFAULT_TAU, eps_w: float = DEFAULT_EPS_W) -> list[Optional[list[float]]]:
    """Token-level TASPO weights (the ablation): per aligned action, one weight per token, centred and
    squashed over all aligned tokens of the trajectory; None for an action without aligned PI (its
    tokens keep w = 1)."""
    _check(kappa, tau, eps_w)
    if not math.isfinite(advantage):
        raise ValueError(f"the advantage must be a finite number, not {advantage!r}")
    flat = [phi(float(x), kappa) for shifts in shifts_per_action if shifts is not None for x in shifts]
    ws = iter(_centre_and_squash(flat, advantage, tau, eps_w))
    return [None if shifts is None else [next(ws) for _ in shifts] for shifts in shifts_per_action]


def group_advantages(rewards: Sequence[Optional[float]], delta: float = DEFAULT_DELTA) -> list[Optional[float]]:
    """A_i = (R_i - mean_G) / (std_G + delta) over the defined rewards of one group (population std);
    an undefined reward (None) has an undefined advantage. A group of one has A = 0."""
    known = [float(r) for r in rewards if r is not None and math.isfinite(float(r))]
    if not known:
        return [None] * len(rewards)
    mean = math.fsum(known) / len(known)
    std = math.sqrt(math.fsum((r - mean) ** 2 for r in known) / len(known))
    return [None if r is None or not math.isfinite(float(r)) else (float(r) - mean) / (std + delta)
            for r in rewards]


# ---------------------------------------------------------------------- an episode's stored credit


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
    rows = store.credit_rows(episode_id)
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
    actions_text = {s.index: s.action for s in store.steps(episode_id, include_prompt=False)}
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
