"""A credit weight drawn as a bar around 1: the uniform-credit line (w = 1, what plain GRPO gives every
action) in the middle, the bar growing right (more credit) or left (less) to the bounds 1 ± eps_w.

Rich only (no Textual): the credit view draws it in a table cell, and a CLI may print it."""

from __future__ import annotations

import math
from typing import Optional

from rich.text import Text

UNIFORM_MARK = "│"  # the uniform-credit line, at w = 1
MORE, LESS = "█", "█"
NUDGE_MORE, NUDGE_LESS = "▌", "▐"  # less than half a cell off 1: a half block against the line
EMPTY = "·"
UNDEFINED = "—"
# neither colour says good or bad: with A < 0 more weight is more blame
MORE_STYLE, LESS_STYLE, LINE_STYLE, EMPTY_STYLE = "cyan", "magenta", "bold", "dim"


def bar_cells(weight: Optional[float], eps_w: Optional[float], width: int) -> Optional[int]:
    """How many cells the bar of `weight` fills from the uniform line: positive to the right (w > 1),
    negative to the left, within ±(width // 2); 0 also for an offset under half a cell (weight_bar
    draws that as a half block). None when the weight or the bound is undefined."""
    if weight is None or eps_w is None or not math.isfinite(weight) or not math.isfinite(eps_w):
        return None
    half = max(1, width // 2)
    off = weight - 1.0
    if eps_w <= 0 or off == 0:
        return 0
    cells = min(half, math.floor(abs(off) / eps_w * half + 0.5))  # half up, not to even
    return cells if off > 0 else -cells


def weight_bar(weight: Optional[float], eps_w: Optional[float], width: int = 11) -> Text:
    """The bar of `weight` in `width` cells (odd widths keep the uniform line centred); "—" centred
    when the weight is undefined (never a bar at 0 or at 1)."""
    width = max(3, width | 1)
    half = width // 2
    cells = bar_cells(weight, eps_w, width)
    if cells is None:
        return Text(UNDEFINED.center(width), style=EMPTY_STYLE)
    off = weight - 1.0
    text = Text()
    for i in range(-half, half + 1):
        if cells == 0 and off != 0 and i == (1 if off > 0 else -1):  # off 1, by less than half a cell
            text.append(NUDGE_MORE if off > 0 else NUDGE_LESS, style=MORE_STYLE if off > 0 else LESS_STYLE)
        elif i == 0:
            text.append(UNIFORM_MARK, style=LINE_STYLE)
        elif cells < 0 and cells <= i < 0:
            text.append(LESS, style=LESS_STYLE)
        elif cells > 0 and 0 < i <= cells:
            text.append(MORE, style=MORE_STYLE)
        else:
            text.append(EMPTY, style=EMPTY_STYLE)
    return text


def bar_header(eps_w: Optional[float], width: int = 11) -> str:
    """The column label of the bars: the bounds and the uniform line, e.g. "0.5 ‹ 1 › 1.5"."""
    width = max(3, width | 1)
    if eps_w is None or not math.isfinite(eps_w):
        return "w (around 1)".center(width)[:width]
    low, high = f"{1 - eps_w:g}", f"{1 + eps_w:g}"
    middle = "1"
    gap = width - len(low) - len(high) - len(middle)
    if gap < 2:
        return f"w ±{eps_w:g}".center(width)[:width]
    left = gap // 2
    return f"{low}{' ' * left}{middle}{' ' * (gap - left)}{high}"
