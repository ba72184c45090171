"""Nullify reference policy: exact search over the visible units for a sequence that empties the board.

Two searches; a plan either returns is replayed with the real rules before it is used.

1. A fast search over *readable* states: every number non-zero with |numerator| <= 100 and
   denominator <= 12 (the bounds every generated instance keeps along its intended solution), and
   floor/ceil applied to non-integers only (the generator never does otherwise). Numbers are
   scaled integers (x * 27720, 27720 = lcm(1..12)); a state is (sorted numbers, sorted operators).
   - No operator left: solvable iff the numbers sum to 0 (non-zero numbers summing to 0 can be
     added up in any order).
   - One operator o left, numbers summing to T: solvable iff some subset has a sum s != 0 with
     o(s) - s = -T; the candidate sums s are solved for in closed form per operator.
   - Two operators: the first applied takes a subset sum of the current numbers; every subset is
     tried (subset sums tabulated once, bit masks) and the last operator decided as above.
   - Three operators: every (sub-multiset, operator) first application, then the two-operator case.
   - More operators: depth-first over single moves, ordered by how simple the result is (small
     denominators and magnitudes, with a one-operator look-ahead), exact cancellations first. An
     addition must be followed by a move that uses its result (any solution can be reordered that
     way). Dead states are memoised and pruned by necessary conditions (p-adic valuations when no
     operator can change them; floor/ceil need a source of fractions each; floor/ceil alone can
     move the total by less than 1 each).
2. If that fails (a board an agent reached that left the readable range, or contains a 0), a plain
   depth-first search over canonical multisets of exact Fractions with a node budget.

A found solution is cached per canonical state (sorted units), so later calls are look-ups.
"""

from __future__ import annotations

import math
from fractions import Fraction

from s3gym_games.base import Move, Policy
from s3gym_games.nullify.game import (MAX_DENOMINATOR, MAX_NUMERATOR, NUM, NullifyView, Unit, combine,
                                has_legal_move, is_num)

State = tuple[Unit, ...]  # a sorted tuple of units: the canonical multiset of a board
Pair = tuple[Unit, Unit]

SCALE = 27720  # lcm(1..12): every readable number times SCALE is an integer
READABLE_CX: dict[int, float] = {}
for _q in range(1, MAX_DENOMINATOR + 1):
    for _p in range(-MAX_NUMERATOR, MAX_NUMERATOR + 1):
        if _p and math.gcd(_p, _q) == 1:
            # complexity of a readable number: denominators weigh more than magnitude
            READABLE_CX[_p * SCALE // _q] = 2.0 * math.log2(_q) + 0.5 * math.log2(abs(_p) + 1)

PRIMES = (2, 3, 5, 7, 11)  # the primes of denominators <= 12


def _valuation(v: int, p: int) -> int:
    e = 0
    while v % p == 0:
        v //= p
        e += 1
    return e


VALUATIONS: dict[int, tuple[int, ...]] = {v: tuple(_valuation(v, p) for p in PRIMES) for v in READABLE_CX}
# operators that can change the p-adic valuation of a number for every prime p
_VALUATION_CHANGERS = ("sqrt", "square", "reciprocal", "floor", "ceil")

MACRO_OPS = 3  # states with at most this many operators are solved by operator-on-sum moves
LOOK = 0.5  # penalty of the one-operator look-ahead in the move ordering
FAST_NODE_LIMITS = (50_000, 300_000)  # work budgets: a first try, then a longer one
SLOW_NODE_LIMIT = 5_000
CACHE_LIMIT = 200_000

# ----- scaled-integer arithmetic (fast search) ------------------------------------------------


def _apply_scaled(op: Unit, v: int) -> int | None:
    """op applied to v/SCALE, as a scaled readable integer; None if illegal or not readable."""
    if v == 0:
        return None  # never on a readable board
    kind, k = op
    if kind == "*":
        r = v * k
    elif kind == "/":
        if v % k:
            return None
        r = v // k
    elif kind == "square":
        t = v * v
        if t % SCALE:
            return None
        r = t // SCALE
    elif kind == "sqrt":
        if v < 0:
            return None
        t = v * SCALE
        r = math.isqrt(t)
        if r * r != t:
            return None
    elif kind == "reciprocal":
        t = SCALE * SCALE
        if t % v:
            return None
        r = t // v
    elif kind in ("floor", "ceil"):
        if v % SCALE == 0:
            return None  # identity on integers: never part of a generated solution
        r = (v // SCALE) * SCALE if kind == "floor" else -((-v) // SCALE) * SCALE
    else:
        return None
    return r if r in READABLE_CX else None


def _to_scaled(units) -> tuple[tuple[int, ...], tuple[Unit, ...]] | None:
    nums, ops = [], []
    for u in units:
        if is_num(u):
            v = Fraction(u[1]) * SCALE
            if v.denominator != 1 or v.numerator not in READABLE_CX:
                return None
            nums.append(v.numerator)
        else:
            ops.append(u)
    return tuple(sorted(nums)), tuple(sorted(ops))


def _n(v: int) -> Unit:
    return (NUM, v)  # a scaled number unit (converted back to a Fraction in _unscale)


def _sum_moves(values: list[int]) -> list[Pair]:
    """Additions (none for one value) that sum `values` (total != 0) into one number with no zero
    partial sum: numbers of the total's sign first, largest first, then the others (the partial
    sums then stay strictly on the total's side of 0)."""
    total = sum(values)
    sign = 1 if total > 0 else -1
    order = sorted(values, key=lambda x: (x * sign <= 0, -abs(x)))
    moves: list[Pair] = []
    acc = order[0]
    for x in order[1:]:
        moves.append((_n(acc), _n(x)))
        acc += x
    return moves


def _zero_sum_moves(values: list[int]) -> list[Pair]:
    """Additions that empty a board of non-zero numbers summing to 0 (any order works)."""
    moves: list[Pair] = []
    rest = list(values)
    while rest:
        a, b = rest.pop(0), rest.pop(0)
        moves.append((_n(a), _n(b)))
        if a + b:
            rest.insert(0, a + b)
    return moves


def _valuation_dead(nums: tuple[int, ...], ops: tuple[Unit, ...]) -> bool:
    """A p-adic necessary condition. If no remaining operator can change p-adic valuations (only
    *k and /k with p not dividing k remain), every number ends in a zero-sum group as c * x with c a
    p-adic unit, so in each group the numbers of minimal valuation must cancel modulo p: there
    cannot be exactly one of them, and for p = 2 their count must be even."""
    if any(op[0] in _VALUATION_CHANGERS for op in ops):
        return False
    for idx, p in enumerate(PRIMES):
        if any(op[1] % p == 0 for op in ops):
            continue
        low, count = 99, 0
        for v in nums:
            e = VALUATIONS[v][idx]
            if e < low:
                low, count = e, 1
            elif e == low:
                count += 1
        if count == 1 or (p == 2 and count % 2):
            return True
    return False


def _rounding_dead(nums: tuple[int, ...], ops: tuple[Unit, ...]) -> bool:
    """Necessary conditions from floor/ceil (which the fast search applies to non-integers only).

    - Each floor/ceil argument is a non-integer, so its expression contains a "source" of a
      fraction not already used by an inner floor/ceil: a non-integer number, or a /k (|k| >= 2)
      or reciprocal operator (integers stay integers under +, *k, square, sqrt, floor, ceil).
      Hence #floor/ceil <= #non-integers + #(/k) + #reciprocal.
    - If only floor/ceil are left, each changes the total by floor(s) - s in (-1, 0) or
      ceil(s) - s in (0, 1), and the total must reach 0.
    """
    floors = ceils = sources = 0
    others = False
    for op in ops:
        kind = op[0]
        if kind == "floor":
            floors += 1
        elif kind == "ceil":
            ceils += 1
        else:
            others = True
            if kind == "reciprocal" or (kind == "/" and op[1] not in (1, -1)):
                sources += 1
    if not floors and not ceils:
        return False
    for v in nums:
        if v % SCALE:
            sources += 1
    if floors + ceils > sources:
        return True
    if others:
        return False
    total = sum(nums)
    return not -ceils * SCALE < total < floors * SCALE


class _FastSearch:
    def __init__(self, dead: set, limit: int) -> None:
        self.dead = dead  # shared across searches: a state proven dead stays dead
        self.limit = limit
        self.nodes = 0  # work done (nodes expanded, closed forms weighted by their size)
        self.aborted = False  # the budget ran out: "not found" proves nothing
        self.last: dict = {}

    def solve(self, nums: tuple[int, ...], ops: tuple[Unit, ...], forced: int | None = None
              ) -> list[Pair] | None:
        """A plan emptying the board, or None. `forced` is the result of the addition just made:
        the next move must use it (any solution can be reordered so that an addition is directly
        followed by a move using its result, so this loses nothing and avoids exploring the same
        independent moves in every order)."""
        if not nums and not ops:
            return []
        if len(nums) < 2:
            return None
        total = sum(nums)
        if not ops:
            return _zero_sum_moves(list(nums)) if total == 0 else None
        if len(ops) == 1:
            return self._last_op(nums, ops[0], total)
        if len(ops) == 2:
            key2 = (nums, ops)
            if key2 in self.dead:
                return None
            if self.aborted:
                return None
            self.nodes += 1 + (1 << len(nums)) // 64
            plan = self._two_ops(nums, ops, total)
            if plan is None:
                self.dead.add(key2)
            return plan
        key = (nums, ops, forced)
        if key in self.dead or (nums, ops, None) in self.dead:
            return None
        self.nodes += 1
        if self.nodes > self.limit:
            self.aborted = True
        if self.aborted:
            return None
        if len(ops) <= MACRO_OPS:
            plan = self._macro(nums, ops)
            if plan is None and not self.aborted:
                self.dead.add((nums, ops, None))
            return plan
        if _valuation_dead(nums, ops) or _rounding_dead(nums, ops):
            self.dead.add((nums, ops, None))
            return None
        for _, pair, nxt in self._children(nums, ops, forced):
            sub = self.solve(*nxt)
            if sub is not None:
                return [pair] + sub
        if not self.aborted:  # only a complete search proves a state dead
            self.dead.add(key)
        return None

    @staticmethod
    def _children(nums, ops, forced):
        out = []
        n = len(nums)
        present = set(nums)
        distinct_ops = sorted(set(ops))

        def pcx(v, used=None):
            """Complexity of a number, or of what one remaining operator makes of it."""
            best = READABLE_CX[v]
            for op in distinct_ops:
                if op != used or ops.count(op) > 1:
                    r = _apply_scaled(op, v)
                    if r is not None:
                        c = READABLE_CX[r] + LOOK
                        if c < best:
                            best = c
            return best
        for i in range(n):
            x = nums[i]
            if i and x == nums[i - 1]:
                continue
            cx = pcx(x)
            if forced is None or x == forced:
                # operator applications
                seen_ops = set()
                for oi, op in enumerate(ops):
                    if op in seen_ops:
                        continue
                    seen_ops.add(op)
                    r = _apply_scaled(op, x)
                    if r is None:
                        continue
                    rest = nums[:i] + nums[i + 1:]
                    pri = pcx(r, op) - cx - (2.0 if -r in present else 0.0)
                    out.append((pri, (_n(x), op),
                                (tuple(sorted(rest + (r,))), ops[:oi] + ops[oi + 1:], None)))
            # additions (including exact cancellations)
            for j in range(i + 1, n):
                y = nums[j]
                if j > i + 1 and y == nums[j - 1]:
                    continue
                if forced is not None and x != forced and y != forced:
                    continue
                s = x + y
                rest = nums[:i] + nums[i + 1:j] + nums[j + 1:]
                if s == 0:
                    out.append((-100.0, (_n(x), _n(y)), (rest, ops, None)))
                    continue
                if s not in READABLE_CX:
                    continue
                pri = pcx(s) - cx - pcx(y) + 1.0
                out.append((pri, (_n(x), _n(y)), (tuple(sorted(rest + (s,))), ops, s)))
        out.sort(key=lambda c: c[0])
        return out

    def _macro(self, nums: tuple[int, ...], ops: tuple[Unit, ...]) -> list[Pair] | None:
        """Few operators left: the first one applied takes a sub-multiset sum as argument; every
        (sub-multiset, operator) pair is tried, then the smaller cases. Exhaustive (no budget)."""
        if _valuation_dead(nums, ops) or _rounding_dead(nums, ops):
            return None
        distinct_ops = sorted(set(ops))
        for part, rest in _sub_multisets(nums):
            s = sum(part)
            if s == 0 or not rest:
                continue
            for op in distinct_ops:
                r = _apply_scaled(op, s)
                if r is None:
                    continue
                oi = ops.index(op)
                sub = self.solve(tuple(sorted(rest + [r])), ops[:oi] + ops[oi + 1:])
                if sub is not None:
                    return _sum_moves(part) + [(_n(s), op)] + sub
                if self.aborted:
                    return None
        return None

    def _two_ops(self, nums: tuple[int, ...], ops: tuple[Unit, ...], total: int) -> list[Pair] | None:
        """Two operators left. The first one applied takes the sum of a subset of the current
        numbers; the last one takes the sum of a subset of what is left plus, optionally, the
        first result. Subset sums are tabulated once per state, bit masks index them."""
        m = len(nums)
        full = (1 << m) - 1
        sums = [0] * (1 << m)
        by_sum: dict[int, list[int]] = {0: [0]}
        dup = 0
        for i in range(1, m):
            if nums[i] == nums[i - 1]:
                dup |= 1 << i
        for mask in range(1, 1 << m):
            low = mask & -mask
            v = sums[mask ^ low] + nums[low.bit_length() - 1]
            sums[mask] = v
            by_sum.setdefault(v, []).append(mask)
        orders = [ops] if ops[0] == ops[1] else [ops, (ops[1], ops[0])]
        for part in range(1, full):
            if ((part & dup) >> 1) & ~part:
                continue  # an equal value earlier in the tuple is not taken: same multiset seen
            s = sums[part]
            if s == 0:
                continue
            comp = full ^ part
            for first, last in orders:
                r = _apply_scaled(first, s)
                if r is None:
                    continue
                t2 = total - s + r
                targets = _last_op_targets(last, t2)
                if targets is not None and not targets:
                    continue
                found = None  # (mask of the last argument among the numbers, whether r is in it)
                if isinstance(targets, set):
                    for t in targets:
                        if not self._last_ok(last, t, t2):
                            continue
                        # the argument is a subset of the untouched numbers, or one plus r
                        found = next(((mask, False) for mask in by_sum.get(t, ())
                                      if mask and not mask & part), None)
                        if found is None:
                            found = next(((mask, True) for mask in by_sum.get(t - r, ())
                                          if not mask & part), None)
                        if found is not None:
                            break
                else:
                    sub = comp
                    while True:
                        for with_r in (False, True):
                            arg = sums[sub] + (r if with_r else 0)
                            if (sub or with_r) and arg and self._last_ok(last, arg, t2):
                                found = (sub, with_r)
                                break
                        if found is not None or sub == 0:
                            break
                        sub = (sub - 1) & comp
                if found is None:
                    continue
                mask2, with_r = found
                part_vals = [nums[i] for i in range(m) if part >> i & 1]
                arg_vals = [nums[i] for i in range(m) if mask2 >> i & 1] + ([r] if with_r else [])
                rest = [nums[i] for i in range(m) if (comp & ~mask2) >> i & 1]
                if not with_r:
                    rest.append(r)
                a = sum(arg_vals)
                r2 = _apply_scaled(last, a)
                return (_sum_moves(part_vals) + [(_n(s), first)] + _sum_moves(arg_vals)
                        + [(_n(a), last)] + _zero_sum_moves(rest + [r2]))
        return None

    @staticmethod
    def _last_ok(op: Unit, arg: int, total: int) -> bool:
        r = _apply_scaled(op, arg)
        return r is not None and r - arg + total == 0

    def _last_op(self, nums: tuple[int, ...], op: Unit, total: int) -> list[Pair] | None:
        """One operator left: find a proper subset whose sum s has op(s) - s == -total."""
        key = (nums, op)
        if key in self.last:
            return self.last[key]
        self.last[key] = plan = self._last_op_search(nums, op, total)
        return plan

    @staticmethod
    def _last_op_search(nums: tuple[int, ...], op: Unit, total: int) -> list[Pair] | None:
        targets = _last_op_targets(op, total)
        if targets is not None and not targets:
            return None
        sums: dict[int, int] = {0: 0}
        for i, x in enumerate(nums):
            bit = 1 << i
            for s, m in list(sums.items()):
                sums.setdefault(s + x, m | bit)
        if isinstance(targets, set):
            candidates = [(t, sums[t]) for t in targets if t in sums]
        elif isinstance(targets, tuple):  # floor/ceil: a residue modulo SCALE
            candidates = [(s, m) for s, m in sums.items() if s % SCALE == targets[0]]
        else:
            candidates = list(sums.items())
        for s, mask in candidates:
            if s == 0:
                continue
            r = _apply_scaled(op, s)
            if r is None or r - s + total != 0:
                continue
            part = [x for i, x in enumerate(nums) if mask >> i & 1]
            rest = [x for i, x in enumerate(nums) if not mask >> i & 1]
            return _sum_moves(part) + [(_n(s), op)] + _zero_sum_moves(rest + [r])
        return None


def _int_roots(b: int, c: int) -> list[int]:
    """Integer roots of x^2 + b x + c = 0."""
    disc = b * b - 4 * c
    if disc < 0:
        return []
    q = math.isqrt(disc)
    if q * q != disc:
        return []
    return [x // 2 for x in {-b + q, -b - q} if x % 2 == 0]


def _last_op_targets(op: Unit, total: int):
    """The argument sums s with op(s) - s == -total: a set of values, a (residue,) tuple for
    floor/ceil, or None when any sum must be tried."""
    kind, k = op
    L = SCALE
    if kind in ("*", "/"):
        if k == 1:
            return None
        if kind == "*":  # (k - 1) s = -total
            num, den = -total, k - 1
        else:  # s / k - s = -total  =>  s = total k / (k - 1)
            num, den = total * k, k - 1
        return {num // den} if num % den == 0 else set()
    if kind == "square":  # s^2 / L - s + total = 0
        return set(_int_roots(-L, L * total))
    if kind == "sqrt":  # r = sqrt(s L) >= 0: r - r^2 / L + total = 0
        return {r * r // L for r in _int_roots(-L, -L * total) if r > 0 and (r * r) % L == 0}
    if kind == "reciprocal":  # L^2 / s - s + total = 0
        return set(_int_roots(-total, -L * L))
    if kind == "floor":  # floor(s) - s = -(s mod L)
        return (total,) if 0 < total < L else set()
    if kind == "ceil":  # ceil(s) - s = (-s) mod L
        return (L + total,) if -L < total < 0 else set()
    return set()


def _sub_multisets(nums: tuple[int, ...]):
    """Every non-empty sub-multiset of a sorted tuple, as (part, rest) lists."""
    values: list[int] = []
    counts: list[int] = []
    for x in nums:
        if values and values[-1] == x:
            counts[-1] += 1
        else:
            values.append(x)
            counts.append(1)
    choice = [0] * len(values)
    while True:
        i = 0
        while i < len(values) and choice[i] == counts[i]:
            choice[i] = 0
            i += 1
        if i == len(values):
            return
        choice[i] += 1
        part: list[int] = []
        rest: list[int] = []
        for v, c, k in zip(values, counts, choice):
            part += [v] * k
            rest += [v] * (c - k)
        yield part, rest


def _unscale(pair: Pair) -> Pair:
    return tuple(  # type: ignore[return-value]
        (NUM, Fraction(u[1], SCALE)) if is_num(u) else u for u in pair)


# ----- plain exact search (fallback) ------------------------------------------------------


def canonical(units) -> State:
    return tuple(sorted(units))


def _numbers_only_solvable(state: State) -> bool:
    """Exact for a board without operators: the sum is 0 and it is not an odd number of zeros."""
    if sum((Fraction(u[1]) for u in state), Fraction(0)) != 0:
        return False
    if all(u[1] == 0 for u in state):
        return len(state) % 2 == 0
    return True


class _SlowSearch:
    def __init__(self) -> None:
        self.dead: set[State] = set()
        self.nodes = 0

    def solve(self, state: State) -> list[Pair] | None:
        if not state:
            return []
        if state in self.dead:
            return None
        self.nodes += 1
        if self.nodes > SLOW_NODE_LIMIT:
            return None
        numbers = sum(1 for u in state if is_num(u))
        if numbers < 2 or (numbers == len(state) and not _numbers_only_solvable(state)):
            self.dead.add(state)
            return None
        seen: set[Pair] = set()
        ranked = []
        for i in range(len(state)):
            for j in range(i + 1, len(state)):
                pair = (state[i], state[j])
                if pair in seen:
                    continue
                seen.add(pair)
                ok, result, _ = combine(*pair)
                if not ok:
                    continue
                rest = list(state[:i] + state[i + 1:j] + state[j + 1:])
                if result is not None:
                    rest.append(result)
                rank = 0 if result is None else (2 if is_num(pair[0]) and is_num(pair[1]) else 1)
                ranked.append((rank, len(ranked), pair, tuple(sorted(rest))))
        ranked.sort(key=lambda r: (r[0], r[1]))
        for _, _, pair, nxt in ranked:
            sub = self.solve(nxt)
            if sub is not None:
                return [pair] + sub
        if self.nodes <= SLOW_NODE_LIMIT:
            self.dead.add(state)
        return None


class NullifyPolicy(Policy):
    """Finds a complete solution from the visible units (see the module docstring), caches the
    next move of every state along it, and plays it. expected_reward is 1.0 exactly for the move
    that empties the board. With no solution found it plays a legal move that keeps a legal
    combination available if it can (expected_reward 0)."""

    def __init__(self) -> None:
        self._plan: dict[State, Pair] = {}
        self._fast_dead: set = set()
        self._unsolved: set[State] = set()  # states the searches gave up on (not searched again)

    def act(self, view: NullifyView) -> Move:
        units = list(view.units)
        state = canonical(units)
        if state not in self._plan and state not in self._unsolved:
            self._plan_from(state)
            if state not in self._plan:
                self._unsolved.add(state)
        pair = self._plan.get(state)
        if pair is None:
            return self._fallback(units)
        a, b = pair
        i = units.index(a)
        j = next(idx for idx, u in enumerate(units) if u == b and idx != i)
        _, result, _ = combine(a, b)
        return Move(f"{i} {j}", 1.0 if result is None and len(units) == 2 else 0.0)

    def _plan_from(self, state: State) -> None:
        if len(self._plan) + len(self._fast_dead) + len(self._unsolved) > CACHE_LIMIT:
            self._plan.clear()
            self._fast_dead.clear()
            self._unsolved.clear()
        moves = None
        scaled = _to_scaled(state)
        if scaled is not None:
            for limit in FAST_NODE_LIMITS:
                search = _FastSearch(self._fast_dead, limit)
                moves = search.solve(*scaled)
                if moves is not None:
                    moves = [_unscale(p) for p in moves]
                    break
                if not search.aborted:
                    break  # exhausted: no readable solution
        if moves is None:
            moves = _SlowSearch().solve(state)
        if moves is None:
            return
        # replay the plan with the real rules, caching the next move of each state on the way
        board = list(state)
        path: list[tuple[State, Pair]] = []
        for a, b in moves:
            if a not in board:
                return
            board.remove(a)
            if b not in board:
                return
            board.remove(b)
            ok, result, _ = combine(a, b)
            if not ok:
                return
            path.append((canonical(board + [a, b]), (a, b)))
            if result is not None:
                board.append(result)
        if board:
            return
        for key, pair in path:
            self._plan[key] = pair

    @staticmethod
    def _fallback(units: list[Unit]) -> Move:
        """No solution known: a legal combination that leaves a legal move if possible."""
        legal = []
        for i in range(len(units)):
            for j in range(i + 1, len(units)):
                ok, result, _ = combine(units[i], units[j])
                if ok:
                    rest = [u for k, u in enumerate(units) if k not in (i, j)]
                    if result is not None:
                        rest.append(result)
                    if not rest:
                        return Move(f"{i} {j}", 1.0)
                    legal.append((not has_legal_move(rest), i, j))
        if legal:
            _, i, j = min(legal)
            return Move(f"{i} {j}", 0.0)
        return Move("0 1", 0.0)
