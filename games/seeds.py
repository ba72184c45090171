"""The protocol's two disjoint seed ranges: exploration seeds below EVAL_SEED_BASE, evaluation seeds from it."""

from __future__ import annotations

from typing import Literal

Phase = Literal["explore", "eval"]

EXPLORE_SEED_BASE = 0
EVAL_SEED_BASE = 1_000_000  # evaluation seeds are >= this, exploration seeds below it
# the game seeds an adapter draws from when none is asked for, per mode (any seed of the mode's range
# can be asked for: the eval range is open-ended)
DRAWN_SEEDS = {"explore": range(EXPLORE_SEED_BASE, EVAL_SEED_BASE),
               "eval": range(EVAL_SEED_BASE, 2 * EVAL_SEED_BASE)}


def phase_of_seed(seed: int) -> Phase:
    """The phase a seed belongs to: the two ranges are disjoint and fixed for the project."""
    return "eval" if seed >= EVAL_SEED_BASE else "explore"


def require_seed_of(mode: str, seed: int) -> int:
    """The seed, if it belongs to `mode`'s range (eval mode: evaluation seeds only; explore mode, and so
    rollouts and training: exploration seeds only); ValueError naming the range otherwise."""
    seed = int(seed)
    if seed >= EXPLORE_SEED_BASE and phase_of_seed(seed) == mode:
        return seed
    what = ("an evaluation seed" if phase_of_seed(seed) == "eval" else
            "an exploration seed" if seed >= EXPLORE_SEED_BASE else "below every seed range")
    served = (f"seeds from {EVAL_SEED_BASE:,} up" if mode == "eval"
              else f"seeds {EXPLORE_SEED_BASE:,}..{EVAL_SEED_BASE - 1:,}")
    raise ValueError(f"seed {seed} is {what}: {mode} mode plays {served}")
