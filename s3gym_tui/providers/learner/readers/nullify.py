"""Nullify as the learner reads it: what kinds of units a pair combines and what the rules' arithmetic says
the combination would leave (a cancellation, a number whose opposite is on the board, nothing useful, or
something the rules forbid); a step judged by what it removed from the board."""

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


def _apply(op: str, x: Fraction) -> Optional[Fraction]:
    """The rules' arithmetic: an operator applied to a number (None where the rules forbid it)."""
    try:
        if op[:1] in "*/":
            k = Fraction(op[1:])
            return x * k if op[0] == "*" else (x / k if k else None)
        if op == "square":
            return x * x
        if op == "reciprocal":
            return 1 / x if x else None
        if op == "floor":
            return Fraction(x.numerator // x.denominator)
        if op == "ceil":
            return Fraction(-((-x.numerator) // x.denominator))
        if op == "sqrt":
            if x < 0:
                return None
            root = [Fraction(int(round(v ** 0.5))) for v in (x.numerator, x.denominator)]
            return root[0] / root[1] if root[0] ** 2 == x.numerator and root[1] ** 2 == x.denominator else None
    except (ValueError, ZeroDivisionError, OverflowError):
        return None
    return None


def _relation(a: str, b: str, rest: list[str]) -> str:
    """What combining two units would do, by the rules' arithmetic: cancel, leave a number whose opposite
    is on the board (`rest`: the other units), or neither; an operator pair or a forbidden operation
    is 'not allowed'."""
    x, y = _number(a), _number(b)
    if x is None and y is None:
        return "not allowed"
    if x is not None and y is not None:
        result: Optional[Fraction] = x + y
        if result == 0:
            return "cancel"
    else:
        value, op = (x, b) if x is not None else (y, a)
        result = _apply(op, value)
        if result is None:
            return "not allowed"
    if result == 0:
        return "makes zero"
    others = {_number(u) for u in rest}
    return "makes an opposite" if -result in others else "no match"


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
                relation = _relation(a, b, board[:i] + board[i + 1:j] + board[j + 1:])
                if relation == "not allowed":
                    continue  # the rules forbid it: not a legal move
                options.append(Option("combine", (f"{a} with {b}", f"{ka} with {kb}, {relation}", relation),
                                      f"{i} {j}"))
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
