"""Tetris: choose a column and rotation for each falling tetromino; full rows clear and score."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from rich.console import Group
from rich.text import Text

from s3gym_games.base import Game, Outcome
from s3gym_games.layout import Beside, Tiles

PIECES = ("I", "O", "T", "S", "Z", "J", "L")
ROTATIONS = (0, 90, 180, 270)

# Spawn orientations (rotation 0), SRS-like, drawn top row first. Every rotation is the previous
# one turned 90 degrees clockwise and normalised to its bounding box (its top-left corner is the
# top-left corner of the box), so "column" always means the box's leftmost column.
SPAWN = {
    "I": ("####",),
    "O": ("##", "##"),
    "T": (".#.", "###"),
    "S": (".##", "##."),
    "Z": ("##.", ".##"),
    "J": ("#..", "###"),
    "L": ("..#", "###"),
}
PIECE_STYLE = {"I": "cyan", "O": "yellow", "T": "magenta", "S": "green", "Z": "red", "J": "blue",
               "L": "dark_orange"}


def _rotate_cw(rows: tuple[str, ...]) -> tuple[str, ...]:
    h, w = len(rows), len(rows[0])
    return tuple("".join(rows[h - 1 - c][r] for c in range(h)) for r in range(w))


@dataclass(frozen=True)
class Shape:
    """One rotation of a piece: `rows` top to bottom as bit masks (bit c = column c from the left)."""

    piece: str
    rotation: int
    drawing: tuple[str, ...]  # '#' filled, '.' empty, top row first
    rows: tuple[int, ...]
    height: int
    width: int
    bottoms: tuple[int, ...]  # per column of the shape, the row of its lowest cell


def _build_shapes() -> dict[str, tuple[Shape, ...]]:
    shapes: dict[str, tuple[Shape, ...]] = {}
    for piece in PIECES:
        drawing = SPAWN[piece]
        rotations = []
        for rotation in ROTATIONS:
            masks = tuple(sum(1 << c for c, ch in enumerate(row) if ch == "#") for row in drawing)
            bottoms = tuple(max(r for r, row in enumerate(drawing) if row[c] == "#")
                            for c in range(len(drawing[0])))
            rotations.append(Shape(piece, rotation, drawing, masks, len(drawing), len(drawing[0]),
                                   bottoms))
            drawing = _rotate_cw(drawing)
        shapes[piece] = tuple(rotations)
    return shapes


SHAPES = _build_shapes()


def column_tops(board: list[int] | tuple[int, ...], width: int) -> list[int]:
    """Per board column, the row (0 = top) of its highest filled cell, or the height if empty."""
    tops = [len(board)] * width
    missing = (1 << width) - 1
    for r, row in enumerate(board):
        found = row & missing
        while found:
            low = found & -found
            tops[low.bit_length() - 1] = r
            found ^= low
        missing &= ~row
        if not missing:
            break
    return tops


def landing_row(board: list[int] | tuple[int, ...], shape: Shape, col: int, width: int,
                tops: list[int] | None = None) -> int:
    """Board row (0 = top) of the shape's top row after a hard drop from above the board with its
    leftmost column at `col` (0-based): the piece falls until the lowest cell of one of its
    columns rests on that column's highest filled cell (or the floor); cells under overhangs are
    unreachable. Negative means part of the piece is above the board."""
    if tops is None:
        tops = column_tops(board, width)
    return min(tops[col + c] - 1 - b for c, b in enumerate(shape.bottoms))


def drop_at(board: list[int], shape: Shape, col: int, y: int, width: int) -> tuple[list[int], int]:
    """The board after putting the shape with its top row at board row y >= 0 and clearing full
    rows, and the number of rows cleared."""
    new = list(board)
    for r, m in enumerate(shape.rows):
        new[y + r] |= m << col
    full = (1 << width) - 1
    kept = [row for row in new if row != full]
    cleared = len(new) - len(kept)
    if cleared:
        kept = [0] * cleared + kept
    return kept, cleared


def place(board: list[int], shape: Shape, col: int, width: int) -> tuple[list[int], int] | None:
    """Drop the shape; return (new board after clearing full rows, rows cleared), or None on a
    top-out (the landed piece would have a cell above the top row)."""
    y = landing_row(board, shape, col, width)
    if y < 0:
        return None
    return drop_at(board, shape, col, y, width)


def column_range(shape: Shape, width: int) -> tuple[int, int]:
    """The legal 1-based columns (of the leftmost cell) for this rotation."""
    return 1, width - shape.width + 1


@lru_cache(maxsize=None)
def _row_texts(width: int) -> tuple[str, ...]:
    """`draw_row` of every possible row mask of a board this wide (1,024 strings for width 10)."""
    return tuple(" ".join("*" if mask >> c & 1 else "." for c in range(width))
                 for mask in range(1 << width))


def draw_row(mask: int, width: int) -> str:
    """A row as the observation shows it: `*` filled, `.` empty, one space between cells."""
    if width <= 12:
        return _row_texts(width)[mask]
    return " ".join("*" if mask >> c & 1 else "." for c in range(width))


@lru_cache(maxsize=None)
def _board_row_texts(width: int) -> tuple[str, ...]:
    """Each possible board row framed as in the observation (`   |* . *|`)."""
    return tuple(f"   |{text}|" for text in _row_texts(width))


@lru_cache(maxsize=None)
def _piece_block(piece: str, width: int) -> tuple[str, ...]:
    """The four rotations of a piece drawn side by side, each over a fixed-width column, with the
    board columns each may use."""
    shapes = SHAPES[piece]
    cell_w = 16
    lines = [("  " + "".join(f"rotation {s.rotation}:".ljust(cell_w) for s in shapes)).rstrip()]
    for i in range(max(s.height for s in shapes)):
        parts = [(draw_row(s.rows[i], s.width) if i < s.height else "").ljust(cell_w) for s in shapes]
        lines.append(("  " + "".join(parts)).rstrip())
    ranges = []
    for s in shapes:
        lo, hi = column_range(s, width)
        ranges.append(f"columns {lo}-{hi}".ljust(cell_w))
    lines.append(("  " + "".join(ranges)).rstrip())
    return tuple(lines)


@lru_cache(maxsize=None)
def _observation_head(width: int, height: int) -> str:
    return (f"Board ({width} columns x {height} rows, * filled, . empty):\n"
            "    " + " ".join(str(c) for c in range(1, width + 1)) + "\n")


@lru_cache(maxsize=None)
def _observation_tail(width: int, current: str, next_piece: str) -> str:
    """Everything below the board: its bottom edge, the current piece's rotations, the preview."""
    lines = ["   +" + "-" * (2 * width - 1) + "+", f"Current piece: {current}"]
    lines += _piece_block(current, width)
    lines.append(f"Next piece: {next_piece}")
    shape = SHAPES[next_piece][0]
    lines += ["  " + draw_row(m, shape.width) for m in shape.rows]
    return "\n" + "\n".join(lines)


@dataclass(frozen=True)
class TetrisConfig:
    max_steps: int
    width: int
    height: int


@dataclass(frozen=True)
class TetrisView:
    width: int
    height: int
    board: tuple[str, ...]  # rows top to bottom, '*' filled '.' empty, one char per column
    current: str  # letter of the piece to place (its rotations are SHAPES[current])
    next: str  # letter of the preview piece


_ACTION_RE = re.compile(
    r"^(?:col(?:umn)?\s*[:=]?\s*)?[\(\[]?\s*([0-9]{1,4})\s*(?:,|;|\s)\s*"
    r"(?:rot(?:ation)?\s*[:=]?\s*)?([0-9]{1,4})\s*(?:°|º|deg(?:rees?)?)?\s*[\)\]]?$"
)


class TetrisGame(Game[TetrisConfig]):
    """Tetris with column-and-rotation hard drops.

    Rules as implemented (choices where the spec is silent are marked *):
    - Board W x H (explore 10 x 10, eval 8 x 8), empty at the start. Pieces I O T S Z J L, each
      drawn uniformly from the episode RNG; the first two draws are the current and the preview
      piece, and one new preview is drawn after every successful drop (never after an invalid
      action or a top-out).
    - *Rotations: rotation 0 is the SRS spawn orientation (I flat, T/J/L with the flat side down,
      S/Z flat); 90, 180, 270 are successive clockwise quarter turns, each normalised to its
      bounding box. The observation draws all four, so the agent never has to guess.
    - Action `<column> <rotation>`: column = 1-based board column of the rotated piece's leftmost
      cell (its bounding box's left edge); rotation in {0, 90, 180, 270}. *Accepted spellings:
      `3 90`, `3,90`, `(3, 90)`, `3 90°`, `3 90 deg`, `column 3 rotation 90`; case-insensitive.
    - *Hard drop: the piece starts entirely above the board in the chosen column and rotation and
      falls straight down until a cell would hit the floor or a filled cell (no sliding under
      overhangs).
    - Every full row is cleared (rows above move down); the step reward is the number of rows
      cleared by that drop, the score is the total.
    - *Top-out: if the landed piece has any cell above the top row, the piece is not placed (the
      board stays as it was, no rows are cleared, reward 0) and the episode terminates.
    - Invalid actions (unparseable, rotation not in {0, 90, 180, 270}, or a column that puts the
      piece off the board; feedback names the legal range for that rotation) cost the step in
      both modes; the same piece stays current.
    - Max 64 steps (the harness cap), so at most 64 pieces.
    """

    name = "tetris"
    title = "Tetris"
    description = "Drop tetrominoes (column and rotation) to complete and clear rows."
    CONFIGS = {
        "explore": TetrisConfig(max_steps=64, width=10, height=10),
        "eval": TetrisConfig(max_steps=64, width=8, height=8),
    }

    def _setup(self) -> None:
        self.width = self.config.width
        self.height = self.config.height
        self.board: list[int] = [0] * self.height
        self.current = self.rng.choice(PIECES)
        self.next = self.rng.choice(PIECES)
        self.lines = 0
        self.placed = 0
        self.topped_out = False

    # ----- play -------------------------------------------------------------------------
    def _apply(self, action: str) -> Outcome:
        m = _ACTION_RE.match(action.lower()) if len(action) <= 60 else None
        if not m:
            return Outcome(f"Invalid action: {ascii(action[:40])} is not `<column> <rotation>` "
                           f"(e.g. `3 90`). The step is lost; the {self.current} piece is still "
                           "waiting.", valid=False)
        col, rotation = int(m.group(1)), int(m.group(2))
        if rotation not in ROTATIONS:
            return Outcome(f"Invalid action: rotation {rotation} is not one of 0, 90, 180, 270. "
                           f"The step is lost; the {self.current} piece is still waiting.", valid=False)
        shape = SHAPES[self.current][ROTATIONS.index(rotation)]
        lo, hi = column_range(shape, self.width)
        if not lo <= col <= hi:
            return Outcome(f"Invalid action: column {col} is off the board ({lo}-{hi} for this "
                           f"rotation). The step is lost; the {self.current} piece is still waiting.",
                           valid=False)
        result = place(self.board, shape, col - 1, self.width)
        what = f"{self.current} piece, rotation {rotation}, dropped at column {col}"
        if result is None:
            self.topped_out = True
            return Outcome(f"Top-out: the {what} would stick out above the board. Game over.",
                           terminated=True, info={"top_out": True})
        self.board, cleared = result
        self.lines += cleared
        self.placed += 1
        self.current, self.next = self.next, self.rng.choice(PIECES)
        rows = "no row" if cleared == 0 else ("1 row" if cleared == 1 else f"{cleared} rows")
        return Outcome(f"The {what}: {rows} cleared.", reward=float(cleared),
                       info={"rows_cleared": cleared})

    # ----- presentation -----------------------------------------------------------------
    def view(self) -> TetrisView:
        return TetrisView(self.width, self.height,
                          tuple("".join("*" if row >> c & 1 else "." for c in range(self.width))
                                for row in self.board),
                          self.current, self.next)

    def _header(self) -> str:
        return "    " + " ".join(str(c) for c in range(1, self.width + 1))

    def observation(self) -> str:
        rows = _board_row_texts(self.width)
        return (_observation_head(self.width, self.height)
                + "\n".join([rows[row] for row in self.board])
                + _observation_tail(self.width, self.current, self.next))

    def render(self) -> Beside:
        """Board beside the pieces when the width allows, else above them; the four rotations of the
        current piece side by side, two by two or stacked as they fit (a rotation never wraps)."""
        board = Text(no_wrap=True)
        board.append(f"Board ({self.width} x {self.height})\n", style="bold")
        board.append(self._header() + "\n", style="dim")
        for row in self.board:
            board.append("   |", style="dim")
            for c in range(self.width):
                if c:
                    board.append(" ")
                board.append("*" if row >> c & 1 else ".", style="bold white" if row >> c & 1 else "dim")
            board.append("|\n", style="dim")
        board.append("   +" + "-" * (2 * self.width - 1) + "+", style="dim")
        style = PIECE_STYLE[self.current]
        rotations = []
        for shape in SHAPES[self.current]:
            block = Text(no_wrap=True)
            block.append(f"rotation {shape.rotation}\n", style="bold")
            block.append("\n".join(draw_row(m, shape.width) for m in shape.rows) + "\n", style=style)
            lo, hi = column_range(shape, self.width)
            block.append(f"columns {lo}-{hi}", style="dim")
            rotations.append(block)
        current = Text.assemble("Current piece: ", (self.current, f"bold {style}"))
        preview = Text("Next piece: ", no_wrap=True)
        preview.append(self.next, style=f"bold {PIECE_STYLE[self.next]}")
        shape = SHAPES[self.next][0]
        preview.append("\n" + "\n".join("  " + draw_row(m, shape.width) for m in shape.rows),
                       style=PIECE_STYLE[self.next])
        pieces = Group(current, Tiles(rotations), preview)
        return Beside(board, pieces)

    def rules(self) -> str:
        return (
            f"Tetris on a board {self.config.width} columns wide and {self.config.height} rows high (* filled, . "
            "empty). Each turn you place the current tetromino (I, O, T, S, Z, J or L): choose a "
            "rotation (0, 90, 180 or 270 degrees clockwise, all four are drawn for you) and the "
            "board column, counted from 1 on the left, of the rotated piece's leftmost cell. The "
            "piece then falls straight down from above the board until it rests on the floor or on "
            "a filled cell; it cannot slide under overhangs. Every row that becomes completely "
            "filled is cleared and the rows above it move down; each cleared row scores one point. "
            "You also see the next piece. If a piece comes to rest sticking out above the top row, "
            f"the game is over. The game lasts at most {self.max_steps} turns. An invalid answer "
            "(bad format, a rotation other than 0/90/180/270, or a column that puts the piece off "
            "the board) uses up a turn and the same piece stays current. Clear as many rows as you can."
        )

    def answer_format(self) -> str:
        return "<column> <rotation>: column 1-based from the left, rotation 0|90|180|270   (example: 3 90)"

    def action_grammar(self) -> str:
        by_range: dict[int, list[int]] = {}
        for shape in SHAPES[self.current]:
            by_range.setdefault(column_range(shape, self.width)[1], []).append(shape.rotation)
        alternatives = []
        for hi, rotations in by_range.items():
            cols = " | ".join(f'"{c}"' for c in range(1, hi + 1))
            rots = " | ".join(f'"{r}"' for r in rotations)
            alternatives.append(f'({cols}) " " ({rots})')
        return " | ".join(alternatives)

    def score(self) -> float:
        return float(self.lines)

    def sample_action(self, rng: random.Random) -> str:
        return f"{rng.randint(1, self.width)} {rng.choice(ROTATIONS)}"

    @classmethod
    def score_eps(cls, mode: str) -> float:
        return 1.0

    @classmethod
    def score_range(cls, mode: str) -> tuple[float, float]:
        config = cls.CONFIGS[mode]
        pieces = min(config.max_steps, 64)
        return (0.0, float(pieces * 4 // config.width))

    @classmethod
    def step_reward_range(cls, mode: str) -> tuple[float, float]:
        """The rows one drop clears: at most the tallest piece's height (the I on end: 4) on a board at
        least that tall."""
        tallest = max(shape.height for shapes in SHAPES.values() for shape in shapes)
        return (0.0, float(min(tallest, cls.CONFIGS[mode].height)))
