"""Stored credit for the credit view's tests, on the deterministic analysis database: one PI extraction
for the Trust evaluation group of seed 1000000 (the four evaluation episodes of that seed: x=0 and x=3
of the History and Summary runs), with evidence in the successful siblings, and credit computed with
the engine's own `taspo_weights` from fixed token shifts for the History x=3 episode (the one a person
steered; score 16, the group's worst) and the Summary x=3 episode. The other episodes have no credit.
Written through the store's credit API, as the engine writes it."""

from __future__ import annotations

from s3gym_tui.engine.credit import group_advantages, taspo_weights
from tests.ui.analysis_data import DIVERGING_HISTORY, DIVERGING_SUMMARY

SEED = 1_000_000
GROUP = ("trust-history-demo-c000-e0", DIVERGING_HISTORY, "trust-summary-demo-c000-e0", DIVERGING_SUMMARY)
REWARDS = {"trust-history-demo-c000-e0": 17.0, DIVERGING_HISTORY: 16.0, "trust-summary-demo-c000-e0": 17.0,
           DIVERGING_SUMMARY: 17.0}
SUCCESSFUL = ("trust-history-demo-c000-e0", "trust-summary-demo-c000-e0", DIVERGING_SUMMARY)
EPS_W, KAPPA, TAU = 0.5, 0.05, 1.0
ITEMS = (
    {"requirement": "Answer a cheat with a cheat", "condition": "the opponent cheated in the last round",
     "cues": ["cheat"], "evidence": [(DIVERGING_SUMMARY, 2), ("trust-summary-demo-c000-e0", 2)]},
    {"requirement": "Open with collaboration", "condition": "the first round, nothing played yet",
     "cues": ["round 1"], "evidence": [("trust-history-demo-c000-e0", 0)]},
)
# per step of the target: (token shifts of the action with P_i, aligned item positions); None: no PI
SHIFTS = {
    DIVERGING_HISTORY: {0: ([0.2, 0.4], [1]), 2: ([-0.9, -0.7], [0]), 3: ([0.1, 0.3], [0]), 5: ([0.02], [0])},
    DIVERGING_SUMMARY: {0: ([0.3], [1]), 2: ([0.8, 0.6], [0]), 4: ([0.0, 0.2], [0])},
}
# what the view must show for DIVERGING_HISTORY's step 2: its aligned item's two evidence links
STEP_WITH_EVIDENCE = 2


def add_credit(store, episode_id: str, extraction_id: str) -> list[float]:
    """Store credit for `episode_id` (SHIFTS) from `extraction_id`; returns the weights per step."""
    steps = store.episodes.steps(episode_id, include_prompt=False)
    advantages = dict(zip(GROUP, group_advantages([REWARDS[e] for e in GROUP])))
    plan = SHIFTS[episode_id]
    shifts = [plan[s.index][0] if s.index in plan else None for s in steps]
    weights = taspo_weights(advantages[episode_id], shifts, kappa=KAPPA, tau=TAU, eps_w=EPS_W)
    actions = []
    for step, w, tokens in zip(steps, weights, shifts):
        kept = None if tokens is None else [x if abs(x) >= KAPPA else 0.0 for x in tokens]
        shift = None if kept is None else sum(kept) / len(kept)
        items = [f"{extraction_id}.{p}" for p in plan[step.index][1]] if step.index in plan else []
        actions.append((step.index, w, shift, items))
    store.credit.add_episode_credit(episode_id, extraction_id=extraction_id, advantage=advantages[episode_id],
                                    reward=REWARDS[episode_id], group_ids=GROUP, analyzer="scripted/trust",
                                    scorer="local/tiny-scorer", credit="action", kappa=KAPPA, tau=TAU, eps_w=EPS_W,
                                    actions=actions, note="PI from the successful siblings of seed 1000000")
    return weights


def add_group_credit(store, items=ITEMS) -> dict[str, list[float]]:
    """The extraction and the credit of both x=3 episodes; returns their weights by episode."""
    extraction = store.credit.add_pi_extraction(
        game="trust", mode="eval", seed=SEED, episode_ids=GROUP, successful_ids=SUCCESSFUL,
        success_rule="verifier", analyzer="scripted/trust", prompt="(the analyzer's prompt)",
        reply="(the analyzer's reply)", items=items)
    return {e: add_credit(store, e, extraction) for e in (DIVERGING_HISTORY, DIVERGING_SUMMARY)}
