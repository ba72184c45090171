"""Snake game: a walled grid, a snake, three apples at all times and three fixed obstacles."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from rich.console import Group
from rich.text import Text

from s3gym_games.base import Game, Outcome

Cell = tuple[int, int]

DIRECTIONS: dict[str, Cell] = {"UP": (-1, 0), "DOWN": (1, 0), "LEFT": (0, -1), "RIGHT": (0, 1)}
DIRECTION_NAMES = ("UP", "DOWN", "LEFT", "RIGHT")
OPPOSITE = {"UP": "DOWN", "DOWN": "UP", "LEFT": "RIGHT", "RIGHT": "LEFT"}
_ABBREVIATIONS = {"U": "UP", "D": "DOWN", "L": "LEFT", "R": "RIGHT"}

WALL, EMPTY, HEAD, BODY, APPLE, OBSTACLE = "#", ".", "H", "S", "A", "X"

# Initial snake (grid coordinates, row 0 / col 0 are the top / left walls): head first.
START_BODY: tuple[Cell, ...] = ((5, 4), (5, 3), (5, 2))
START_DIRECTION = "RIGHT"

_ACTION_RE = re.compile(
    r"^(?:(?:move|go|turn|head)\s*)?\(?\s*(up|down|left|right|u|d|l|r)\s*\)?$", re.IGNORECASE)


@dataclass(frozen=True)
class SnakeConfig:
    max_steps: int
    size: int  # side of the square grid, wall border included
    obstacles: int
    apples: int
    strict: bool  # eval: a collision or an invalid action ends the episode


@dataclass(frozen=True)
class SnakeView:
    step: int  # steps taken so far
    max_steps: int
    grid: tuple[str, ...]  # rows of the grid, wall border included (row 0 is the top)
    direction: str  # UP / DOWN / LEFT / RIGHT: the direction of the last move
    length: int


def parse_direction(action: str) -> str | None:
    """The direction named by a cleaned action (case-insensitive), or None."""
    if len(action) > 20:
        return None
    m = _ACTION_RE.match(action)
    if not m:
        return None
    word = m.group(1).upper()
    return _ABBREVIATIONS.get(word, word)


def interior_connected(size: int, obstacles: set[Cell]) -> bool:
    """True when every interior cell that is not an obstacle is reachable from every other.

    Flood fill on a bit mask (bit r*size+c): the wall ring is never in the mask, so shifting by
    one column or one row cannot jump from one row's edge to the next row."""
    free = _interior_mask(size)
    for r, c in obstacles:
        if 0 < r < size - 1 and 0 < c < size - 1:
            free &= ~(1 << (r * size + c))
    if not free:
        return True
    reach = free & -free
    while True:
        grown = (reach | reach << 1 | reach >> 1 | reach << size | reach >> size) & free
        if grown == reach:
            return reach == free
        reach = grown


@lru_cache(maxsize=None)
def _interior_mask(size: int) -> int:
    return sum(1 << (r * size + c) for r in range(1, size - 1) for c in range(1, size - 1))


@lru_cache(maxsize=None)
def _interior(size: int) -> tuple[Cell, ...]:
    """The playing area's cells, row-major."""
    return tuple((r, c) for r in range(1, size - 1) for c in range(1, size - 1))


@lru_cache(maxsize=None)
def _obstacle_candidates(size: int, body: tuple[Cell, ...], ahead: Cell) -> tuple[Cell, ...]:
    return tuple(cell for cell in _interior(size) if cell not in body and cell != ahead)


@lru_cache(maxsize=256)
def _grid_template(size: int, obstacles: tuple[Cell, ...]) -> tuple[str, ...]:
    """The observation's grid as a list of pieces: the column header, then per row its label and
    one character per cell (walls and obstacles in place). Cell (r, c) is at r*(size+1) + c + 2."""
    pieces = ["   " + "".join(str(c % 10) for c in range(size))]
    for r in range(size):
        pieces.append(f"\n{r:>2} ")
        if r in (0, size - 1):
            pieces += [WALL] * size
        else:
            pieces += [WALL] + [EMPTY] * (size - 2) + [WALL]
    for r, c in obstacles:
        pieces[r * (size + 1) + c + 2] = OBSTACLE
    return tuple(pieces)


class SnakeGame(Game[SnakeConfig]):
    """Snake on a 10x10 grid (wall border included, so an 8x8 playing area).

    Choices where the spec is silent:
    - Coordinates: row 0 is the top wall, column 0 the left wall; UP decreases the row.
    - Start: length 3, head at (row 5, col 4), body at (5, 3) and (5, 2), direction RIGHT.
    - Obstacles: 3 interior cells drawn from the episode RNG (never on the snake or on the cell
      straight ahead of the head); a draw is rejected and redrawn unless all non-obstacle interior
      cells stay connected. Then 3 apples on random free cells. Obstacles never move.
    - Apples: when one is eaten a new one appears on a uniformly random free cell (not snake, not
      obstacle, not another apple; the new head position counts as snake). Drawn from the RNG.
    - Growth is immediate: on the step the head reaches an apple the tail stays where it is.
      Moving the head into the cell the tail occupies is therefore allowed exactly when the snake
      does not grow on that step, which is always the case because an apple is never on a snake
      cell (so the tail cell is always vacated when the head enters it).
    - The direction is that of the last successful move; a move opposite to it (a reversal into
      the neck) is an invalid action because the length is always > 1. Repeating the current
      direction or turning 90 degrees is always a legal action (it may still collide).
    - Collisions: the wall border, an obstacle, or any body cell except the tail. A collision is a
      legal action (info valid=True, collision=...), invalid means unparsable or a reversal.
      Explore: both are no-ops that spend the step. Eval: both end the episode (no reward).
    - Actions are case-insensitive `UP`/`DOWN`/`LEFT`/`RIGHT`; `move up`, `(up)` and the
      one-letter forms `U`/`D`/`L`/`R` are also accepted.
    - Score = apples eaten (each +1 reward).
    """

    name = "snake"
    title = "Snake"
    description = "Steer a growing snake to apples without hitting walls, obstacles or itself."
    CONFIGS = {
        "explore": SnakeConfig(max_steps=64, size=10, obstacles=3, apples=3, strict=False),
        "eval": SnakeConfig(max_steps=64, size=10, obstacles=3, apples=3, strict=True),
    }

    # ----- state -------------------------------------------------------------------------
    def _setup(self) -> None:
        size = self.config.size
        self.body: list[Cell] = list(START_BODY)
        self.direction = START_DIRECTION
        self.eaten = 0
        head = self.body[0]
        dr, dc = DIRECTIONS[self.direction]
        ahead = (head[0] + dr, head[1] + dc)
        candidates = _obstacle_candidates(size, tuple(self.body), ahead)
        while True:
            obstacles = self.rng.sample(candidates, self.config.obstacles)
            if interior_connected(size, set(obstacles)):
                break
        self.obstacles: tuple[Cell, ...] = tuple(sorted(obstacles))
        self.apples: list[Cell] = []
        for _ in range(self.config.apples):
            self._spawn_apple()

    def _free_cells(self) -> list[Cell]:
        taken = set(self.body)
        taken.update(self.obstacles)
        taken.update(self.apples)
        return [cell for cell in _interior(self.config.size) if cell not in taken]

    def _spawn_apple(self) -> None:
        free = self._free_cells()
        if free:
            self.apples.append(self.rng.choice(free))

    def _invalid(self, message: str) -> Outcome:
        if self.config.strict:
            return Outcome(f"Invalid action: {message}. The episode ends (eval mode).",
                           valid=False, terminated=True, info={"ended_by": "invalid"})
        return Outcome(f"Invalid action: {message}. The snake stays put; the step is spent.",
                       valid=False)

    def _apply(self, action: str) -> Outcome:
        direction = parse_direction(action)
        if direction is None:
            return self._invalid(f"{action[:40]!r} is not a direction; answer UP, DOWN, LEFT or RIGHT")
        if len(self.body) > 1 and direction == OPPOSITE[self.direction]:
            legal = ", ".join(d for d in DIRECTION_NAMES if d != direction)
            return self._invalid(f"{direction} reverses into the snake's own body "
                                 f"(it is moving {self.direction}); legal: {legal}")
        size = self.config.size
        head = self.body[0]
        dr, dc = DIRECTIONS[direction]
        nr, nc = head[0] + dr, head[1] + dc
        new_head = (nr, nc)
        collision = None
        if nr <= 0 or nc <= 0 or nr >= size - 1 or nc >= size - 1:
            collision = "wall"
        elif new_head in self.obstacles:
            collision = "obstacle"
        elif new_head in self.body[:-1]:
            collision = "body"
        if collision is not None:
            what = {"wall": "the wall", "obstacle": "an obstacle", "body": "the snake's own body"}[collision]
            if self.config.strict:
                return Outcome(f"Moved {direction} into {what}: collision, the episode ends.",
                               terminated=True, info={"collision": collision})
            return Outcome(f"Moved {direction} into {what}: collision, the snake stays put "
                           "(the step is spent).", info={"collision": collision})
        self.direction = direction
        if new_head in self.apples:
            self.apples.remove(new_head)
            self.body.insert(0, new_head)
            self.eaten += 1
            self._spawn_apple()
            return Outcome(f"Moved {direction} and ate an apple; length is now {len(self.body)}.",
                           1.0, info={"apple": True})
        self.body.insert(0, new_head)
        self.body.pop()
        return Outcome(f"Moved {direction}.", 0.0)

    # ----- what the agent sees -----------------------------------------------------------
    def _grid(self) -> list[list[str]]:
        size = self.config.size
        grid = [[WALL] * size]
        for _ in range(size - 2):
            grid.append([WALL] + [EMPTY] * (size - 2) + [WALL])
        grid.append([WALL] * size)
        for r, c in self.obstacles:
            grid[r][c] = OBSTACLE
        for r, c in self.apples:
            grid[r][c] = APPLE
        for r, c in self.body[1:]:
            grid[r][c] = BODY
        hr, hc = self.body[0]
        grid[hr][hc] = HEAD
        return grid

    def view(self) -> SnakeView:
        return SnakeView(self.steps, self.max_steps, tuple("".join(row) for row in self._grid()),
                         self.direction, len(self.body))

    def observation(self) -> str:
        size = self.config.size
        stride = size + 1
        pieces = list(_grid_template(size, tuple(self.obstacles)))
        for r, c in self.apples:
            pieces[r * stride + c + 2] = APPLE
        body = self.body
        for i in range(1, len(body)):
            r, c = body[i]
            pieces[r * stride + c + 2] = BODY
        hr, hc = body[0]
        pieces[hr * stride + hc + 2] = HEAD
        return (f"Step: {self.steps} of {self.max_steps}   Direction: {self.direction}   "
                f"Length: {len(body)}\n" + "".join(pieces))

    def render(self) -> Group:
        styles = {WALL: "bold white on grey23", EMPTY: "grey50", HEAD: "bold black on green3",
                  BODY: "black on green4", APPLE: "bold red", OBSTACLE: "bold yellow on grey30"}
        header = Text(f"Step {self.steps}/{self.max_steps}   Direction: {self.direction}   "
                      f"Length: {len(self.body)}", style="bold")
        board = Text()
        size = self.config.size
        board.append("   " + "".join(str(c % 10) for c in range(size)) + "\n", style="dim")
        for r, row in enumerate(self._grid()):
            board.append(f"{r:>2} ", style="dim")
            for ch in row:
                board.append(ch, style=styles[ch])
            board.append("\n")
        parts = [header, board]
        if self.done:
            parts.append(Text("Episode over.", style="bold red" if self.terminated else "bold"))
        return Group(*parts)

    def rules(self) -> str:
        size = self.config.size
        if self.config.strict:
            cost = ("Eval mode: a collision (wall, obstacle or your own body) or an invalid action "
                    "ends the episode immediately.")
        else:
            cost = ("Explore mode: a collision (wall, obstacle or your own body) or an invalid action "
                    "is a no-op: the snake stays where it is and the step is spent.")
        return (
            f"Snake. The board is a {size}x{size} grid whose outer ring is wall '#', so the snake "
            f"moves inside an {size - 2}x{size - 2} area. Row 0 is the top, column 0 the left; "
            "UP decreases the row, DOWN increases it, LEFT decreases the column, RIGHT increases it. "
            "'H' is the snake's head, 'S' its body, 'A' an apple, 'X' a fixed obstacle, '.' empty. "
            "Each step you choose a direction and the head moves one cell that way; the body follows. "
            "The snake starts with length 3 moving RIGHT. Moving the head onto an apple eats it: "
            "the snake grows by one (its tail stays in place that step) and a new apple appears on a "
            "random free cell, so there are always 3 apples. Moving straight back into the cell "
            "behind the head (reversing the current direction) is an invalid action. Moving into the "
            "cell the tail is leaving this step is allowed. Hitting the wall, an obstacle or any other "
            f"part of the body is a collision. {cost} The episode lasts at most {self.max_steps} steps. "
            "Goal: eat as many apples as possible; the score is the number of apples eaten."
        )

    def answer_format(self) -> str:
        return "UP | DOWN | LEFT | RIGHT   (example: LEFT)"

    def action_grammar(self) -> str:
        banned = OPPOSITE[self.direction] if len(self.body) > 1 else None
        return " | ".join(f'"{d}"' for d in DIRECTION_NAMES if d != banned)

    def score(self) -> float:
        return float(self.eaten)

    def sample_action(self, rng: random.Random) -> str:
        return rng.choice(DIRECTION_NAMES)

    @classmethod
    def score_eps(cls, mode: str) -> float:
        return 1.0

    @classmethod
    def score_range(cls, mode: str) -> tuple[float, float]:
        return (0.0, float(min(cls.CONFIGS[mode].max_steps, 64)))

    @classmethod
    def step_reward_range(cls, mode: str) -> tuple[float, float]:
        """+1 for the apple a move eats (one cell a step: one apple at most), else 0."""
        return (0.0, 1.0)
