"""Nullify: combine numbers and operators with exact rational arithmetic until the board is empty."""

from __future__ import annotations

import math
import random
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Union

from rich.text import Text

from s3gym_games.base import Game, Outcome

# A unit is a 2-tuple (kind, value):
#   ("num", Fraction)                      a signed exact rational, shown +7, -3, +5/2, 0
#   ("*", k) / ("/", k)                    multiply / divide by a non-zero integer k in [-10, 10]
#   ("sqrt", 0), ("square", 0), ("reciprocal", 0), ("floor", 0), ("ceil", 0)   unary operators
# Tuples of the same kind compare by value, so a sorted tuple of units is a canonical multiset.
Unit = tuple[str, Union[Fraction, int]]

NUM = "num"
SCALE_OPS = ("*", "/")
UNARY_OPS = ("sqrt", "square", "reciprocal", "floor", "ceil")
K_RANGE = (-10, 10)

# Readability bounds for generated instances: every number on the board during the intended
# solution has |numerator| <= MAX_NUMERATOR and denominator <= MAX_DENOMINATOR.
MAX_NUMERATOR = 100
MAX_DENOMINATOR = 12
FLOOR_FRACTIONS = (Fraction(1, 2), Fraction(1, 3), Fraction(2, 3), Fraction(1, 4), Fraction(3, 4))
# backward construction step kinds and their weights (when a number exists on the board)
STEP_KINDS = ("pair", "split", "op")
STEP_WEIGHTS = (1, 2, 5)
OP_KINDS = ("*", "/", "sqrt", "square", "reciprocal", "floor", "ceil")
OP_WEIGHTS = (4, 3, 2, 2, 2, 2, 2)


def num(value: Union[int, Fraction, str]) -> Unit:
    return (NUM, Fraction(value))


def _fraction(value: Union[int, Fraction]) -> Fraction:
    """`Fraction(value)`, without the cost of rebuilding a value that already is one."""
    return value if type(value) is Fraction else Fraction(value)


def is_num(unit: Unit) -> bool:
    return unit[0] == NUM


def format_number(x: Fraction) -> str:
    n, d = x.numerator, x.denominator  # a Fraction is kept in lowest terms with d > 0
    if n == 0:
        return "0"
    sign = "+" if n > 0 else "-"
    return f"{sign}{abs(n)}" if d == 1 else f"{sign}{abs(n)}/{d}"


def format_unit(unit: Unit) -> str:
    kind, value = unit
    if kind == NUM:
        return format_number(_fraction(value))
    if kind in SCALE_OPS:
        return f"{kind}{value}"
    return kind


_UNIT_RE = re.compile(r"^([+-]?\d{1,12})(?:/(\d{1,12}))?$")
_SCALE_RE = re.compile(r"^([*/])\s*([+-]?\d{1,3})$")


def parse_unit(text: str) -> Unit:
    """Inverse of format_unit (used by tests and tools; raises ValueError on nonsense)."""
    t = text.strip().lower()
    if t in UNARY_OPS:
        return (t, 0)
    m = _SCALE_RE.match(t)
    if m:
        k = int(m.group(2))
        if k == 0 or not K_RANGE[0] <= k <= K_RANGE[1]:
            raise ValueError(f"operator constant out of range: {text!r}")
        return (m.group(1), k)
    m = _UNIT_RE.match(t)
    if m:
        den = int(m.group(2)) if m.group(2) else 1
        if den == 0:
            raise ValueError(f"zero denominator: {text!r}")
        return num(Fraction(int(m.group(1)), den))
    raise ValueError(f"not a unit: {text!r}")


def exact_sqrt(x: Fraction) -> Fraction | None:
    """The exact non-negative square root of x, or None if x is negative or not a rational square."""
    if x < 0:
        return None
    p, q = x.numerator, x.denominator
    rp, rq = math.isqrt(p), math.isqrt(q)
    if rp * rp != p or rq * rq != q:
        return None
    return Fraction(rp, rq)


def apply_op(op: Unit, x: Fraction) -> Fraction | str:
    """Apply operator unit `op` to the number x; returns the result or an error text."""
    kind, k = op
    if kind == "*":
        return x * k
    if kind == "/":
        if k == 0:  # never generated or parsed, kept for safety
            return "division by 0"
        return x / k
    if kind == "square":
        return x * x
    if kind == "sqrt":
        if x < 0:
            return f"sqrt of a negative number ({format_number(x)})"
        r = exact_sqrt(x)
        if r is None:
            return f"sqrt of {format_number(x)} is not an exact rational"
        return r
    if kind == "reciprocal":
        if x == 0:
            return "reciprocal of 0"
        return 1 / x
    if kind == "floor":
        return Fraction(math.floor(x))
    if kind == "ceil":
        return Fraction(math.ceil(x))
    return f"unknown operator {kind!r}"


def combine(a: Unit, b: Unit) -> tuple[bool, Unit | None, str]:
    """Combine two units. Returns (legal, result unit or None when they cancel, error text)."""
    a_num, b_num = is_num(a), is_num(b)
    if a_num and b_num:
        total = _fraction(a[1]) + _fraction(b[1])
        return (True, None, "") if total == 0 else (True, (NUM, total), "")
    if not a_num and not b_num:
        return False, None, "two operators cannot be combined (one of the two units must be a number)"
    number, op = (a, b) if a_num else (b, a)
    result = apply_op(op, _fraction(number[1]))
    if isinstance(result, str):
        return False, None, result
    return True, (NUM, result), ""


def has_legal_move(units: list[Unit] | tuple[Unit, ...]) -> bool:
    """Whether any pair of distinct units can legally be combined."""
    numbers = [u for u in units if is_num(u)]
    if len(numbers) >= 2:
        return True
    if not numbers:
        return False
    x = _fraction(numbers[0][1])
    return any(not is_num(u) and not isinstance(apply_op(u, x), str) for u in units)


def _readable(x: Fraction) -> bool:
    return x != 0 and abs(x.numerator) <= MAX_NUMERATOR and x.denominator <= MAX_DENOMINATOR


@dataclass(frozen=True)
class NullifyConfig:
    max_steps: int
    min_construction: int
    max_construction: int


@dataclass(frozen=True)
class NullifyView:
    units: tuple[Unit, ...]  # board order: units[i] is shown as `i: unit`


_ACTION_RE = re.compile(
    r"^(?:combine\s*)?[\(\[]?\s*([0-9]{1,6})\s*(?:,|;|\s|\+|&|\band\b|\bwith\b)\s*([0-9]{1,6})\s*[\)\]]?$"
)


class NullifyGame(Game[NullifyConfig]):
    """Nullify.

    Rules as implemented (choices where the spec is silent are marked *):
    - Units are exact rationals (shown `+7`, `-3`, `+5/2`; *zero is shown `0`), scale operators
      `*k`, `/k` (k a non-zero integer in [-10, 10], shown `*3`, `/-2`), and the unary operators
      `sqrt`, `square`, `reciprocal`, `floor`, `ceil`.
    - `i j` combines units i and j (distinct indices). Number+number adds; an exact zero sum removes
      both and creates nothing. Number+operator (either order) applies the operator to the number.
      Illegal: operator+operator, sqrt of a negative number or of a rational that is not an exact
      square (sqrt returns the non-negative root), reciprocal of 0, division by 0 (never present
      since k != 0). Both sources disappear, the others keep their order, the result is appended
      last, and indices are renumbered from 0.
    - *Accepted action spellings (case-insensitive): `i j`, `i,j`, `i;j`, `(i, j)`, `[i j]`, `i+j`,
      `i and j`, `i with j`, `combine i j`, `combine(i, j)`; anything else (same index twice,
      out-of-range index, extra words, non-ASCII digits) is invalid.
    - Invalid actions (unparseable or illegal combinations) cost the step in both modes and leave
      the board unchanged.
    - Reward 1 on the step that empties the board (terminated), else 0. *The episode terminates
      with score 0 as soon as no pair of units can legally be combined (e.g. only operators left,
      a single unit left, or one number that no remaining operator accepts), even if the cause was
      a valid move.
    - Generation: k construction steps (explore 3-7, eval 5-10, uniform) build the board backward
      from the empty board: add a pair (x, -x), split a number c into a + b = c, or replace a number
      m by a number n and an operator with op(n) = m. No generated number is 0 and every number on
      the board during the intended solution has |numerator| <= 100 and denominator <= 12. The
      units are shuffled with the episode RNG and the reversed construction is replayed through
      the real step function (it must empty the board) before the instance is accepted.
    - *Observation: one line `index: unit` per unit; `(empty board)` once the board is empty.
    """

    name = "nullify"
    title = "Nullify"
    description = "Combine numbers and operators with exact arithmetic until everything cancels to zero."
    CONFIGS = {
        "explore": NullifyConfig(max_steps=50, min_construction=3, max_construction=7),
        "eval": NullifyConfig(max_steps=50, min_construction=5, max_construction=10),
    }

    # ----- generation -------------------------------------------------------------------
    def _setup(self) -> None:
        self.units: list[Unit] = []
        self.solution: list[str] = []
        self.construction_steps = 0
        while True:
            k = self.rng.randint(self.config.min_construction, self.config.max_construction)
            built = _construct(self.rng, k)
            if built is None:
                continue
            units, actions = built
            if self._replays_to_empty(units, actions):
                self.units = units
                self.solution = actions
                self.construction_steps = k
                return

    def _replays_to_empty(self, units: list[Unit], actions: list[str]) -> bool:
        """Replay the intended forward solution through the real step function."""
        probe = type(self)(self.mode)
        probe.seed = self.seed
        probe.units = list(units)
        probe.solution = []
        probe.construction_steps = 0
        result = None
        for action in actions:
            if probe.done:
                return False
            result = probe.step(action)
            if not result.valid:
                return False
        return result is not None and result.terminated and result.reward == 1.0 and not probe.units

    # ----- play -------------------------------------------------------------------------
    def _apply(self, action: str) -> Outcome:
        n = len(self.units)
        legal = f"answer two distinct indices from 0 to {n - 1}, e.g. `0 1`"
        m = _ACTION_RE.match(action.lower()) if len(action) <= 80 else None
        if not m:
            return Outcome(f"Invalid action: {ascii(action[:40])} is not of the form `i j`; {legal}. "
                           "The step is lost.", valid=False)
        i, j = int(m.group(1)), int(m.group(2))
        if i == j:
            return Outcome(f"Invalid action: a unit cannot be combined with itself (index {i} twice); "
                           f"{legal}. The step is lost.", valid=False)
        for idx in (i, j):
            if idx >= n:
                return Outcome(f"Invalid action: there is no unit {idx} (indices 0-{n - 1}). "
                               "The step is lost.", valid=False)
        a, b = self.units[i], self.units[j]
        ok, result, error = combine(a, b)
        if not ok:
            return Outcome(f"Invalid combination {i} ({format_unit(a)}) with {j} ({format_unit(b)}): "
                           f"{error}. The step is lost.", valid=False)
        self.units = [u for idx, u in enumerate(self.units) if idx != i and idx != j]
        if result is None:
            what = f"{format_unit(a)} and {format_unit(b)} cancelled out"
        else:
            self.units.append(result)
            what = (f"{format_unit(a)} with {format_unit(b)} gave {format_unit(result)} "
                    f"(now unit {len(self.units) - 1})")
        if not self.units:
            return Outcome(f"{what}. The board is empty: solved!", reward=1.0, terminated=True)
        if not has_legal_move(self.units):
            return Outcome(f"{what}. No legal combination remains: the board cannot be emptied. "
                           "Game over.", terminated=True, info={"dead_end": True})
        return Outcome(f"{what}.")

    # ----- presentation -----------------------------------------------------------------
    def view(self) -> NullifyView:
        return NullifyView(tuple(self.units))

    def observation(self) -> str:
        if not self.units:
            return "(empty board)"
        return "\n".join(f"{i}: {format_unit(u)}" for i, u in enumerate(self.units))

    def render(self) -> Text:
        text = Text()
        if not self.units:
            text.append("(empty board)", style="bold green")
            return text
        for i, u in enumerate(self.units):
            if i:
                text.append("\n")
            text.append(f"{i}: ", style="dim")
            if is_num(u):
                style = "bold green" if u[1] > 0 else ("bold red" if u[1] < 0 else "bold")
            else:
                style = "bold cyan" if u[0] in SCALE_OPS else "bold magenta"
            text.append(format_unit(u), style=style)
        return text

    def rules(self) -> str:
        return (
            "Nullify. The board is a numbered list of units: exact rational numbers (shown like +7, "
            "-3, +5/2) and operators: *k and /k (multiply or divide by the integer k), sqrt, square, "
            "reciprocal (1/x), floor (round down) and ceil (round up). Each turn you combine two "
            "units by their indices (in either order). Two "
            "numbers are added; if their sum is exactly 0 both vanish and nothing is created. A "
            "number and an operator (in either order) give the operator applied to the number. Two "
            "operators cannot be combined; sqrt needs a non-negative number whose square root is an "
            "exact rational (it gives the non-negative root), reciprocal of 0 is not allowed. The two "
            "units you combine disappear, the other units keep their order, the result (if any) is "
            "added at the end of the list, and the units are renumbered from 0. Arithmetic is exact "
            "(fractions, no rounding). Goal: empty the board. The game ends when the board is empty "
            "(you win) or when no legal combination is left (you lose). You have at most "
            f"{self.max_steps} turns; an invalid answer (bad format, an index that does not exist, "
            "or an illegal combination) changes nothing but still uses up a turn."
        )

    def answer_format(self) -> str:
        return "<i> <j>: the indices of the two units to combine   (example: 0 3)"

    def action_grammar(self) -> str:
        n = max(len(self.units), 1)
        idx = "(" + " | ".join(f'"{i}"' for i in range(n)) + ")"
        return f'{idx} " " {idx}'

    def score(self) -> float:
        return 1.0 if not self.units and self.seed is not None else 0.0

    def sample_action(self, rng: random.Random) -> str:
        n = len(self.units)
        if n >= 2 and rng.random() < 0.9:
            i, j = rng.sample(range(n), 2)
            return f"{i} {j}"
        return f"{rng.randint(0, n + 1)} {rng.randint(0, n + 1)}"

    @classmethod
    def score_eps(cls, mode: str) -> float:
        return 1.0

    @classmethod
    def score_range(cls, mode: str) -> tuple[float, float]:
        return (0.0, 1.0)

    @classmethod
    def step_reward_range(cls, mode: str) -> tuple[float, float]:
        """1 on the step that empties the board, else 0."""
        return (0.0, 1.0)


# ----- backward construction ---------------------------------------------------------------

def _backward_op(rng: random.Random, m: Fraction) -> tuple[Fraction, Unit] | None:
    """Choose an operator and a number n with op(n) == m, or None if none fits the bounds."""
    kinds = list(OP_KINDS)
    weights = list(OP_WEIGHTS)
    while kinds:
        kind = rng.choices(kinds, weights=weights, k=1)[0]
        idx = kinds.index(kind)
        del kinds[idx], weights[idx]
        candidates: list[tuple[Fraction, Unit]] = []
        if kind in SCALE_OPS:  # readable and exact by construction
            candidates = _scale_candidates(kind, m)
        elif kind == "sqrt":
            if m > 0:
                candidates.append((m * m, ("sqrt", 0)))
        elif kind == "square":
            r = exact_sqrt(m) if m > 0 else None
            if r is not None:
                candidates += [(r, ("square", 0)), (-r, ("square", 0))]
        elif kind == "reciprocal":
            candidates.append((1 / m, ("reciprocal", 0)))
        elif kind == "floor":
            if m.denominator == 1:
                candidates += [(m + f, ("floor", 0)) for f in FLOOR_FRACTIONS]
        elif kind == "ceil":
            if m.denominator == 1:
                candidates += [(m - f, ("ceil", 0)) for f in FLOOR_FRACTIONS]
        if kind not in SCALE_OPS:
            candidates = [(n, op) for n, op in candidates if _readable(n) and apply_op(op, n) == m]
        if candidates:
            # prefer integers for scale operators so that the numbers stay friendly
            ints = [c for c in candidates if c[0].denominator == 1]
            pool = ints if ints and kind in SCALE_OPS and rng.random() < 0.8 else candidates
            return rng.choice(pool)
    return None


def _scale_candidates(kind: str, m: Fraction) -> list[tuple[Fraction, Unit]]:
    """The readable n with n*k == m (kind `*`) or n/k == m (kind `/`), k in [-10, 10] except 0 and
    1, in increasing k; worked out on integers so that only the readable n become Fractions."""
    mn, md = m.numerator, m.denominator
    out = []
    for k in range(K_RANGE[0], K_RANGE[1] + 1):
        if k in (0, 1):
            continue
        top, bottom = (mn, md * k) if kind == "*" else (mn * k, md)
        if bottom < 0:
            top, bottom = -top, -bottom
        g = math.gcd(top, bottom)
        top, bottom = top // g, bottom // g
        if top != 0 and abs(top) <= MAX_NUMERATOR and bottom <= MAX_DENOMINATOR:
            out.append((Fraction(top, bottom), (kind, k)))
    return out


def _random_number(rng: random.Random) -> Fraction:
    if rng.random() < 0.8:
        return Fraction(rng.choice([v for v in range(-12, 13) if v != 0]))
    return Fraction(rng.choice([v for v in range(-9, 10) if v != 0]), rng.choice((2, 3, 4)))


def _construct(rng: random.Random, k: int) -> tuple[list[Unit], list[str]] | None:
    """Build a board backward from empty in k steps; return (shuffled units, forward actions)."""
    values: dict[int, Unit] = {}
    board: list[int] = []  # ids currently on the board
    forward: list[tuple[int, int, int | None]] = []  # (a, b, result id or None), in backward order
    next_id = 0

    def new(unit: Unit) -> int:
        nonlocal next_id
        values[next_id] = unit
        next_id += 1
        return next_id - 1

    for _ in range(k):
        numbers = [i for i in board if is_num(values[i])]
        kind = "pair" if not numbers else rng.choices(STEP_KINDS, weights=STEP_WEIGHTS, k=1)[0]
        done = False
        for _attempt in range(6):
            if kind == "pair":
                x = _random_number(rng)
                a, b = new(num(x)), new(num(-x))
                board += [a, b]
                forward.append((a, b, None))
                done = True
            elif kind == "split":
                c = rng.choice(numbers)
                m = _fraction(values[c][1])
                part = _random_number(rng)
                if m.denominator > 1 and rng.random() < 0.7:
                    # a part with the same denominator keeps both halves in the same "units"
                    part = Fraction(rng.choice([v for v in range(-9, 10) if v != 0]), m.denominator)
                rest = m - part
                if _readable(part) and _readable(rest):
                    board.remove(c)
                    a, b = new(num(part)), new(num(rest))
                    board += [a, b]
                    forward.append((a, b, c))
                    done = True
            else:
                c = rng.choice(numbers)
                chosen = _backward_op(rng, _fraction(values[c][1]))
                if chosen is not None:
                    n_val, op = chosen
                    board.remove(c)
                    a, o = new(num(n_val)), new(op)
                    board += [a, o]
                    forward.append((a, o, c))
                    done = True
            if done:
                break
            kind = rng.choice(("split", "op"))
        if not done:
            return None

    rng.shuffle(board)
    units = [values[i] for i in board]
    order = list(board)
    actions: list[str] = []
    for a, b, c in reversed(forward):
        if rng.random() < 0.5:
            a, b = b, a
        i, j = order.index(a), order.index(b)
        actions.append(f"{i} {j}")
        order = [x for x in order if x != a and x != b]
        if c is not None:
            order.append(c)
    return units, actions
