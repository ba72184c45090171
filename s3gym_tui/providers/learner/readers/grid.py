"""Reading character grids out of observation text (the boards of snake, minesweeper, tetris, chess)."""

from __future__ import annotations

import re

_ROW = re.compile(r"^\s*(\d+)\s(.*)$")


def rows_after(text: str, header: re.Pattern, row: re.Pattern = _ROW) -> list[str]:
    """The body of the grid that follows a column-index header line: each row without its label."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        if header.match(line):
            out = []
            for next_line in lines[i + 1:]:
                m = row.match(next_line)
                if not m:
                    break
                out.append(m.group(2))
            return out
    return []


def neighbours(grid: list[list[str]], r: int, c: int, outside: str = "#") -> str:
    """The 8 neighbours of (r, c), clockwise from the top-left ('#' off the board)."""
    out = []
    for dr, dc in ((-1, -1), (-1, 0), (-1, 1), (0, 1), (1, 1), (1, 0), (1, -1), (0, -1)):
        rr, cc = r + dr, c + dc
        out.append(grid[rr][cc] if 0 <= rr < len(grid) and 0 <= cc < len(grid[rr]) else outside)
    return "".join(out)
