"""The goal set: vague capability goals, each with a hidden suite (games, held-out seeds, weights).

The suite is the controller's alone: no prompt, tool result or stored decision names it (audit.py
checks that), and the source does not either: a run's suite plays its goal's games on seeds drawn
from its store's secret (HiddenSuite.drawn; the fixed seeds below are those of the runs stored before
stores had one). The explicit-goal control names the suite's games and metric instead of the vague
text (the same budget), which measures what vagueness costs.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass, replace

from s3gym_tui.models import EVAL_SEED_BASE

# Held-out evaluation seeds of the hidden suites: far above the seeds s3gym's own runs evaluate on
# (EVAL_SEED_BASE + small j), so an agent that saw ordinary runs has not seen these.
SUITE_SEED_BASE = EVAL_SEED_BASE + 424_000
SEED_SLOT = 10  # a drawn suite game's seeds: seed_base .. seed_base + episodes - 1, in a slot of its own
SEED_SLOTS = 10 ** 8  # drawn seed bases: SUITE_SEED_BASE + SEED_SLOT * k, k < SEED_SLOTS (all < 2 ** 31)
FIXED_SLOTS = 1_000  # the slots k of the fixed seeds below (offset * 10 + i): never drawn


@dataclass(frozen=True)
class SuiteGame:
    game: str
    seed_base: int  # held-out: episodes on seed_base, seed_base + 1, ... (all >= EVAL_SEED_BASE)
    episodes: int
    weight: float


@dataclass(frozen=True)
class HiddenSuite:
    name: str
    games: tuple[SuiteGame, ...]

    def seeds(self) -> list[int]:
        return [g.seed_base + j for g in self.games for j in range(g.episodes)]

    def drawn(self, secret: str, key: str) -> "HiddenSuite":
        """The same games, episodes and weights on held-out seeds drawn from `secret` (a store's) and
        `key` (the goal's id: each goal its own seeds): derivable only with the secret. Every game
        gets a slot of its own (a collision draws again), so no seed serves two games, and none is a
        seed the source names."""
        taken: set[int] = set()
        parts = []
        for i, part in enumerate(self.games):
            if part.episodes > SEED_SLOT:
                raise ValueError(f"a suite game plays at most {SEED_SLOT} episodes")
            attempt = 0
            while True:
                digest = hmac.new(secret.encode(), f"{key}/{i}/{attempt}".encode(), hashlib.sha256).digest()
                slot = FIXED_SLOTS + int.from_bytes(digest[:8], "big") % (SEED_SLOTS - FIXED_SLOTS)
                if slot not in taken:
                    break
                attempt += 1
            taken.add(slot)
            parts.append(replace(part, seed_base=SUITE_SEED_BASE + SEED_SLOT * slot))
        return HiddenSuite(self.name, tuple(parts))


@dataclass(frozen=True)
class Goal:
    id: str
    text: str  # the vague goal the agent gets
    suite: HiddenSuite

    def explicit_text(self) -> str:
        """The explicit-goal control: the suite's games and metric named (never its seeds)."""
        names = ", ".join(f"{g.game} (weight {g.weight:g})" for g in self.suite.games)
        return (f"{self.text} Concretely: you will be judged on the games {names}, by the weighted mean "
                f"of each game's final verifier score scaled to 0..1 by the game's score range, in "
                f"evaluation mode on held-out seeds.")


def _suite(name: str, offset: int, *games: tuple[str, int, float]) -> HiddenSuite:
    """A suite on fixed seeds: what ASPIRE runs stored before schema 15 were judged on (and still are:
    aspire_runs.suite = 'fixed'); every later run plays its games on seeds drawn from its store's secret."""
    return HiddenSuite(name, tuple(SuiteGame(g, SUITE_SEED_BASE + offset * 100 + i * 10, n, w)
                                   for i, (g, n, w) in enumerate(games)))


GOALS: tuple[Goal, ...] = (
    Goal("rules", "Become better at working out rules nobody told you.",
         _suite("suite-hidden-rules", 1, ("nullify", 2, 1.0), ("minesweeper", 2, 1.0))),
    Goal("uncertainty", "Become better at planning when you cannot see everything.",
         _suite("suite-uncertainty", 2, ("minesweeper", 2, 1.0), ("tetris", 2, 0.5))),
    Goal("cooperation", "Become better at working with a partner you do not know.",
         _suite("suite-cooperation", 3, ("trust", 3, 1.0))),
    Goal("arithmetic", "Become better at planning with numbers.",
         _suite("suite-arithmetic", 4, ("nullify", 2, 1.0), ("pvz", 1, 0.5))),
    Goal("reactive", "Become better at fast reactions to a changing world.",
         _suite("suite-reactive", 5, ("snake", 2, 1.0), ("tetris", 1, 0.5))),
    Goal("self-judgement", "Become better at judging your own moves.",
         _suite("suite-self-judgement", 6, ("chess", 2, 1.0), ("trust", 2, 0.5))),
    Goal("long-horizon", "Become better at plans that pay off late.",
         _suite("suite-long-horizon", 7, ("pvz", 1, 1.0), ("chess", 2, 0.5))),
)


def goal_by_id(goal_id: str, goals: tuple[Goal, ...] = GOALS) -> Goal:
    for goal in goals:
        if goal.id == goal_id:
            return goal
    raise KeyError(goal_id)


def goal_for_text(text: str, goals: tuple[Goal, ...] = GOALS) -> Goal:
    """A free-text goal: the goal set's goal with that text, else the one sharing most words with it
    (every run is judged on a suite of the set)."""
    low = text.strip().lower()
    for goal in goals:
        if goal.text.lower() == low or goal.id == low:
            return goal
    words = set(low.replace(".", " ").split())
    return max(goals, key=lambda g: len(words & set(g.text.lower().replace(".", " ").split())))
