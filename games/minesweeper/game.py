"""Minesweeper: uncover every safe cell of a 9x9 board, or flag as many mines as you can."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache

from rich.console import Group
from rich.text import Text

from s3gym_games.base import Game, Outcome

ROWS = COLS = 9
N_CELLS = ROWS * COLS
UNKNOWN, FLAG, HIT = "?", "F", "X"
VERBS = ("uncover", "flag", "unflag")


def _neighbours(rows: int, cols: int) -> tuple[tuple[int, ...], ...]:
    """For every cell index r*cols+c, the indices of its (up to 8) neighbours, in row-major order."""
    table = []
    for r in range(rows):
        for c in range(cols):
            table.append(tuple(rr * cols + cc
                               for rr in range(r - 1, r + 2) for cc in range(c - 1, c + 2)
                               if (rr, cc) != (r, c) and 0 <= rr < rows and 0 <= cc < cols))
    return tuple(table)


NEIGHBOURS = _neighbours(ROWS, COLS)


@lru_cache(maxsize=None)
def _board_layout(rows: int, cols: int) -> tuple[str, tuple[tuple[str, int, int], ...]]:
    """The observation's column header, and per board row its label and the slice of the
    space-joined cell texts that holds it."""
    header = "   " + " ".join(str(c) for c in range(cols))
    return header, tuple((f"\n{r}  ", r * 2 * cols, r * 2 * cols + 2 * cols - 1) for r in range(rows))


# `uncover (3,4)`, `uncover(3, 4)`, `uncover 3 4`, `uncover 3,4`, `UNCOVER [3,4]`. ASCII digits only;
# bounded so that huge numbers are reported as malformed rather than parsed.
_ACTION_RE = re.compile(
    r"(uncover|unflag|flag) ?(?:\( ?([+-]?[0-9]{1,9}) ?(?:,|, | ) ?([+-]?[0-9]{1,9}) ?\)"
    r"|\[ ?([+-]?[0-9]{1,9}) ?(?:,|, | ) ?([+-]?[0-9]{1,9}) ?\]"
    r"|([+-]?[0-9]{1,9}) ?(?:,|, | ) ?([+-]?[0-9]{1,9}))",
    re.IGNORECASE | re.ASCII,
)
_MAX_ACTION_LEN = 60


@dataclass(frozen=True)
class MinesweeperConfig:
    max_steps: int
    rows: int
    cols: int
    min_mines: int
    max_mines: int
    lives: int


@dataclass(frozen=True)
class MinesweeperView:
    """Exactly what the observation shows."""

    rows: int
    cols: int
    mines: int  # total number of mines on the board
    flags: int  # flags currently placed
    lives: int  # lives left (the episode ends at 0)
    steps: int  # steps used so far
    max_steps: int
    grid: tuple[str, ...]  # one string per row: '?' unknown, 'F' flag, '0'-'8' revealed, 'X' mine hit

    @property
    def started(self) -> bool:
        """True once the first uncover has happened (before it, every cell is '?' or a flag)."""
        return any(ch not in (UNKNOWN, FLAG) for row in self.grid for ch in row)


class MinesweeperGame(Game[MinesweeperConfig]):
    """Minesweeper on a 9x9 board with 10-20 mines.

    Rules as implemented (choices where the spec is silent are marked *):
    - The mine count m is the first draw of the episode RNG in reset (`randint(10, 20)`), so the
      header shows it from the first observation. The mines are placed at the first valid `uncover`
      by one `rng.sample` over the row-major list of cells outside the 3x3 block around the clicked
      cell (classic first-click safety), so the first uncovered cell is always a 0 and floods.
    - * Coordinates are zero-based `(row, col)`, rows top to bottom, columns left to right,
      0-8, as labelled in the observation.
    - Numbers count the 8 neighbours. Uncovering a 0 flood-fills through connected zeros and reveals
      their numbered border; a numbered cell never starts a flood. * Flagged cells are never
      revealed by a flood (classic behaviour): a wrong flag next to a 0 stays a flag until the
      player removes it and uncovers the cell.
    - A `flag` before the first `uncover` is allowed (the spec's list of invalid actions does not
      name it): it marks a `?` cell like any other flag and counts towards the flag limit. The
      mines are still placed at the first uncover, by the same draw as without flags (flags do not
      change where mines may go), and a flag that then sits on a mine becomes a correct flag: its
      1/m of score is credited to the reward of that first uncover (the step that decided it).
    - Invalid: malformed text, a cell off the board, uncovering a revealed/flagged/hit cell,
      flagging a revealed or hit cell or an existing flag, unflagging a cell without a flag,
      placing flag number m+1 (* the limit stays m even after mines were hit). Invalid costs the
      step only.
    - Score = correct flags / m; uncovering every safe cell wins with score 1.0 and ends the
      episode. Step reward = change of score (correct flag +1/m, removing one -1/m; wrong flags 0;
      the winning uncover gets the jump to 1.0).
    - Hitting a mine: explore mode spends one of 3 lives, the mine stays on the board as `X`
      (a known mine; * it is not a flag, it does not count towards the flag limit or the score);
      the episode ends when the lives reach 0. Eval mode has 1 life, so the first mine ends the
      episode (the final observation shows the `X`). The score is kept, not zeroed.
    - * The observation ends with a `Steps used: s of 64` line (after the header and grid the spec
      fixes), so the agent and the reference policy can tell how many moves remain.
    """

    name = "minesweeper"
    title = "Minesweeper"
    description = "Constraint satisfaction: uncover every safe cell of a 9x9 minefield or flag its mines."
    CONFIGS = {
        "explore": MinesweeperConfig(max_steps=64, rows=ROWS, cols=COLS, min_mines=10, max_mines=20, lives=3),
        "eval": MinesweeperConfig(max_steps=64, rows=ROWS, cols=COLS, min_mines=10, max_mines=20, lives=1),
    }

    def __init__(self, mode: str = "explore") -> None:
        super().__init__(mode)
        self._setup()  # a blank board, so every method works before reset (reset redraws it)

    # ----- state ---------------------------------------------------------------------------
    def _setup(self) -> None:
        cfg = self.config
        self.rows, self.cols = cfg.rows, cfg.cols
        self.num_mines = self.rng.randint(cfg.min_mines, cfg.max_mines)
        self.placed = False
        self.mine = [False] * N_CELLS
        self.counts = [0] * N_CELLS
        self.cells = [UNKNOWN] * N_CELLS  # what the player sees
        self.flags = 0
        self.correct_flags = 0
        self.lives = cfg.lives
        self.hits = 0
        self.revealed = 0  # safe cells uncovered
        self.won = False

    def _place_mines(self, first: int) -> None:
        banned = {first, *NEIGHBOURS[first]}
        allowed = [i for i in range(N_CELLS) if i not in banned]
        self._set_layout(self.rng.sample(allowed, self.num_mines))

    def _set_layout(self, mine_cells) -> None:
        """Place mines on the given cell indices (also used by tests to build known boards)."""
        self.mine = [False] * N_CELLS
        for i in mine_cells:
            self.mine[i] = True
        self.num_mines = sum(self.mine)
        self.counts = [sum(self.mine[j] for j in NEIGHBOURS[i]) for i in range(N_CELLS)]
        self.placed = True
        # flags placed before the mines were: the ones on a mine are correct from now on
        self.correct_flags = sum(1 for k in range(N_CELLS) if self.cells[k] == FLAG and self.mine[k])

    # ----- actions -------------------------------------------------------------------------
    @staticmethod
    def parse(action: str) -> tuple[str, int, int] | None:
        """(verb, row, col) of a well-formed action (coordinates unchecked), or None."""
        if len(action) > _MAX_ACTION_LEN:
            return None
        m = _ACTION_RE.fullmatch(action)
        if m is None:
            return None
        g = m.groups()
        nums = [x for x in g[1:] if x is not None]
        return g[0].lower(), int(nums[0]), int(nums[1])

    def _invalid(self, why: str) -> Outcome:
        return Outcome(f"Invalid action: {why} The step is spent; nothing else changed.", valid=False)

    def _apply(self, action: str) -> Outcome:
        parsed = self.parse(action)
        if parsed is None:
            return self._invalid(
                f"{action[:40]!r} is not understood. Answer uncover (r,c), flag (r,c) or unflag (r,c) "
                f"with row and column from 0 to {self.rows - 1}, e.g. uncover (4,4).")
        verb, r, c = parsed
        bad = [f"row {r}" if not 0 <= r < self.rows else "", f"column {c}" if not 0 <= c < self.cols else ""]
        bad = [b for b in bad if b]
        if bad:
            return self._invalid(f"{' and '.join(bad)} {'is' if len(bad) == 1 else 'are'} off the board "
                                 f"(rows and columns are 0-{self.rows - 1}).")
        i = r * self.cols + c
        if verb == "uncover":
            return self._uncover(i, r, c)
        if verb == "flag":
            return self._flag(i, r, c)
        return self._unflag(i, r, c)

    def _uncover(self, i: int, r: int, c: int) -> Outcome:
        cell = self.cells[i]
        before = self.score()  # before the mines are placed: early flags may become correct now
        if cell == FLAG:
            return self._invalid(f"cell ({r},{c}) is flagged; unflag it before uncovering it.")
        if cell == HIT:
            return self._invalid(f"cell ({r},{c}) is a mine that was already hit.")
        if cell != UNKNOWN:
            return self._invalid(f"cell ({r},{c}) is already uncovered (it shows {cell}).")
        if not self.placed:
            self._place_mines(i)
        if self.mine[i]:  # never on the first uncover (first-click safety)
            self.cells[i] = HIT
            self.hits += 1
            self.lives -= 1
            if self.lives <= 0:
                return Outcome(f"Boom! ({r},{c}) was a mine. No lives left: the game is over.",
                               terminated=True, info={"mine": True})
            return Outcome(f"Boom! ({r},{c}) was a mine. You lose a life ({self.lives} left); "
                           "it stays on the board as X.", info={"mine": True})
        opened = self._flood(i)
        safe_total = N_CELLS - self.num_mines
        if self.revealed >= safe_total:
            self.won = True
            return Outcome(f"Uncovered ({r},{c}). Every safe cell is uncovered: you win!",
                           self.score() - before, terminated=True, info={"won": True, "opened": opened})
        if opened > 1:
            text = f"Uncovered ({r},{c}): 0, which opened {opened} cells."
        else:
            text = f"Uncovered ({r},{c}): {self.cells[i]}."
        return Outcome(text, self.score() - before, info={"opened": opened})  # early flags, if any

    def _flood(self, start: int) -> int:
        """Reveal `start` (a safe cell) and, if it is a 0, flood through zeros. Returns cells opened."""
        cells, counts = self.cells, self.counts
        cells[start] = str(counts[start])
        opened = 1
        stack = [start] if counts[start] == 0 else []
        while stack:
            j = stack.pop()
            for k in NEIGHBOURS[j]:
                if cells[k] == UNKNOWN:  # flags (and hits, which never touch a 0) are left alone
                    cells[k] = str(counts[k])
                    opened += 1
                    if counts[k] == 0:
                        stack.append(k)
        self.revealed += opened
        return opened

    def _flag(self, i: int, r: int, c: int) -> Outcome:
        cell = self.cells[i]
        if cell == FLAG:
            return self._invalid(f"cell ({r},{c}) is already flagged.")
        if cell == HIT:
            return self._invalid(f"cell ({r},{c}) is a mine that was already hit; it cannot be flagged.")
        if cell != UNKNOWN:
            return self._invalid(f"cell ({r},{c}) is uncovered (it shows {cell}); only ? cells can be flagged.")
        if self.flags >= self.num_mines:
            return self._invalid(f"all {self.num_mines} flags are placed (no more flags than mines); "
                                 "unflag one first.")
        self.cells[i] = FLAG
        self.flags += 1
        reward = 0.0
        if self.mine[i]:  # before the first uncover no cell is a mine yet: no reward (see _set_layout)
            self.correct_flags += 1
            reward = 1.0 / self.num_mines
        return Outcome(f"Flagged ({r},{c}).", reward)

    def _unflag(self, i: int, r: int, c: int) -> Outcome:
        if self.cells[i] != FLAG:
            return self._invalid(f"cell ({r},{c}) has no flag to remove.")
        self.cells[i] = UNKNOWN
        self.flags -= 1
        reward = 0.0
        if self.mine[i]:
            self.correct_flags -= 1
            reward = -1.0 / self.num_mines
        return Outcome(f"Removed the flag at ({r},{c}).", reward)

    # ----- what the agent sees -------------------------------------------------------------
    def _rows(self) -> list[str]:
        cols = self.cols
        return ["".join(self.cells[r * cols:(r + 1) * cols]) for r in range(self.rows)]

    def view(self) -> MinesweeperView:
        return MinesweeperView(self.rows, self.cols, self.num_mines, self.flags, self.lives,
                               self.steps, self.max_steps, tuple(self._rows()))

    def _header(self) -> str:
        return f"Mines: {self.num_mines}  Flags: {self.flags}  Lives: {self.lives}"

    def observation(self) -> str:
        header, rows = _board_layout(self.rows, self.cols)
        text = " ".join(self.cells)  # every cell text is one character
        return (f"{self._header()}\n{header}" + "".join([label + text[a:b] for label, a, b in rows])
                + f"\nSteps used: {self.steps} of {self.max_steps}")

    _STYLE = {
        UNKNOWN: "grey50", FLAG: "bold yellow on red", HIT: "bold white on dark_red", "0": "grey35",
        "1": "bold blue", "2": "bold green", "3": "bold red", "4": "bold magenta", "5": "bold dark_red",
        "6": "bold cyan", "7": "bold white", "8": "bold grey70",
    }

    def render(self) -> Group:
        header = Text(self._header(), style="bold")
        grid = Text()
        grid.append("   " + " ".join(str(c) for c in range(self.cols)) + "\n", style="dim")
        for r, row in enumerate(self._rows()):
            grid.append(f"{r}  ", style="dim")
            for k, ch in enumerate(row):
                grid.append(ch, style=self._STYLE[ch])
                if k < self.cols - 1:
                    grid.append(" ")
            if r < self.rows - 1:
                grid.append("\n")
        footer = Text(f"Steps used: {self.steps} of {self.max_steps}", style="dim")
        return Group(header, grid, footer)

    def rules(self) -> str:
        lives = self.config.lives
        if lives > 1:
            mine_rule = (f"You have {lives} lives: uncovering a mine costs one life and the mine stays on "
                         "the board as X (it is a known mine, not a flag); the game ends when no lives "
                         "are left.")
        else:
            mine_rule = "Uncovering a mine ends the game at once."
        return (
            f"Minesweeper. The board has {self.rows} rows and {self.cols} columns; cells are named "
            f"(row,col) counting from 0, row 0 at the top and column 0 on the left. The header shows "
            "the number of hidden mines (10 to 20), your flags and your lives. Cells show ? (not yet "
            "uncovered), F (your flag), 0-8 (an uncovered safe cell: how many of its 8 neighbours are "
            "mines) or X (a mine you uncovered). The mines are placed when you first uncover a cell, "
            "never on that cell or its 8 neighbours, so the first uncover is always safe and opens an "
            "area. Uncovering a 0 automatically uncovers its neighbours, spreading through connected "
            "zeros; flagged cells are never uncovered automatically. "
            "Actions: uncover (r,c) reveals a cell; flag (r,c) marks a ? cell as a mine; unflag (r,c) "
            "removes your flag. You may not place more flags than there are mines. A flag placed before "
            "your first uncover stays where it is; it counts once the mines are placed. "
            f"{mine_rule} Your score is the number of correctly flagged mines divided by the number of "
            "mines, except that uncovering every safe cell wins the game with the full score of 1; "
            "flags on safe cells earn nothing. Invalid actions (malformed, off the board, uncovering an "
            "uncovered or flagged cell, flagging an uncovered cell, unflagging a cell without a flag, "
            "too many flags) change nothing but use up the step. "
            f"The game lasts at most {self.max_steps} steps, so do not waste steps: flag only what "
            "you are sure of and when it pays."
        )

    def answer_format(self) -> str:
        return "uncover (r,c) | flag (r,c) | unflag (r,c)   with r, c from 0 to 8   (example: uncover (4,4))"

    def action_grammar(self) -> str:
        cols = self.cols
        cells = self.cells
        groups: list[str] = []
        uncover = [i for i in range(N_CELLS) if cells[i] == UNKNOWN]
        if self.flags < self.num_mines:
            flag = uncover
        else:
            flag = []
        unflag = [i for i in range(N_CELLS) if cells[i] == FLAG]
        for verb, idx in (("uncover", uncover), ("flag", flag), ("unflag", unflag)):
            if idx:
                alts = " | ".join(f'"{i // cols},{i % cols}"' for i in idx)
                groups.append(f'"{verb} (" ({alts}) ")"')
        if not groups:  # the game is over or nothing is legal: any well-formed action
            digit = " | ".join(f'"{d}"' for d in range(self.rows))
            groups.append(f'("uncover" | "flag" | "unflag") " (" ({digit}) "," ({digit}) ")"')
        return " | ".join(groups)

    def score(self) -> float:
        if self.won:
            return 1.0
        return self.correct_flags / self.num_mines

    def sample_action(self, rng: random.Random) -> str:
        verb = rng.choices(VERBS, weights=(6, 3, 1), k=1)[0]
        return f"{verb} ({rng.randrange(self.rows)},{rng.randrange(self.cols)})"

    @classmethod
    def score_eps(cls, mode: str) -> float:
        return 1.0 / cls.CONFIGS[mode].max_mines

    @classmethod
    def score_range(cls, mode: str) -> tuple[float, float]:
        return (0.0, 1.0)

    @classmethod
    def step_reward_range(cls, mode: str) -> tuple[float, float]:
        """A step's reward is the change of score: at worst a correct flag removed, -1/m with the fewest
        mines m; at best the winning uncover, which lifts the score from 0 (no correct flag) to 1.0."""
        return (-1.0 / cls.CONFIGS[mode].min_mines, 1.0)
