"""Chess (hidden-rule piece-position prediction): lettered pieces move by hidden deterministic rules;
the agent watches the last 7 boards and predicts every piece's next cell."""

from __future__ import annotations

import random
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Sequence

from s3gym_games.base import HARNESS_STEP_CAP, clean_action, Game, Outcome
from s3gym_games.chess.render import ChessBoards

Cell = tuple[int, int]

LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
HISTORY = 7  # boards shown: t-6 .. t0
LABELS = tuple(f"t-{HISTORY - 1 - i}" if i < HISTORY - 1 else "t0" for i in range(HISTORY))

FAMILIES = ("stationary", "fixed", "cycle", "bounce", "wrap", "patrol")
KING = ((-1, -1), (-1, 0), (-1, 1), (0, -1), (0, 1), (1, -1), (1, 0), (1, 1))
DIAGONALS = ((-1, -1), (-1, 1), (1, -1), (1, 1))
# every (dr, dc) with |dr|, |dc| <= 2 except (0, 0): the steps a cycle may use
SMALL_STEPS = tuple((dr, dc) for dr in range(-2, 3) for dc in range(-2, 3) if (dr, dc) != (0, 0))
# wrap drift: the small steps except the four one-cell diagonals (those are diagonal-bounce moves)
WRAP_STEPS = tuple(s for s in SMALL_STEPS if s not in DIAGONALS)
CYCLE_LENGTHS = (2, 3, 4)
# (r1 - r0, c1 - c0) of a patrol rectangle: a square with sides 1-3 apart, or one cell thick
# with the long side 2 or 3 apart. (Larger or 2x3 rectangles are left out: with 7 boards their
# next cell is not always determined.)
PATROL_SHAPES = ((1, 1), (1, 2), (2, 1), (1, 3), (3, 1), (2, 2), (3, 3))
_PATROL_SET = frozenset(PATROL_SHAPES)
_PATROL_MAX = max(max(s) for s in PATROL_SHAPES)

_KING_SET = frozenset(KING)
_SMALL_SET = frozenset(SMALL_STEPS)
_WRAP_SET = frozenset(WRAP_STEPS)


# ----- the movement rules (shared by the generator and the reference policy) ---------------------

def bounce_step(pos: Cell, vel: Cell, n: int) -> tuple[Cell, Cell]:
    """One diagonal-bounce tick: a velocity component whose step would leave the board is reversed
    first (both at a corner), then the piece moves. Returns (new position, new velocity)."""
    r, c = pos
    vr, vc = vel
    if not 0 <= r + vr < n:
        vr = -vr
    if not 0 <= c + vc < n:
        vc = -vc
    return (r + vr, c + vc), (vr, vc)


def patrol_step(pos: Cell, r0: int, r1: int, c0: int, c1: int, clockwise: bool) -> Cell:
    """One patrol tick along the border of the rectangle rows r0..r1, cols c0..c1 (pos on it).
    Clockwise (as drawn, row 0 on top): right along the top, down the right side, left along the
    bottom, up the left side; counter-clockwise is the reverse."""
    r, c = pos
    if clockwise:
        if r == r0 and c < c1:
            return (r, c + 1)
        if c == c1 and r < r1:
            return (r + 1, c)
        if r == r1 and c > c0:
            return (r, c - 1)
        return (r - 1, c)
    if r == r0 and c > c0:
        return (r, c - 1)
    if c == c0 and r < r1:
        return (r + 1, c)
    if r == r1 and c < c1:
        return (r, c + 1)
    return (r - 1, c)


def _on_rect_border(pos: Cell, r0: int, r1: int, c0: int, c1: int) -> bool:
    r, c = pos
    return ((r == r0 or r == r1) and c0 <= c <= c1) or ((c == c0 or c == c1) and r0 <= r <= r1)


def _primitive(cycle: Sequence[Cell]) -> bool:
    """True if the cycle is not a repetition of a shorter cycle."""
    k = len(cycle)
    for p in range(1, k):
        if k % p == 0 and all(cycle[i] == cycle[(i + p) % k] for i in range(k)):
            return False
    return True


# (equality per step direction) for patrols: which rectangle coordinate a step pins to its row/col
# cw: right -> r0 = row, down -> c1 = col, left -> r1 = row, up -> c0 = col
# ccw: left -> r0 = row, down -> c0 = col, right -> r1 = row, up -> c1 = col
_PATROL_PIN = {
    True: {(0, 1): (0, 0), (1, 0): (3, 1), (0, -1): (1, 0), (-1, 0): (2, 1)},
    False: {(0, -1): (0, 0), (1, 0): (2, 1), (0, 1): (1, 0), (-1, 0): (3, 1)},
}  # step -> (index into [r0, r1, c0, c1], 0 = take the row / 1 = take the col)


def _patrol_candidates(pts: Sequence[Cell], steps: Sequence[Cell], n: int) -> list[Cell]:
    """Next cells of every rectangular patrol (a shape of PATROL_SHAPES) consistent with the
    positions."""
    for dr, dc in steps:
        if abs(dr) + abs(dc) != 1:
            return []
    cw_ok = ccw_ok = True
    for a, b in zip(steps, steps[1:]):
        if a == b:
            continue
        if b == (a[1], -a[0]):  # clockwise turn
            ccw_ok = False
        elif b == (-a[1], a[0]):  # counter-clockwise turn
            cw_ok = False
        else:  # reversal
            return []
    rows = [p[0] for p in pts]
    cols = [p[1] for p in pts]
    rmin, rmax, cmin, cmax = min(rows), max(rows), min(cols), max(cols)
    top = _PATROL_MAX
    out: list[Cell] = []
    for clockwise, ok in ((True, cw_ok), (False, ccw_ok)):
        if not ok:
            continue
        pins: list[int | None] = [None, None, None, None]
        conflict = False
        pin_map = _PATROL_PIN[clockwise]
        for i, s in enumerate(steps):
            idx, which = pin_map[s]
            value = pts[i][which]
            if pins[idx] is None:
                pins[idx] = value
            elif pins[idx] != value:
                conflict = True
                break
        if conflict:
            continue
        ranges = [
            (max(0, rmax - top), rmin),
            (rmax, min(n - 1, rmin + top)),
            (max(0, cmax - top), cmin),
            (cmax, min(n - 1, cmin + top)),
        ]
        for i, v in enumerate(pins):
            if v is not None:
                lo, hi = ranges[i]
                ranges[i] = (v, v) if lo <= v <= hi else (1, 0)
        for r0 in range(ranges[0][0], ranges[0][1] + 1):
            for r1 in range(max(ranges[1][0], r0 + 1), min(ranges[1][1], r0 + top) + 1):
                for c0 in range(ranges[2][0], ranges[2][1] + 1):
                    for c1 in range(max(ranges[3][0], c0 + 1), min(ranges[3][1], c0 + top) + 1):
                        if (r1 - r0, c1 - c0) not in _PATROL_SET:
                            continue
                        if not _on_rect_border(pts[0], r0, r1, c0, c1):
                            continue
                        cur = pts[0]
                        good = True
                        for want in pts[1:]:
                            cur = patrol_step(cur, r0, r1, c0, c1, clockwise)
                            if cur != want:
                                good = False
                                break
                        if good:
                            nxt = patrol_step(cur, r0, r1, c0, c1, clockwise)
                            if nxt not in out:
                                out.append(nxt)
    return out


def candidate_moves(positions: Sequence[Cell], n: int) -> list[tuple[str, Cell]]:
    """Every distinct (family, next cell) predicted by a hypothesis of some rule family consistent
    with the consecutive positions of one piece (oldest first) on an n x n board.

    Families are tried in the order stationary, fixed, wrap, bounce, cycle, patrol. A hypothesis
    whose next cell would leave the board is inconsistent for fixed steps and cycles (the generator
    never lets those leave the board). Needs at least 2 positions; cycles of length k need k steps.
    """
    pts = [tuple(p) for p in positions]
    if len(pts) < 2:
        return [("stationary", pts[-1])] if pts else []
    steps = [(pts[i + 1][0] - pts[i][0], pts[i + 1][1] - pts[i][1]) for i in range(len(pts) - 1)]
    last = pts[-1]
    m = len(steps)
    out: list[tuple[str, Cell]] = []
    s0 = steps[0]
    same = all(s == s0 for s in steps)
    if same and s0 == (0, 0):
        out.append(("stationary", last))
        return out  # no other family ever stands still
    if same and s0 in _KING_SET:
        nxt = (last[0] + s0[0], last[1] + s0[1])
        if 0 <= nxt[0] < n and 0 <= nxt[1] < n:
            out.append(("fixed", nxt))
    v = ((s0[0] + 2) % n - 2, (s0[1] + 2) % n - 2)
    if v in _WRAP_SET and all((s[0] - v[0]) % n == 0 and (s[1] - v[1]) % n == 0 for s in steps):
        out.append(("wrap", ((last[0] + v[0]) % n, (last[1] + v[1]) % n)))
    if abs(s0[0]) == 1 and abs(s0[1]) == 1:
        for vel in DIAGONALS:
            cur, cv = pts[0], vel
            good = True
            for want in pts[1:]:
                cur, cv = bounce_step(cur, cv, n)
                if cur != want:
                    good = False
                    break
            if good:
                move = ("bounce", bounce_step(cur, cv, n)[0])
                if move not in out:
                    out.append(move)
    for k in CYCLE_LENGTHS:
        if m < k:
            break
        cyc = steps[:k]
        if not all(s in _SMALL_SET for s in cyc) or not _primitive(cyc):
            continue
        if all(steps[i] == steps[i + k] for i in range(m - k)):
            d = steps[m - k]
            nxt = (last[0] + d[0], last[1] + d[1])
            if 0 <= nxt[0] < n and 0 <= nxt[1] < n:
                out.append(("cycle", nxt))
    for nxt in _patrol_candidates(pts, steps, n):
        out.append(("patrol", nxt))
    return out


def candidate_cells(positions: Sequence[Cell], n: int) -> list[Cell]:
    """The distinct next cells of `candidate_moves`, in first-seen order."""
    cells: list[Cell] = []
    for _, cell in candidate_moves(positions, n):
        if cell not in cells:
            cells.append(cell)
    return cells


# Patrol start phases whose every prediction window is unambiguous, per (h, w, clockwise, steps).
# Computed on a virtual board large enough that no wall cuts the hypothesis space, so a phase found
# unambiguous here is unambiguous anywhere on the real board (walls only remove hypotheses).
_PATROL_PHASES: dict[tuple[int, int, bool, int], tuple[int, ...]] = {}


def patrol_perimeter(r0: int, c0: int, h: int, w: int) -> list[Cell]:
    """Border cells of the rectangle, clockwise from its top-left corner."""
    r1, c1 = r0 + h, c0 + w
    cells = [(r0, c) for c in range(c0, c1)] + [(r, c1) for r in range(r0, r1)]
    cells += [(r1, c) for c in range(c1, c0, -1)] + [(r, c0) for r in range(r1, r0, -1)]
    return cells


def patrol_phases(h: int, w: int, clockwise: bool, predictions: int) -> tuple[int, ...]:
    key = (h, w, clockwise, predictions)
    if key not in _PATROL_PHASES:
        size, off = 24, 8
        perim = patrol_perimeter(off, off, h, w)
        good = []
        for phase, start in enumerate(perim):
            traj = [start]
            for _ in range(HISTORY - 1 + predictions):
                traj.append(patrol_step(traj[-1], off, off + h, off, off + w, clockwise))
            if all(candidate_cells(traj[i:i + HISTORY], size) == [traj[i + HISTORY]]
                   for i in range(predictions)):
                good.append(phase)
        _PATROL_PHASES[key] = tuple(good)
    return _PATROL_PHASES[key]


# ----- trajectories as cell keys (t << 12) | (r << 6) | c, cached (pure functions of their args) --

@lru_cache(maxsize=64)
def _still_keys(horizon: int) -> tuple[int, ...]:
    return tuple(t << 12 for t in range(horizon))


@lru_cache(maxsize=8192)
def _walk_keys(steps: tuple[Cell, ...], horizon: int) -> tuple[tuple[int, ...], int, int, int, int]:
    """Keys relative to the start cell of a piece repeating `steps`, and its offset bounding box."""
    k = len(steps)
    r = c = 0
    rows, cols, keys = [0], [0], [0]
    for t in range(1, horizon):
        dr, dc = steps[(t - 1) % k]
        r += dr
        c += dc
        rows.append(r)
        cols.append(c)
        keys.append((t << 12) + r * 64 + c)
    return tuple(keys), min(rows), max(rows), min(cols), max(cols)


@lru_cache(maxsize=8192)
def _bounce_keys(n: int, horizon: int, r: int, c: int, vel: Cell) -> tuple[int, ...]:
    cur = (r, c)
    keys = [(r << 6) | c]
    for t in range(1, horizon):
        cur, vel = bounce_step(cur, vel, n)
        keys.append((t << 12) | (cur[0] << 6) | cur[1])
    return tuple(keys)


@lru_cache(maxsize=16384)
def _wrap_keys(n: int, horizon: int, r: int, c: int, vel: Cell) -> tuple[int, ...]:
    dr, dc = vel
    return tuple((t << 12) | (((r + t * dr) % n) << 6) | ((c + t * dc) % n) for t in range(horizon))


@lru_cache(maxsize=1024)
def _patrol_keys(h: int, w: int, clockwise: bool, phase: int, horizon: int) -> tuple[int, ...]:
    """Keys relative to the rectangle's top-left corner (r0, c0)."""
    cur = patrol_perimeter(0, 0, h, w)[phase]
    keys = [(cur[0] << 6) | cur[1]]
    for t in range(1, horizon):
        cur = patrol_step(cur, 0, h, 0, w, clockwise)
        keys.append((t << 12) | (cur[0] << 6) | cur[1])
    return tuple(keys)


@lru_cache(maxsize=8)
def _column_header(n: int) -> str:
    return "   " + "".join(f"{c:>3}" for c in range(n))


# ----- config, view --------------------------------------------------------------------------------

@dataclass(frozen=True)
class ChessConfig:
    max_steps: int
    size: int
    pieces: int


@dataclass(frozen=True)
class ChessView:
    size: int
    predictions_made: int
    max_steps: int
    labels: tuple[str, ...]  # "t-6" ... "t0", oldest first
    boards: tuple[tuple[str, ...], ...]  # per label: `size` row strings, '.' empty, else a letter
    pieces: tuple[str, ...]  # the letters to predict, in display order


# ----- action parsing ------------------------------------------------------------------------------

_NUM = r"(-?[0-9]{1,6})"
_PAIR = re.compile(
    r"\s*([A-Za-z])\s*(?::|=|->)?\s*(?:"
    r"\(\s*" + _NUM + r"\s*(?:,|;|\s)\s*" + _NUM + r"\s*\)"
    r"|\[\s*" + _NUM + r"\s*(?:,|;|\s)\s*" + _NUM + r"\s*\]"
    r"|" + _NUM + r"(?:\s*,\s*|\s+)" + _NUM + r"(?![0-9)\]])"
    r")",
    re.ASCII,
)
_SEP = re.compile(r"\s*[,;]?\s*", re.ASCII)
# fast path for the canonical form `A:(3,4), b:(0,12)` (same meaning as the general scanner)
_CANON_PAIR = r"[A-Za-z]:\([0-9]{1,2},[0-9]{1,2}\)"
_CANON = re.compile(_CANON_PAIR + r"(?:, ?" + _CANON_PAIR + r")*")
_CANON_ITEM = re.compile(r"([A-Za-z]):\(([0-9]{1,2}),([0-9]{1,2})\)")
MAX_ACTION_CHARS = 2000


def _check_pair(letter: str, r: int, c: int, known: set[str], seen: dict[str, Cell], n: int) -> str:
    """Why one parsed pair makes the answer invalid, or "" if it is fine."""
    if letter not in known:
        hint = ""
        if letter.swapcase() in known:
            hint = f" (letters are case-sensitive: {letter.swapcase()!r} is a piece, {letter!r} is not)"
        return f"there is no piece {letter!r}{hint}"
    if letter in seen:
        return f"piece {letter!r} is named twice"
    if not (0 <= r < n and 0 <= c < n):
        return f"cell ({r},{c}) for piece {letter!r} is off the board (rows and columns 0-{n - 1})"
    return ""


def parse_prediction(text: str, pieces: Sequence[str], n: int) -> tuple[dict[str, Cell] | None, str]:
    """Parse `A:(r,c), b:(r,c), ...`. Returns (predictions, "") or (None, reason it is invalid)."""
    if not text:
        return None, "the answer is empty"
    if len(text) > MAX_ACTION_CHARS:
        return None, f"the answer is too long ({len(text)} characters)"
    known = set(pieces)
    out: dict[str, Cell] = {}
    if _CANON.fullmatch(text):
        for letter, rs, cs in _CANON_ITEM.findall(text):
            why = _check_pair(letter, int(rs), int(cs), known, out, n)
            if why:
                return None, why
            out[letter] = (int(rs), int(cs))
        return out, ""
    pos = 0
    while pos < len(text):
        m = _PAIR.match(text, pos)
        if m is None:
            return None, f"could not read a piece:(row,col) pair at {text[pos:pos + 20]!r}"
        letter = m.group(1)
        nums = [g for g in m.groups()[1:] if g is not None]
        r, c = int(nums[0]), int(nums[1])
        why = _check_pair(letter, r, c, known, out, n)
        if why:
            return None, why
        out[letter] = (r, c)
        pos = m.end()
        pos = _SEP.match(text, pos).end()
    return out, ""


# ----- the game ------------------------------------------------------------------------------------

class ChessGame(Game[ChessConfig]):
    """Chess: hidden-rule piece-position prediction (not real chess).

    Choices where the spec is silent (all stated in `rules()` too):
    - Rule families, each drawn with equal probability per piece:
      * stationary: never moves;
      * fixed step: one of the 8 king moves every tick; placed so that its straight path stays on
        the board for the whole episode window (t-6 through the last predicted board), so it never
        needs to wrap or bounce;
      * cycle: a primitive cycle (not a repetition of a shorter one) of 2-4 steps, each step
        (dr, dc) with |dr|, |dc| <= 2, not (0, 0); placed so its path stays on the board for the
        whole window;
      * diagonal bounce: velocity (+-1, +-1); each tick, a component whose step would leave the board
        is reversed first (both at a corner), then the piece moves (row 14 moving +1 goes to 13);
      * wrap drift: a constant (dr, dc) with |dr|, |dc| <= 2, not (0, 0) and not a one-cell diagonal
        (those are bounce moves), rows and columns taken modulo the board size;
      * patrol: one cell per tick around the border of a fixed rectangle rows r0..r1, cols c0..c1,
        always clockwise (as drawn) or always counter-clockwise; (r1 - r0, c1 - c0) is a square
        (1,1), (2,2), (3,3) or a one-cell-thick strip (1,2), (2,1), (1,3), (3,1), drawn uniformly
        from those seven (bigger or 2x3 rectangles are left out because 7 boards would not always
        determine their next cell); any start cell on the loop.
    - Generation draws the pieces one at a time from the episode RNG (family first, then its
      parameters and start) and redraws a piece whose trajectory would share a cell with an already
      placed piece at any time of the window (from t-6 to the last predicted board), so the
      accepted instance never has two pieces on a cell. After 100 failed draws the piece gets a
      new family; after 4 families the whole instance is drawn again (same RNG; never seen in
      practice). Swapping cells or passing through each other between ticks is allowed.
    - Identifiability: every piece's next cell is determined by its last 7 positions under the
      families above (`candidate_cells` gives exactly one cell) at every prediction. For the first
      five families this holds by construction (one-cell diagonals are bounce-only, fixed steps
      and cycles never leave the board); for patrols it holds for every start cell of the seven
      shapes (checked by `patrol_phases`, a safety net the generator still consults). The
      reference policy relies on this and scores 1.0.
    - Letters are a random sample of A-Z and a-z (after the pieces are placed), listed in ASCII
      order (A-Z before a-z); the i-th placed piece gets the i-th letter of that order.
    - Cells are encoded internally as (t << 12) | (r << 6) | c, so the board size must be <= 64.
    - Action parsing: letters are case-sensitive; a pair is `A:(r,c)`, also `A:(r, c)`, `A (r,c)`,
      `A=(r,c)`, `A:[r,c]`, `A:r,c`, `A r c`; pairs separated by commas, semicolons or blanks.
      A piece named twice, an unknown letter, a malformed pair, an off-board cell, an empty answer,
      or leftover text makes the whole answer invalid: it earns 0 for that tick and the world
      still advances (same in both modes). `END` stops the episode without advancing the world.
    """

    name = "chess"
    fixed_length = True  # the rules' max steps are its length: the last one ends the game
    title = "Chess (hidden-rule prediction)"
    description = "Infer each piece's hidden movement rule from past boards and predict its next cell."
    CONFIGS = {
        "explore": ChessConfig(max_steps=5, size=15, pieces=12),
        "eval": ChessConfig(max_steps=5, size=15, pieces=22),
    }

    # ----- generation -------------------------------------------------------------------------
    def _setup(self) -> None:
        n = self.config.size
        self.size = n
        self.horizon = HISTORY + self.max_steps  # boards at times 0 .. horizon-1
        self.tick = 0  # ticks advanced; t0 is time HISTORY - 1 + tick
        self._board_cache: dict[int, tuple[str, ...]] = {}
        self._text_cache: dict[int, str] = {}
        self._obs_cache: tuple[int, str] | None = None
        while True:
            placed = self._generate()
            if placed is not None:
                break
        letters = sorted(self.rng.sample(LETTERS, self.config.pieces))
        self.pieces: tuple[str, ...] = tuple(letters)
        self.traj: dict[str, tuple[Cell, ...]] = {}
        self.hidden_rules: dict[str, tuple] = {}
        for letter, (rule, traj) in zip(letters, placed):
            self.traj[letter] = traj
            self.hidden_rules[letter] = rule

    def _generate(self) -> list[tuple[tuple, tuple[Cell, ...]]] | None:
        n, horizon = self.size, self.horizon
        occupied: set[int] = set()  # (t << 12) | (r << 6) | c of every placed piece
        placed = []
        rnd = self.rng.random
        for _ in range(self.config.pieces):
            for _family_try in range(4):
                family = FAMILIES[int(rnd() * len(FAMILIES))]
                for _attempt in range(100):
                    drawn = self._draw_piece(family, n, horizon)
                    if drawn is None:
                        continue
                    rule, base, rel = drawn
                    keys = [base + o for o in rel] if base else rel
                    if not occupied.isdisjoint(keys):
                        continue
                    occupied.update(keys)
                    placed.append((rule, tuple([((k >> 6) & 63, k & 63) for k in keys])))
                    break
                else:
                    continue  # this family does not fit anywhere any more: draw another family
                break
            else:
                return None  # crowded: start the whole instance again (same RNG)
        return placed

    def _draw_piece(self, family: str, n: int, horizon: int) -> tuple[tuple, int, tuple[int, ...]] | None:
        """One piece of the given family: (hidden rule, base, keys) where its cell at time t is
        encoded as base + keys[t] = (t << 12) | (r << 6) | c; None when the drawn parameters cannot
        stay on the board (the caller draws again)."""
        rnd = self.rng.random  # uniform draws: int(rnd() * m) is uniform on 0..m-1
        if family == "stationary":
            r, c = int(rnd() * n), int(rnd() * n)
            return ("stationary",), (r << 6) | c, _still_keys(horizon)
        if family in ("fixed", "cycle"):
            if family == "fixed":
                steps = (KING[int(rnd() * len(KING))],)
            else:
                k = CYCLE_LENGTHS[int(rnd() * len(CYCLE_LENGTHS))]
                steps = tuple([SMALL_STEPS[int(rnd() * len(SMALL_STEPS))] for _ in range(k)])
                if not _primitive(steps):
                    return None
            rel, rmin, rmax, cmin, cmax = _walk_keys(steps, horizon)
            if rmax - rmin >= n or cmax - cmin >= n:
                return None
            r0 = -rmin + int(rnd() * (n - rmax + rmin))
            c0 = -cmin + int(rnd() * (n - cmax + cmin))
            return (family, steps), (r0 << 6) + c0, rel
        if family == "bounce":
            r, c = int(rnd() * n), int(rnd() * n)
            vel = DIAGONALS[int(rnd() * 4)]
            return ("bounce", vel), 0, _bounce_keys(n, horizon, r, c, vel)
        if family == "wrap":
            r, c = int(rnd() * n), int(rnd() * n)
            vel = WRAP_STEPS[int(rnd() * len(WRAP_STEPS))]
            return ("wrap", vel), 0, _wrap_keys(n, horizon, r, c, vel)
        # patrol
        h, w = PATROL_SHAPES[int(rnd() * len(PATROL_SHAPES))]
        clockwise = rnd() < 0.5
        phases = patrol_phases(h, w, clockwise, self.max_steps)
        if not phases or h >= n or w >= n:
            return None
        phase = phases[int(rnd() * len(phases))]
        r0, c0 = int(rnd() * (n - h)), int(rnd() * (n - w))
        return (("patrol", (r0, c0, h, w, clockwise)), (r0 << 6) | c0,
                _patrol_keys(h, w, clockwise, phase, horizon))

    # ----- play -------------------------------------------------------------------------------
    @property
    def now(self) -> int:
        """The time index of board t0."""
        return HISTORY - 1 + self.tick

    def _apply(self, action: str) -> Outcome:
        n = self.size
        preds, why = parse_prediction(action, self.pieces, n)
        target = self.now + 1
        if target >= self.horizon:  # cannot happen within max_steps; kept safe
            return Outcome("Invalid action: no further boards exist.", valid=False)
        self.tick += 1
        if preds is None:
            example = ", ".join(f"{p}:(r,c)" for p in self.pieces[:2])
            return Outcome(
                f"Invalid action: {why}. Name each piece at most once with a board cell, like "
                f"{example}, rows and columns 0-{n - 1}. This answer counts as no correct "
                "predictions; the world advanced one tick (the new board is t0).",
                0.0, valid=False)
        correct = sum(1 for p, cell in preds.items() if self.traj[p][target] == cell)
        reward = correct / len(self.pieces)
        return Outcome(
            f"Prediction recorded for {len(preds)} of {len(self.pieces)} pieces; the world advanced "
            "one tick (the new board is t0).",
            reward, info={"named": len(preds)})

    # ----- what the agent sees -----------------------------------------------------------------
    def _board(self, t: int) -> tuple[str, ...]:
        """Board at time t as row strings ('.' empty), cached (boards never change)."""
        rows = self._board_cache.get(t)
        if rows is None:
            n = self.size
            grid = [["."] * n for _ in range(n)]
            for p in self.pieces:
                r, c = self.traj[p][t]
                grid[r][c] = p
            rows = tuple(["".join(row) for row in grid])
            self._board_cache[t] = rows
        return rows

    def _board_text(self, t: int) -> str:
        text = self._text_cache.get(t)
        if text is None:
            lines = [_column_header(self.size)]
            for r, row in enumerate(self._board(t)):
                lines.append(f"{r:>3}  " + "  ".join(row))
            text = "\n".join(lines)
            self._text_cache[t] = text
        return text

    def _times(self) -> range:
        return range(self.now - HISTORY + 1, self.now + 1)

    def view(self) -> ChessView:
        return ChessView(self.size, self.tick, self.max_steps, LABELS,
                         tuple(self._board(t) for t in self._times()), self.pieces)

    def observation(self) -> str:
        if self._obs_cache is not None and self._obs_cache[0] == self.tick:
            return self._obs_cache[1]
        n = self.size
        lines = [
            f"Predictions made: {self.tick} of {self.max_steps}. Board {n}x{n}, rows and columns "
            f"0-{n - 1}, cell (row,col), (0,0) top-left, '.' empty.",
            f"The last {HISTORY} boards, oldest first:",
        ]
        for label, t in zip(LABELS, self._times()):
            lines.append(f"{label}:")
            lines.append(self._board_text(t))
        lines.append(f"Pieces to predict ({len(self.pieces)}): {' '.join(self.pieces)}")
        lines.append("Predict the cell of every piece on the next board (t+1) as "
                     + ", ".join(f"{p}:(row,col)" for p in self.pieces[:2]) + ", ...")
        text = "\n".join(lines)
        self._obs_cache = (self.tick, text)
        return text

    def render(self, focus: int = 0) -> ChessBoards:
        """The boards for the terminal (s3gym_games.chess.render): t0 large with coordinates, unless
        `focus` counts back to an older board, the others in a strip as the width allows."""
        return ChessBoards(LABELS, [self._board(t) for t in self._times()], self.pieces, focus)

    def rules(self) -> str:
        n, k, steps = self.config.size, self.config.pieces, self.config.max_steps
        return (
            "Hidden-rule board (this is not real chess). A {n}x{n} board (rows and columns 0-{m}, cells "
            "written (row,col), (0,0) top-left) holds {k} pieces, each a distinct letter; letters are "
            "case-sensitive (A and a are different pieces). Every tick each piece moves by its own "
            "hidden, deterministic rule, which never changes. Each rule is one of:\n"
            "- stationary: never moves;\n"
            "- fixed step: the same king move (dr,dc) every tick (dr,dc in -1..1); it never leaves "
            "the board during the game;\n"
            "- cycle: repeats a cycle of 2-4 steps, each (dr,dc) with dr,dc in -2..2, not (0,0) "
            "(e.g. a knight-like alternation (2,1),(-2,1)); the cycle is not a repetition of a "
            "shorter one, and the piece never leaves the board during the game;\n"
            "- diagonal bounce: moves one cell diagonally each tick; if a step would leave the "
            "board, that component of its direction is reversed first (both at a corner), then it "
            "moves (e.g. on row {m} moving (+1,+1) it goes to row {m1} and keeps moving (-1,+1));\n"
            "- wrap drift: the same step (dr,dc) every tick with dr,dc in -2..2, not (0,0) and not "
            "a one-cell diagonal; leaving one edge it re-enters at the opposite edge (row and "
            "column are taken modulo {n});\n"
            "- patrol: one cell per tick around the border of a fixed rectangle, always clockwise "
            "or always counter-clockwise; the rectangle is a square whose corners are 1, 2 or 3 "
            "rows and columns apart (e.g. corners (2,3) and (4,5)), or one cell thick with the "
            "long side 2 or 3 apart (e.g. corners (6,1) and (7,4): 2 rows by 4 columns of cells "
            "on its border).\n"
            "Two pieces never share a cell, and the last 7 positions of a piece always determine "
            "its next cell under these rules.\n"
            "Each turn you see the last 7 boards, oldest first (t-6 ... t0, t0 is now), and the list "
            "of pieces. Predict the cell of every piece on the next board (t+1); then the world "
            "advances one tick and the new board becomes t0. There are {s} predictions. Each one "
            "earns the fraction of all {k} pieces whose cell you predicted exactly (an omitted piece "
            "counts as wrong). An answer that names a piece twice, uses a letter that is not a "
            "piece, or has a malformed or off-board pair is invalid: it earns nothing for that "
            "tick and the world still advances. Answering END stops the game; predictions not made "
            "earn nothing. The final score is the total earned divided by {s} (0 to 1)."
        ).format(n=n, m=n - 1, m1=n - 2, k=k, s=steps)

    def answer_format(self) -> str:
        return "<letter>:(<row>,<col>), <letter>:(<row>,<col>), ...   (example: A:(3,4), b:(0,12), K:(14,7))"

    def action_grammar(self) -> str:
        """Every piece once, in the listed order, each with a coordinate pair. A fixed sequence
        (rather than a repeated alternation) keeps grammar-constrained decoding fast and stops
        a tiny model from repeating entries until its token cap."""
        pieces = getattr(self, "pieces", ())
        if not pieces:
            return '"END"'
        num = "(" + " | ".join(f'"{i}"' for i in range(self.config.size)) + ")"
        entries = [f'"{p}:(" {num} "," {num} ")"' for p in pieces]
        return ' ", " '.join(entries)

    def score(self) -> float:
        return sum(self.rewards) / self.max_steps

    def sample_action(self, rng: random.Random) -> str:
        pieces = list(getattr(self, "pieces", ())) or ["A"]
        n = self.config.size
        rnd = rng.random
        roll = rnd()
        if roll < 0.80:
            chosen = pieces[:]
        elif roll < 0.95:
            chosen = [p for p in pieces if rnd() < 0.6] or pieces[:1]
        else:
            chosen = pieces[:] + [pieces[int(rnd() * len(pieces))]]  # a duplicate: invalid
        rng.shuffle(chosen)
        return ", ".join([f"{p}:({int(rnd() * n)},{int(rnd() * n)})" for p in chosen])

    @classmethod
    @classmethod
    def same_action(cls, a: str, b: str) -> bool:
        """Letters are pieces and case-sensitive (A and a are different pieces): compared as written."""
        return clean_action(a) == clean_action(b)

    @classmethod
    def score_eps(cls, mode: str) -> float:
        return 1.0 / cls.CONFIGS[mode].pieces

    @classmethod
    def score_range(cls, mode: str) -> tuple[float, float]:
        return (0.0, 1.0)

    @classmethod
    def score_per_reward(cls, mode: str) -> float:
        """The rules divide the summed step rewards by the max steps (games.md): 1 / max_steps."""
        return 1.0 / min(cls.CONFIGS[mode].max_steps, HARNESS_STEP_CAP)

    @classmethod
    def step_reward_range(cls, mode: str) -> tuple[float, float]:
        """The fraction of pieces predicted right: none (or an invalid answer) 0, all of them 1."""
        return (0.0, 1.0)
