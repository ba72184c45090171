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

This module (torch-free, Textual-free) gathers the math (credit_math.py), the data types of an
episode's stored credit and their loader (credit_types.py), and `compute_credit` (credit_compute.py:
siblings, PI, scoring; imported when called).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from s3gym_tui.engine.credit_math import (CREDIT_MODES, DEFAULT_DELTA, DEFAULT_EPS_W, DEFAULT_KAPPA,  # noqa: F401
                                          DEFAULT_TAU, Shifts, action_shifts, group_advantages, phi,
                                          taspo_weights, token_weights)
from s3gym_tui.engine.credit_types import (ActionCredit, EpisodeCredit, PiItem, credit_from_rows,  # noqa: F401
                                           episode_credit)

if TYPE_CHECKING:  # pragma: no cover
    from s3gym_tui.store.store import Store

Progress = Callable[[Optional[int], Optional[int], str], None]  # (done, total, what)


def compute_credit(store: "Store", episode_id: str, *, scorer: Optional[str] = None,
                   progress: Optional[Progress] = None, **settings: Any) -> EpisodeCredit:
    """Compute, store and return an episode's credit (engine/credit_compute.py). `progress(done, total,
    what)` hears each stage (and may raise to cancel: nothing of the credit is stored then); other
    keywords are CreditSettings fields (analyzer, kappa, tau, eps_w, credit, success_rule, source)."""
    from s3gym_tui.engine.credit_compute import CreditSettings, compute_credit as compute

    if progress is None:
        return compute(store, episode_id, CreditSettings(scorer=scorer, **settings))
    return compute(store, episode_id, CreditSettings(scorer=scorer, **settings), progress=progress,
                   say=lambda line: progress(None, None, line))


__all__ = ["ActionCredit", "CREDIT_MODES", "EpisodeCredit", "PiItem", "action_shifts", "compute_credit",
           "episode_credit", "group_advantages", "phi", "taspo_weights", "token_weights"]
