"""Tetris as the learner reads it: the piece, its rotation and the shape of the surface under it (whether its
bottom fits the surface, how high up it lands); a drop judged by the rows it cleared and the holes and height
it left (the feedback and the next board show both)."""

from __future__ import annotations

import re
from typing import Optional

from s3gym_tui.providers.learner.readers.base import Decision, Judged, Option, Reader, invalid

_SIZE = re.compile(r"Board \((\d+) columns x (\d+) rows")
_ROW = re.compile(r"^\s*\|([.* ]+)\|$")
_PIECE = re.compile(r"^Current piece: ([IOTSZJL])")
_CLEARED = re.compile(r"dropped at column \d+: (no row|\d+ rows?) cleared")
HOLE, HEIGHT, TOP_OUT = -0.3, -0.2, -2.0  # the learner's judgement of a drop, besides the rows it cleared


def board(observation: str) -> list[str]:
    return [m.group(1).replace(" ", "") for m in (_ROW.match(line) for line in observation.split("\n")) if m]


def heights(rows: list[str]) -> list[int]:
    width = len(rows[0]) if rows else 0
    out = []
    for c in range(width):
        top = next((r for r, row in enumerate(rows) if row[c] == "*"), len(rows))
        out.append(len(rows) - top)
    return out


def holes(rows: list[str]) -> int:
    count = 0
    for c in range(len(rows[0]) if rows else 0):
        seen = False
        for row in rows:
            if row[c] == "*":
                seen = True
            elif seen:
                count += 1
    return count


def shapes(observation: str) -> dict[int, tuple[list[str], int, int]]:
    """rotation -> (rows of the drawn piece, first column, last column) from the four drawings."""
    lines = observation.split("\n")
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("rotation 0:")), None)
    if start is None:
        return {}
    header = lines[start]
    cols = [m.start() for m in re.finditer(r"rotation", header)]
    rots = [int(x) for x in re.findall(r"rotation (\d+):", header)]
    drawn: dict[int, list[str]] = {r: [] for r in rots}
    ranges: dict[int, tuple[int, int]] = {}
    for line in lines[start + 1:]:
        if "columns" in line:
            for k, m in enumerate(re.finditer(r"columns (\d+)-(\d+)", line)):
                if k < len(rots):
                    ranges[rots[k]] = (int(m.group(1)), int(m.group(2)))
            break
        for k, rot in enumerate(rots):
            piece = line[cols[k]:cols[k + 1] if k + 1 < len(cols) else None].rstrip()
            if piece.strip():
                drawn[rot].append(piece.replace(" ", ""))
    return {rot: (drawn[rot], *ranges[rot]) for rot in rots if rot in ranges and drawn[rot]}


def _profile(piece: list[str]) -> list[int]:
    """For each column of the piece, how far its lowest cell sits above the piece's bottom row."""
    width = max(len(r) for r in piece)
    out = []
    for c in range(width):
        low = max((i for i, row in enumerate(piece) if c < len(row) and row[c] == "*"), default=None)
        out.append(len(piece) - 1 - low if low is not None else 0)
    return out


class TetrisReader(Reader):
    game = "tetris"
    title = "Tetris on a board"
    observation_start = re.compile(r"^Board \(\d+ columns")
    discount = 0.3

    def decisions(self, observation: str) -> list[Decision]:
        rows = board(observation)
        letter = next((m.group(1) for m in (_PIECE.match(l) for l in observation.split("\n")) if m), "?")
        h = heights(rows)
        options = []
        for rot, (drawn, lo, hi) in sorted(shapes(observation).items()):
            profile = _profile(drawn)
            for col in range(lo, hi + 1):
                under = [h[col - 1 + j] + profile[j] if col - 1 + j < len(h) else 0 for j in range(len(profile))]
                base = min(under)
                contour = "".join(str(min(3, u - base)) for u in under)
                wall = ("left wall" if col == 1 else "") + ("right wall" if col + len(profile) - 1 == len(h) else "")
                rise = min(h[col - 1:col - 1 + len(profile)] or [0]) - min(h or [0])
                level = "at the bottom" if rise == 0 else ("a little up" if rise <= 2 else "high up")
                fits = "fits the surface" if set(contour) == {"0"} else "leaves gaps"
                options.append(Option("drop", (
                    f"{letter} {rot} on {contour} {wall or 'open'} {level}", f"{letter} {rot} on {contour}",
                    f"{fits}, {level}", "any drop"), f"{col} {rot}"))
        return [Decision(options=tuple(options))]

    def judge(self, before: str, action: str, feedback: str, after: Optional[str]) -> Optional[Judged]:
        if invalid(feedback):
            return Judged(0.0, -1.0)
        if (feedback or "").startswith("Top-out"):
            return Judged(0.0, TOP_OUT)
        cleared = _CLEARED.search(feedback or "")
        if not cleared:
            return None
        rows = 0 if cleared.group(1) == "no row" else int(cleared.group(1).split()[0])
        if not after:
            return Judged(float(rows), float(rows))
        new_holes = max(0, holes(board(after)) - holes(board(before)))
        rise = max(0, max(heights(board(after)) or [0]) - max(heights(board(before)) or [0]))
        return Judged(float(rows), rows + HOLE * new_holes + HEIGHT * rise)
