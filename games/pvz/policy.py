"""Plants-vs-Zombies reference policy: per-row threat simulation for emergencies, a build template
for economy and defence otherwise."""

from __future__ import annotations

from typing import Optional

from s3gym_games.base import Move, Policy
from s3gym_games.pvz.game import PLANTS, ZOMBIES, PvzView

_HORIZON = 18  # turns simulated ahead (existing zombies only; future spawns are unknown)
_FIX_TYPES = ("W", "J", "H", "S", "F")


def row_outcome(cells: list, before: list[int], after: list[int], zombies: list[list],
                horizon: int = _HORIZON) -> tuple[Optional[int], int, int]:
    """Simulate one row with no new placements and no new zombies.

    cells: the row's plants ([type, hp] or None); before/after: columns of Three-Line Shooters in
    the row above/below (they shoot into this row; assumed to survive); zombies: [col, type, hp]
    in spawn order. Returns (turn offset of the first breach or None, sun value of plants eaten,
    zombie HP left at the end)."""
    cells = [None if p is None else [p[0], p[1]] for p in cells]
    zs = [[z[0], z[1], z[2]] for z in zombies]
    eaten = 0
    for t in range(horizon):
        if not zs:
            return None, eaten, 0
        shots = list(before) + [c for c, p in enumerate(cells) if p is not None and p[0] in "WS"] + list(after)
        for col in shots:
            target = None
            for z in zs:
                if z[0] >= col and (target is None or z[0] < target[0]):
                    target = z
            if target is None:
                continue
            dmg = 1
            for c in range(col + 1, target[0] + 1):
                p = cells[c]
                if p is not None and p[0] == "H":
                    dmg += 1
            target[2] -= dmg
            if target[2] <= 0:
                zs.remove(target)
                if not zs:
                    break
        bites: dict[int, int] = {}
        movers = []
        for z in zs:
            if cells[z[0]] is not None:
                bites[z[0]] = bites.get(z[0], 0) + ZOMBIES[z[1]][2]
            else:
                movers.append(z)
        for c, dmg in bites.items():
            p = cells[c]
            p[1] -= dmg
            if p[1] <= 0:
                eaten += PLANTS[p[0]][1]
                cells[c] = None
        for z in movers:
            z[0] -= 1
            if z[0] < 0:
                return t, eaten, sum(x[2] for x in zs)
    return None, eaten, sum(z[2] for z in zs)


class _Board:
    """A mutable copy of the agent-visible state, with planned placements applied."""

    def __init__(self, view: PvzView) -> None:
        self.rows, self.cols = view.rows, view.cols
        self.sun = view.sun
        self.turn = view.turn
        self.grid: list[list] = [[None] * view.cols for _ in range(view.rows)]
        for r, c, kind, hp in view.plants:
            self.grid[r][c] = [kind, hp]
        self.zombies = [list(z) for z in view.zombies]
        self.chilied: set[int] = set()
        self.placed: list[tuple[str, int, int]] = []

    def row_zombies(self, r: int) -> list[list]:
        if r in self.chilied:
            return []
        return [[z[1], z[2], z[3]] for z in self.zombies if z[0] == r]

    def three_line_cols(self, r: int) -> list[int]:
        if not 0 <= r < self.rows:
            return []
        return [c for c, p in enumerate(self.grid[r]) if p is not None and p[0] == "S"]

    def outcome(self, r: int) -> tuple[Optional[int], int, int]:
        return row_outcome(self.grid[r], self.three_line_cols(r - 1), self.three_line_cols(r + 1),
                           self.row_zombies(r))

    def zombie_cells(self) -> set[tuple[int, int]]:
        return {(z[0], z[1]) for z in self.zombies if z[0] not in self.chilied}

    def can_place(self, kind: str, r: int, c: int) -> bool:
        return self.grid[r][c] is None and self.sun >= PLANTS[kind][1]

    def place(self, kind: str, r: int, c: int) -> None:
        self.sun -= PLANTS[kind][1]
        if kind == "F":
            self.chilied.add(r)
        else:
            self.grid[r][c] = [kind, PLANTS[kind][2]]
        self.placed.append((kind, r, c))

    def unplace(self) -> None:
        kind, r, c = self.placed.pop()
        self.sun += PLANTS[kind][1]
        if kind == "F":
            self.chilied.discard(r)
        else:
            self.grid[r][c] = None


class PvzPolicy(Policy):
    """Economy-and-defence heuristic working only from the view.

    1. Emergencies: every row is simulated ahead (existing zombies, no new spawns). For the row
       whose breach comes first it tries every single placement it can afford in that row (and a
       Three-Line Shooter in a neighbour row) and takes the one that prevents the breach at the
       least cost (sun spent + sun value of plants the simulation sees eaten); Fire Chili is thus
       the emergency tool when nothing cheaper holds. If nothing affordable prevents the breach
       and the breach is at most 3 turns away, it buys the placement that delays it most (and
       looks again); otherwise it saves sun (builds nothing else this turn).
    2. Otherwise it builds a fixed template row by row, stage by stage: Sunflowers in column 0,
       a Peashooter in column 1, a Wall-nut at the front, a Three-Line Shooter (middle rows) or a
       second Peashooter, a Torch Stump in front of the shooters, more shooters; rows with more
       zombie HP first. Late in the game it keeps a reserve for a chili.
    """

    def __init__(self, reserve_from: int = 18, reserve: int = 300, delay_within: int = 3) -> None:
        self.reserve_from = reserve_from
        self.reserve = reserve
        self.delay_within = delay_within

    # ----- emergencies -----------------------------------------------------------------
    def _threats(self, board: _Board) -> list[tuple[int, int]]:
        out = []
        for r in range(board.rows):
            breach, _, _ = board.outcome(r)
            if breach is not None:
                out.append((breach, r))
        out.sort()
        return out

    def _candidates(self, board: _Board, r: int) -> list[tuple[str, int, int]]:
        cands = []
        for kind in _FIX_TYPES:
            if board.sun < PLANTS[kind][1]:
                continue
            rows = (r,) if kind != "S" else (r - 1, r, r + 1)
            for rr in rows:
                if not 0 <= rr < board.rows:
                    continue
                if kind == "F":
                    # any free cell of the row does; the first one is enough
                    for c in range(board.cols):
                        if board.grid[rr][c] is None:
                            cands.append((kind, rr, c))
                            break
                    continue
                for c in range(board.cols):
                    if board.grid[rr][c] is None:
                        cands.append((kind, rr, c))
        return cands

    def _fix(self, board: _Board, r: int, breach: int) -> Optional[tuple[str, int, int]]:
        best_safe = None
        best_delay = None
        for kind, rr, c in self._candidates(board, r):
            board.place(kind, rr, c)
            b, eaten, _ = board.outcome(r)
            board.unplace()
            cost = PLANTS[kind][1] + eaten
            if b is None:
                key = (cost, -c if kind in "WS" else c)
                if best_safe is None or key < best_safe[0]:
                    best_safe = (key, (kind, rr, c))
            else:
                key = (-b, cost)
                if best_delay is None or key < best_delay[0]:
                    best_delay = (key, (kind, rr, c))
        if best_safe is not None:
            return best_safe[1]
        if best_delay is not None and -best_delay[0][0] > breach and (breach <= self.delay_within):
            return best_delay[1]
        return None

    # ----- development -------------------------------------------------------------------
    def _template(self, rows: int, cols: int) -> list[list[tuple[int, str]]]:
        """Build stages: each a list of (column, plant) applied to every row (S only in S rows)."""
        front = cols - 2
        torch = front - 1
        shooter_cols = list(range(1, torch))
        stages: list[list[tuple[int, str]]] = [[(0, "X")], [(1, "W")], [(front, "J")]]
        if len(shooter_cols) > 1:
            stages.append([(shooter_cols[1], "S*")])
        stages.append([(torch, "H")])
        for c in shooter_cols[2:]:
            stages.append([(c, "W")])
        return stages

    @staticmethod
    def _s_rows(rows: int) -> set[int]:
        return set(range(1, rows, 3)) if rows > 2 else set()

    def _develop(self, board: _Board) -> None:
        rows, cols = board.rows, board.cols
        zcells = board.zombie_cells()
        hp_by_row = [0] * rows
        for z in board.zombies:
            if z[0] not in board.chilied:
                hp_by_row[z[0]] += z[3]
        order = sorted(range(rows), key=lambda r: (-hp_by_row[r], r))
        s_rows = self._s_rows(rows)
        reserve = self.reserve if board.turn >= self.reserve_from else 0
        for stage in self._template(rows, cols):
            for r in order:
                for c, kind in stage:
                    if kind == "S*":
                        kind = "S" if r in s_rows else "W"
                    if kind == "X" and board.turn >= 40:
                        continue
                    if board.grid[r][c] is not None or (kind != "J" and (r, c) in zcells):
                        continue
                    if board.sun - PLANTS[kind][1] < reserve:
                        return
                    board.place(kind, r, c)

    # ----- main --------------------------------------------------------------------------
    def act(self, view: PvzView) -> Move:
        if view.lost:
            return Move("NONE", 0.0)
        board = _Board(view)
        unresolved = False
        for _ in range(2 * board.rows):
            threats = self._threats(board)
            if not threats:
                break
            breach, r = threats[0]
            fix = self._fix(board, r, breach)
            if fix is None:
                unresolved = True
                break
            board.place(*fix)
        if not unresolved:
            self._develop(board)
        survives = all(board.outcome(r)[0] != 0 for r in range(board.rows))
        action = "; ".join(f"{k} {r} {c}" for k, r, c in board.placed) or "NONE"
        return Move(action, 1.0 if survives else 0.0)
