"""Minesweeper as the learner reads it: a cell's 8 neighbours as shown; a mine or a safe cell as the
uncover reveals it. One uncover also tells what flagging that cell would have been worth, and every cell a
flood opened was safe: that is evidence about options not taken (`more`)."""

from __future__ import annotations

import re
from typing import Optional

from s3gym_tui.providers.learner.evidence import Item
from s3gym_tui.providers.learner.readers.base import Decision, Judged, Option, Reader, invalid
from s3gym_tui.providers.learner.readers.grid import neighbours, padded, ring

_HEADER = re.compile(r"Mines: (\d+)\s+Flags: (\d+)\s+Lives: (\d+)")
_ROW = re.compile(r"^(\d+)  ((?:[?F0-8X] ?)+)$")
_ACTION = re.compile(r"^(uncover|flag|unflag) \(?(\d+),\s*(\d+)\)?$", re.IGNORECASE)
_BOOM = re.compile(r"Boom! \((\d+),(\d+)\) was a mine")
FOUND_MINE, WRONG_FLAG, SAFE_OPEN, MINE_HIT = 0.5, -0.3, 0.1, -1.0  # the learner's judgement


def _grid(observation: str) -> list[list[str]]:
    return [m.group(2).split() for m in (_ROW.match(line) for line in observation.split("\n")) if m]


def _keys(kind: str, around: str, sureness: str) -> tuple[str, ...]:
    """Finest first: the 8 neighbours exactly, what the numbers around say, whether there is a number."""
    return (f"{kind}; around {around}", f"{kind}; {sureness}",
            f"{kind}; {'no number' if sureness == 'no number around' else 'numbers'} around", kind)


class MinesweeperReader(Reader):
    game = "minesweeper"
    title = "Minesweeper."
    observation_start = re.compile(r"^Mines: \d+")
    stated_fallback = False  # a flag's worth is never shown: it is judged from uncovers only

    def decisions(self, observation: str) -> list[Decision]:
        grid = _grid(observation)
        header = _HEADER.search(observation)
        can_flag = header is None or int(header.group(2)) < int(header.group(1))
        pad = padded(grid)
        shares = _shares(grid, pad)
        options = []
        described: dict[tuple[str, str], tuple[tuple[str, ...], tuple[str, ...]]] = {}
        for r, row in enumerate(grid):
            for c, ch in enumerate(row):
                if ch != "?":
                    continue
                seen = _around(grid, r, c, shares, pad)
                keys = described.get(seen)
                if keys is None:
                    keys = described[seen] = (_keys("uncover", *seen), _keys("flag", *seen))
                options.append(Option("uncover", keys[0], f"uncover ({r},{c})"))
                if can_flag:
                    options.append(Option("flag", keys[1], f"flag ({r},{c})"))
        return [Decision(options=tuple(options))]

    def option_of(self, observation: str, action: str) -> Optional[Option]:
        m = _ACTION.match(action.strip())
        grid = _grid(observation)
        if not m or m.group(1).lower() == "unflag":
            return None
        r, c = int(m.group(2)), int(m.group(3))
        if not (0 <= r < len(grid) and 0 <= c < len(grid[r])) or grid[r][c] != "?":
            return None
        kind = m.group(1).lower()
        return Option(kind, _keys(kind, *_around(grid, r, c)), f"{kind} ({r},{c})")

    def judge(self, before: str, action: str, feedback: str, after: Optional[str]) -> Optional[Judged]:
        if invalid(feedback):
            return Judged(0.0, -1.0)
        if action.strip().lower().startswith("flag"):
            return None  # whether a flag was right is not shown
        if _BOOM.search(feedback or ""):
            return Judged(0.0, MINE_HIT)
        if (feedback or "").startswith("Uncovered"):
            return Judged(1.0 if "you win" in feedback else 0.0, SAFE_OPEN)
        return None

    def more(self, before: str, action: str, feedback: str, after: Optional[str],
             ref: Optional[str]) -> list[Item]:
        """What flagging the uncovered cell would have been worth (a mine found, or a flag wasted). Cells a
        flood opened are not counted: a flood opens only safe cells, so they would teach that every cell
        like them is safe."""
        m = _ACTION.match(action.strip())
        if not m or m.group(1).lower() != "uncover":
            return []
        grid = _grid(before)
        r, c = int(m.group(2)), int(m.group(3))
        if not (0 <= r < len(grid) and 0 <= c < len(grid[r])) or grid[r][c] != "?":
            return []
        header = _HEADER.search(before)
        mines = int(header.group(1)) if header else 10
        keys = _keys("flag", *_around(grid, r, c))
        if _BOOM.search(feedback or ""):
            return [Item(keys, "flag", 1.0 / mines, FOUND_MINE, ref)]
        if (feedback or "").startswith("Uncovered"):
            return [Item(keys, "flag", 0.0, WRONG_FLAG, ref)]
        return []


def _shares(grid: list[list[str]], pad: Optional[list[str]] = None) -> dict[tuple[int, int], float]:
    """For each number on the board: its mines not yet accounted for (flags and X around it) per hidden
    cell around it (numbers with no hidden cell around are left out)."""
    pad = pad or padded(grid)
    shares = {}
    for r, row in enumerate(grid):
        for c, ch in enumerate(row):
            if ch.isdigit():
                around = ring(pad, r, c)
                hidden = around.count("?")
                if hidden:
                    left = int(ch) - around.count("F") - around.count("X")
                    shares[(r, c)] = max(0.0, min(1.0, left / hidden))
    return shares


def _around(grid: list[list[str]], r: int, c: int, shares: Optional[dict[tuple[int, int], float]] = None,
            pad: Optional[list[str]] = None) -> tuple[str, str]:
    """(the 8 neighbours as shown, how sure the numbers around are that the cell is a mine: the smallest
    and largest share of the numbers next to it, in quarters)."""
    pad = pad or padded(grid)
    if shares is None:
        shares = _shares(grid, pad)
    around = ring(pad, r, c)
    if around.strip("?#") == "":
        return around, "no number around"
    near = [shares[(r + dr, c + dc)] for dr in (-1, 0, 1) for dc in (-1, 0, 1) if (r + dr, c + dc) in shares]
    if not near:
        return around, "no number around"
    return around, f"numbers say {_quarter(min(near))}-{_quarter(max(near))} mine"


def _quarter(x: float) -> str:
    return f"{round(x * 4) / 4:g}"
