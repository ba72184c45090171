"""Snake as the learner reads it: what lies ahead of each move, and whether it brings the head nearer an apple."""

from __future__ import annotations

import re
from typing import Optional

from s3gym_tui.providers.learner.readers.base import Decision, Judged, Option, Reader, invalid

MOVES = {"UP": (-1, 0), "DOWN": (1, 0), "LEFT": (0, -1), "RIGHT": (0, 1)}
OPPOSITE = {"UP": "DOWN", "DOWN": "UP", "LEFT": "RIGHT", "RIGHT": "LEFT"}
_HEAD = re.compile(r"Direction: (UP|DOWN|LEFT|RIGHT)")
_ROW = re.compile(r"^\s*\d+ ([#.HSAX]+)$")
NAMES = {"#": "wall", "X": "obstacle", "S": "body", "A": "apple", ".": "empty", "H": "head"}


def _grid(observation: str) -> list[str]:
    return [m.group(1) for m in (_ROW.match(line) for line in observation.split("\n")) if m]


def _cell(grid: list[str], r: int, c: int) -> str:
    return grid[r][c] if 0 <= r < len(grid) and 0 <= c < len(grid[r]) else "#"


class SnakeReader(Reader):
    game = "snake"
    title = "Snake."
    observation_start = re.compile(r"^Step: \d+ of \d+")
    discount = 0.8  # an apple eaten credits the moves that led to it

    def decisions(self, observation: str) -> list[Decision]:
        grid = _grid(observation)
        head = next(((r, row.index("H")) for r, row in enumerate(grid) if "H" in row), None)
        facing = _HEAD.search(observation)
        if head is None:
            return [Decision(options=tuple(Option("move", ("into unknown",), m) for m in MOVES))]
        apples = [(r, c) for r, row in enumerate(grid) for c, ch in enumerate(row) if ch == "A"]
        options = []
        for move, (dr, dc) in MOVES.items():
            r, c = head[0] + dr, head[1] + dc
            if facing and OPPOSITE[facing.group(1)] == move:
                continue  # reversing is not a legal move (the rules say so)
            ahead = _cell(grid, r, c)
            beyond = _cell(grid, r + dr, c + dc)
            near = _nearer(head, (r, c), apples)
            into = NAMES.get(ahead, ahead)
            options.append(Option("move", (f"into {into}, then {NAMES.get(beyond, beyond)}, apple {near}",
                                         f"into {into}, apple {near}", f"into {into}"), move))
        return [Decision(options=tuple(options))]

    def judge(self, before: str, action: str, feedback: str, after: Optional[str]) -> Optional[Judged]:
        text = feedback or ""
        if invalid(text) or "collision" in text:
            return Judged(0.0, -1.0)
        if "ate an apple" in text:
            return Judged(1.0, 1.0)
        if text.startswith("Moved"):
            return Judged(0.0, 0.0)
        return None


def _nearer(head: tuple[int, int], to: tuple[int, int], apples: list[tuple[int, int]]) -> str:
    if not apples:
        return "none"
    before = min(abs(head[0] - a) + abs(head[1] - b) for a, b in apples)
    after = min(abs(to[0] - a) + abs(to[1] - b) for a, b in apples)
    return "nearer" if after < before else ("farther" if after > before else "same")
