"""Trust Evolution as the learner reads it: the last moves of both sides; a round's payoff from the rules."""

from __future__ import annotations

import re
from typing import Optional

from s3gym_tui.providers.learner.readers.base import Decision, Judged, Option, Reader, invalid

MOVES = ("collaborate", "cheat")
_ROUND = re.compile(r"^\s*\d+: (collaborate|cheat) / (collaborate|cheat)\s*$", re.MULTILINE)
_PLAYED = re.compile(r"Round \d+: you (collaborate|cheat), the opponent chose to (collaborate|cheat)")
# the payoffs the rules state: "both collaborate +2; you collaborate and the opponent cheats -1; ..."
PAYOFF = {("collaborate", "collaborate"): 2.0, ("collaborate", "cheat"): -1.0,
          ("cheat", "collaborate"): 3.0, ("cheat", "cheat"): 0.0}


class TrustReader(Reader):
    game = "trust"
    title = "Trust Evolution."
    observation_start = re.compile(r"^Round: \d+ of \d+")
    discount = 0.8  # what the opponent does next rounds is part of what a move earns

    def decisions(self, observation: str) -> list[Decision]:
        rounds = _ROUND.findall(observation)
        you = [a for a, _ in rounds]
        them = [b for _, b in rounds]
        if not rounds:
            fine = middle = "first round"
        else:
            middle = f"you last {you[-1]}, opponent last {them[-1]}"
            fine = (f"{middle}, opponent before {them[-2]}" if len(them) > 1
                    else f"{middle}, opponent before nothing")
        return [Decision(options=tuple(
            Option(move, (fine, middle, "any round"), move) for move in MOVES))]

    def judge(self, before: str, action: str, feedback: str, after: Optional[str]) -> Optional[Judged]:
        if invalid(feedback):
            return Judged(0.0, -1.0)
        played = _PLAYED.search(feedback or "")
        if not played:
            return None
        reward = PAYOFF[(played.group(1), played.group(2))]
        return Judged(reward, reward)
