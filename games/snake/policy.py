"""Snake reference policy: time-aware BFS to a safe apple, else tail-chasing / space-maximising."""

from __future__ import annotations

from collections import deque

from s3gym_games.base import Move, Policy
from s3gym_games.snake.game import (APPLE, BODY, DIRECTION_NAMES, DIRECTIONS, HEAD, OBSTACLE, OPPOSITE, WALL,
                              Cell, SnakeView)

_BODY_SEARCH_BUDGET = 4000  # DFS nodes spent reconstructing the body order from the grid
_MAX_BODIES = 4  # candidate body orders considered when the grid is ambiguous


def reconstruct_bodies(view: SnakeView) -> list[list[Cell]]:
    """Possible snake bodies (head first) consistent with the grid, the direction and the length.

    The grid shows body cells as 'S' without their order; the neck is the cell behind the head
    (opposite the current direction) and the rest is a simple path through all 'S' cells. When
    several orders fit, up to a few are returned (the policy then plays safe for all of them).
    """
    head = None
    body_cells: set[Cell] = set()
    for r, row in enumerate(view.grid):
        for c, ch in enumerate(row):
            if ch == HEAD:
                head = (r, c)
            elif ch == BODY:
                body_cells.add((r, c))
    if head is None:
        return [[]]
    length = len(body_cells) + 1
    if length == 1:
        return [[head]]
    dr, dc = DIRECTIONS[view.direction]
    neck = (head[0] - dr, head[1] - dc)
    starts = [neck] if neck in body_cells else sorted(
        (head[0] + a, head[1] + b) for a, b in DIRECTIONS.values() if (head[0] + a, head[1] + b) in body_cells)
    found: list[list[Cell]] = []
    budget = [_BODY_SEARCH_BUDGET]
    path = [head]
    visited = {head}

    def dfs(cell: Cell) -> None:
        if len(found) >= _MAX_BODIES or budget[0] <= 0:
            return
        budget[0] -= 1
        path.append(cell)
        visited.add(cell)
        if len(path) == length:
            found.append(list(path))
        else:
            for a, b in DIRECTIONS.values():
                n = (cell[0] + a, cell[1] + b)
                if n in body_cells and n not in visited:
                    dfs(n)
        path.pop()
        visited.discard(cell)

    for start in starts:
        dfs(start)
    if found:
        return found
    # Fallback (never expected): order the body cells by distance from the head through the body.
    order = [head]
    seen = {head}
    queue = deque([head])
    while queue:
        cell = queue.popleft()
        for a, b in DIRECTIONS.values():
            n = (cell[0] + a, cell[1] + b)
            if n in body_cells and n not in seen:
                seen.add(n)
                order.append(n)
                queue.append(n)
    order += sorted(body_cells - seen)
    return [order]


class _Board:
    """Static facts of one view: blocked cells (walls, obstacles) and apples."""

    def __init__(self, view: SnakeView) -> None:
        self.blocked: set[Cell] = set()
        self.apples: list[Cell] = []
        for r, row in enumerate(view.grid):
            for c, ch in enumerate(row):
                if ch == WALL or ch == OBSTACLE:
                    self.blocked.add((r, c))
                elif ch == APPLE:
                    self.apples.append((r, c))

    @staticmethod
    def free_times(body: list[Cell]) -> dict[Cell, int]:
        """Move count after which each body cell is vacated (if the snake does not grow)."""
        n = len(body)
        return {cell: n - i for i, cell in enumerate(body)}

    def bfs(self, body: list[Cell]) -> tuple[dict[Cell, int], dict[Cell, Cell]]:
        """Time-aware BFS from the head: a body cell can be entered once it has been vacated."""
        free_at = self.free_times(body)
        head = body[0]
        dist = {head: 0}
        parent: dict[Cell, Cell] = {}
        queue = deque([head])
        blocked = self.blocked
        while queue:
            cell = queue.popleft()
            t = dist[cell] + 1
            for a, b in DIRECTIONS.values():
                n = (cell[0] + a, cell[1] + b)
                if n in dist or n in blocked:
                    continue
                if free_at.get(n, 0) > t:
                    continue
                dist[n] = t
                parent[n] = cell
                queue.append(n)
        return dist, parent

    def tail_reachable(self, body: list[Cell]) -> bool:
        if len(body) <= 2:
            return True
        dist, _ = self.bfs(body)
        return body[-1] in dist

    def area(self, body: list[Cell]) -> int:
        """Cells reachable from the head in the time-aware sense (a measure of room to move)."""
        dist, _ = self.bfs(body)
        return len(dist) - 1


def _path_to(parent: dict[Cell, Cell], start: Cell, goal: Cell) -> list[Cell]:
    path = [goal]
    while path[-1] != start:
        path.append(parent[path[-1]])
    path.reverse()
    return path[1:]  # cells after start, ending at goal


def score_move(board: _Board, body: list[Cell], direction: str, apples: list[Cell]) -> tuple:
    """A sortable value of moving `direction` now, for one possible body order."""
    head = body[0]
    a, b = DIRECTIONS[direction]
    n = (head[0] + a, head[1] + b)
    if n in board.blocked or n in body[:-1]:
        return (0, 0, 0)
    if n in apples:
        nb = [n] + body
        if board.tail_reachable(nb):
            return (3, -1, board.area(nb))
        return (1, board.area(nb), 0)
    nb = [n] + body[:-1]
    dist, parent = board.bfs(nb)
    reachable = sorted((dist[apple], apple) for apple in apples if apple in dist)
    for d, apple in reachable[:3]:
        path = _path_to(parent, n, apple)
        after = (list(reversed(path)) + nb)[:len(nb) + 1]
        if board.tail_reachable(after):
            return (3, -(d + 1), len(dist))
    tail_ok = len(nb) <= 2 or nb[-1] in dist
    nearest = reachable[0][0] if reachable else 99
    return (2 if tail_ok else 1, len(dist), -nearest)


class SnakePolicy(Policy):
    """Path-finding snake. For each legal first move it asks: after this move, is there a shortest
    (time-aware) path to one of the nearest apples after which the head can still reach the tail?
    Such moves rank first (shorter path first). Otherwise it prefers moves after which the tail is
    still reachable (tail chasing), then the move with the most room, then the one nearer an apple.
    The body order is rebuilt from the grid (neck behind the head, then a path through the 'S'
    cells); if the grid is ambiguous each move is valued by its worst case over the possible
    orders."""

    def act(self, view: SnakeView) -> Move:
        board = _Board(view)
        bodies = reconstruct_bodies(view)
        if not bodies[0]:
            return Move("UP", 0.0)
        legal = [d for d in DIRECTION_NAMES if not (view.length > 1 and d == OPPOSITE[view.direction])]
        best_dir, best_value = legal[0], None
        for direction in legal:
            value = min(score_move(board, body, direction, board.apples) for body in bodies)
            if best_value is None or value > best_value:
                best_dir, best_value = direction, value
        head = bodies[0][0]
        a, b = DIRECTIONS[best_dir]
        expected = 1.0 if (head[0] + a, head[1] + b) in board.apples else 0.0
        return Move(best_dir, expected)
