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
    return ring(padded(grid, outside), r, c)


def padded(grid: list[list[str]], outside: str = "#") -> list[str]:
    """The grid as strings with a border of `outside` around it (so neighbours need no bounds checks)."""
    width = max((len(row) for row in grid), default=0)
    edge = outside * (width + 2)
    return [edge] + [outside + "".join(row).ljust(width, outside) + outside for row in grid] + [edge]


def ring(pad: list[str], r: int, c: int) -> str:
    """The 8 neighbours of grid cell (r, c) read from its padded grid, clockwise from the top-left."""
    up, mid, down = pad[r], pad[r + 1], pad[r + 2]
    return up[c:c + 3] + mid[c + 2] + down[c + 2] + down[c + 1] + down[c] + mid[c]
