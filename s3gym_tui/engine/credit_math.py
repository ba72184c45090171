"""The TASPO weights as pure functions (see engine/credit.py for the method and its formulas): phi, the
per-action shift d_it, the action-level and token-level weights, the group's outcome advantages."""

from __future__ import annotations

import math
from typing import Optional, Sequence

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
