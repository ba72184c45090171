"""What a game supplies to the learner: how a situation is read from its observation text, its options, and
how an outcome is judged from what the environment showed next (feedback and the next observation)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Callable, Optional

from s3gym_tui.providers.learner.evidence import Item


@dataclass(frozen=True)
class Option:
    """One thing the learner can do at a decision: its label in rules, its situation descriptions (finest
    first: the learner falls back to a coarser one when the finer was never seen) and its part of the answer."""

    label: str
    keys: tuple[str, ...]
    action: str


@dataclass(frozen=True)
class Decision:
    """One choice that makes (part of) the answer. Most games have one per step; chess has one per piece.
    A predictive decision (chess) learns what the world does: its options are the outcomes seen in the same
    situation (`keys`), `make(label)` turns one into its part of the answer, `prior` is the guess without
    evidence and `weight` the reward one right guess earns."""

    name: str = ""
    options: tuple[Option, ...] = ()
    keys: tuple[str, ...] = ()
    prior: str = ""
    make: Optional[Callable[[str], str]] = field(default=None, compare=False)
    weight: float = 1.0


@dataclass(frozen=True)
class Judged:
    """The learner's own judgement of one step: the immediate reward it thinks the step earned (what a
    self-score states) and the utility it ranks choices by (the reward plus what the game's reader counts
    against or for the step, e.g. a collision, an invalid answer, a hole left in a Tetris board)."""

    reward: float
    utility: float


class Reader:
    """Base class: subclasses set `game`, `title` (the start of the game's rules text), `observation_start`
    (a regex for the first line of an observation), and implement `decisions` and `judge`."""

    game: str = ""
    title: str = ""
    observation_start: re.Pattern = re.compile(r"^")
    predictive = False
    prior_reward = 0.0  # the self-score stated without evidence
    stated_fallback = True  # where an outcome cannot be judged, the stated self-score stands
    discount = 0.0  # a step's utility also counts the utility of the steps after it, discounted by this

    # ----- reading -----------------------------------------------------------------------------------
    def matches(self, rules: str) -> bool:
        return rules.startswith(self.title)

    def split_env(self, env: str) -> tuple[str, str]:
        """(feedback, observation) of an `Env:` text: the feedback of the step before comes first."""
        lines = env.split("\n")
        for i, line in enumerate(lines):
            if self.observation_start.match(line):
                return "\n".join(lines[:i]).strip(), "\n".join(lines[i:])
        return env.strip(), ""

    def decisions(self, observation: str) -> list[Decision]:
        raise NotImplementedError

    def compose(self, chosen: list[tuple[Decision, str]]) -> str:
        """The answer from the chosen option of each decision (one decision: its action)."""
        return chosen[0][1] if chosen else "END"

    @staticmethod
    def normal(action: str) -> str:
        return " ".join(str(action).lower().replace("(", " ").replace(")", " ").replace(",", " ").split())

    def option_of(self, observation: str, action: str) -> Optional[Option]:
        """The option an action took in a state (None: not one the learner knows)."""
        wanted = self.normal(action)
        for decision in self.decisions(observation)[:1]:
            for option in decision.options:
                if self.normal(option.action) == wanted:
                    return option
        return None

    # ----- judging -----------------------------------------------------------------------------------
    def judge(self, before: str, action: str, feedback: str, after: Optional[str]) -> Optional[Judged]:
        raise NotImplementedError

    def more(self, before: str, action: str, feedback: str, after: Optional[str],
             ref: Optional[str]) -> list[Item]:
        """Evidence beyond the option taken (what the step showed about options not taken)."""
        return []

    def experience(self, before: str, action: str, feedback: str, after: Optional[str],
                   stated: Optional[float], oracle: Optional[float],
                   ref: Optional[str]) -> tuple[Optional[Item], list[Item]]:
        """(the option taken with its judged outcome, evidence about options not taken) for one remembered
        step. The outcome is judged from the feedback and next observation; where that cannot be judged, the
        stated self-score stands; the verifier's reward is used only where the prompt shows it (the
        oracle-feedback ablation)."""
        option = self.option_of(before, action)
        main: Optional[Item] = None
        if option is not None:
            judged = self.judge(before, action, feedback, after) if feedback or after else None
            if oracle is not None:
                extra = judged.utility - judged.reward if judged else 0.0
                judged = Judged(oracle, oracle + extra)
            elif judged is None and stated is not None and self.stated_fallback:
                judged = Judged(stated, stated)
            if judged is not None:
                main = Item(option.keys, option.label, judged.reward, judged.utility, ref)
        more = self.more(before, action, feedback, after, ref) if feedback or after else []
        return main, more


INVALID = re.compile(r"^Invalid (action|combination)", re.IGNORECASE)


def invalid(feedback: str) -> bool:
    return bool(INVALID.match(feedback or ""))
