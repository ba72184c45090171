"""Where the play screen's board goes and how big it is: one pure function of the sizes."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from s3gym_tui.widgets.board import PANEL_CHROME

AGENT_MIN_WIDTH = 44  # wide: the agent panel keeps at least this much beside the board
BOARD_MIN_COLUMN = 40  # wide: the board's column is never narrower than this
BOARD_SHARE = (0.38, 0.72)  # wide: the board's column, as a share of the width, at least and at most
STEPS_MIN_WIDTH = 36  # narrow and short, board beside: what the steps table keeps (#, s, r, mark, an action)
STEPS_MIN_ROWS = 5  # narrow and short, board on top: the steps table's border, header and two rows
BOARD_CHROME_ROWS = 2  # the board panel's border
CHROME_ROWS = 3  # under the panels: the status line and two footer lines


@dataclass(frozen=True)
class BoardRoom:
    """What the board's placement depends on: the terminal, the screen's size classes (-narrow,
    -short: app.py's breakpoints), and the board's own measures (outer widths, lines at a width)."""

    width: int
    height: int
    narrow: bool
    short: bool
    shown: bool = True  # the board is displayed and has a game to draw
    natural: int = 0  # wide: the width the board would like (its longest line, with its chrome)
    narrowest: int = 0  # narrow and short: the least width it can be drawn at whole (0: none)
    stacked_lines: int = 0  # its lines drawn across the whole width
    beside_lines: int = 0  # its lines drawn at its narrowest
    scrollbar: int = 0  # the width of its vertical scrollbar


@dataclass(frozen=True)
class BoardPlacement:
    """The board's place: the body's grid columns (None: the stylesheet's), the board panel's outer
    width, the width its content is drawn at, beside the steps or not, and a cap on its rows."""

    columns: Optional[str]
    outer_width: int
    draw_width: int
    beside: bool = False
    max_height: Optional[int] = None


def place_board(room: BoardRoom) -> BoardPlacement:
    """Wide: the board's column takes the width it needs, within BOARD_SHARE of the screen and leaving
    the agent panel usable. Narrow: the board spans the width (the stylesheet lays out the panels).
    Narrow and short (80x24): the board and the steps share the screen, the board on top (its rows
    capped to leave the steps a few) unless beside the steps at its narrowest shows more of it (chess:
    the large board is taller than the room above a steps table)."""
    width, height = room.width, room.height
    if not room.narrow:
        low, high = BOARD_SHARE
        column = max(BOARD_MIN_COLUMN, int(width * low), min(room.natural, width - AGENT_MIN_WIDTH, int(width * high)))
        return BoardPlacement(f"{column} 1fr", column, column - PANEL_CHROME)
    on_top = BoardPlacement(None, width, width - PANEL_CHROME)
    if not room.short:
        return on_top
    capped = BoardPlacement(None, width, width - PANEL_CHROME, max_height=max(3, height - CHROME_ROWS - STEPS_MIN_ROWS))
    if not room.shown or not room.narrowest or room.narrowest + STEPS_MIN_WIDTH > width:
        return capped
    rows = height - CHROME_ROWS - BOARD_CHROME_ROWS
    shown_on_top = min(room.stacked_lines, rows - STEPS_MIN_ROWS) / max(1, room.stacked_lines)
    shown_beside = min(room.beside_lines, rows) / max(1, room.beside_lines)
    if shown_beside <= shown_on_top:
        return capped
    beside = room.narrowest + (room.scrollbar if room.beside_lines > rows else 0)
    return BoardPlacement(f"{beside} 1fr", beside, beside - PANEL_CHROME, beside=True)
