"""Nullify as the learner reads it: what kinds of units a pair combines (and whether two numbers cancel);
a step judged by what it removed from the board."""

from __future__ import annotations

import re
from fractions import Fraction
from typing import Optional

from s3gym_tui.providers.learner.readers.base import Decision, Judged, Option, Reader, invalid

_UNIT = re.compile(r"^(\d+): (\S+)$")
CANCEL, COMBINE, DEAD_END = 0.3, 0.1, -1.0


def units(observation: str) -> list[str]:
    return [m.group(2) for m in (_UNIT.match(line.strip()) for line in observation.split("\n")) if m]


def _number(unit: str) -> Optional[Fraction]:
    try:
        return Fraction(unit)
    except (ValueError, ZeroDivisionError):
        return None


def kind(unit: str) -> str:
    value = _number(unit)
    if value is None:
        if unit[:1] in "*/":
            k = _number(unit[1:])
            return f"{unit[0]}{'negative' if k is not None and k < 0 else 'positive'}"
        return unit
    sign = "zero" if value == 0 else ("positive" if value > 0 else "negative")
    return f"{sign} {'integer' if value.denominator == 1 else 'fraction'}"


def _relation(a: str, b: str) -> str:
    x, y = _number(a), _number(b)
    if x is not None and y is not None:
        return "cancel" if x + y == 0 else "no cancel"
    if x is None and y is None:
        return "two operators"
    value = x if x is not None else y
    return "on zero" if value == 0 else ("on negative" if value < 0 else "on positive")


class NullifyReader(Reader):
    game = "nullify"
    title = "Nullify."
    observation_start = re.compile(r"^\d+: \S+$")
    discount = 0.5

    def decisions(self, observation: str) -> list[Decision]:
        board = units(observation)
        options = []
        for i in range(len(board)):
            for j in range(i + 1, len(board)):
                a, b = sorted((board[i], board[j]))
                ka, kb = sorted((kind(a), kind(b)))
                coarse = sorted("number" if _number(u) is not None else "operator" for u in (a, b))
                options.append(Option("combine", (f"{a} with {b}", f"{ka} with {kb}, {_relation(a, b)}",
                                                  f"{coarse[0]} with {coarse[1]}"), f"{i} {j}"))
        return [Decision(options=tuple(options))]

    def option_of(self, observation: str, action: str) -> Optional[Option]:
        found = re.findall(r"-?\d+", action)
        if len(found) != 2:
            return None
        i, j = sorted(int(x) for x in found)
        for option in self.decisions(observation)[0].options:
            if option.action == f"{i} {j}":
                return option
        return None

    def judge(self, before: str, action: str, feedback: str, after: Optional[str]) -> Optional[Judged]:
        text = feedback or ""
        if invalid(text):
            return Judged(0.0, -1.0)
        if "solved" in text:
            return Judged(1.0, 1.0)
        if "No legal combination remains" in text:
            return Judged(0.0, DEAD_END)
        if "cancelled out" in text:
            return Judged(0.0, CANCEL)
        if " gave " in text:
            return Judged(0.0, COMBINE)
        return None
