"""Tetris reference policy: El-Tetris placement evaluation with a one-piece look-ahead on the preview."""

from __future__ import annotations

from s3gym_games.base import Move, Policy
from s3gym_games.tetris.game import SHAPES, Shape, TetrisView, column_tops, drop_at, landing_row

# El-Tetris weights (Yiyuan Lee, 2013), tuned for Pierre Dellacherie's features:
# landing height, rows eliminated, row transitions, column transitions, holes, cumulative wells.
EL_TETRIS = (-4.500158825082766, 3.4181268101392694, -3.2178882868487753,
             -9.348695305445199, -7.899265427351652, -3.3855972247263626)
TOP_OUT = -1e9
BEAM = 6  # placements of the current piece that get the look-ahead on the preview


def _distinct(piece: str) -> list[Shape]:
    """Rotations of a piece with distinct shapes (O has one, I/S/Z two), first rotation kept."""
    seen: set[tuple[int, ...]] = set()
    out = []
    for shape in SHAPES[piece]:
        if shape.rows not in seen:
            seen.add(shape.rows)
            out.append(shape)
    return out


DISTINCT = {piece: _distinct(piece) for piece in SHAPES}


def board_features(board: list[int], width: int) -> tuple[int, int, int, int]:
    """(row transitions, column transitions, holes, cumulative well depth) of a bit-mask board."""
    full = (1 << width) - 1
    walls = 1 | (1 << (width + 1))
    pair_mask = (1 << (width + 1)) - 1
    row_t = col_t = holes = wells = 0
    covered = 0
    prev = None
    depth: dict[int, int] = {}
    for row in board:
        x = (row << 1) | walls
        row_t += ((x ^ (x >> 1)) & pair_mask).bit_count()
        if prev is not None:
            col_t += (prev ^ row).bit_count()
        prev = row
        holes += (covered & ~row & full).bit_count()
        covered |= row
        # well cells: empty with both neighbours filled (walls count as filled)
        well = ~row & x & (x >> 2) & full
        if well or depth:
            new_depth: dict[int, int] = {}
            while well:
                low = well & -well
                d = depth.get(low, 0) + 1
                new_depth[low] = d
                wells += d
                well ^= low
            depth = new_depth
    col_t += (~board[-1] & full).bit_count()  # the floor counts as filled
    return row_t, col_t, holes, wells


class TetrisPolicy(Policy):
    """Scores every placement of the current piece with the El-Tetris linear evaluation (landing
    height, rows cleared, row and column transitions, holes, wells of the resulting board); the
    best BEAM placements are then re-scored by the best follow-up placement of the preview piece
    (whose features are those of the board after both drops). It uses only the view.
    expected_reward is the exact number of rows the chosen drop clears (0 on a forced top-out)."""

    def __init__(self, weights: tuple[float, ...] = EL_TETRIS, lookahead: bool = True) -> None:
        self.weights = weights
        self.lookahead = lookahead

    def _placements(self, board: list[int], piece: str, width: int):
        """(value, shape, col, new board, rows cleared) for every non-topping-out drop."""
        w_land, w_rows, w_rt, w_ct, w_holes, w_wells = self.weights
        height = len(board)
        tops = column_tops(board, width)
        out = []
        for shape in DISTINCT[piece]:
            for col in range(width - shape.width + 1):
                y = landing_row(board, shape, col, width, tops)
                if y < 0:
                    continue
                new, cleared = drop_at(board, shape, col, y, width)
                rt, ct, holes, wells = board_features(new, width)
                landing = height - y - shape.height / 2
                value = (w_land * landing + w_rows * cleared + w_rt * rt + w_ct * ct
                         + w_holes * holes + w_wells * wells)
                out.append((value, shape, col, new, cleared, landing))
        return out

    def act(self, view: TetrisView) -> Move:
        width = view.width
        board = [sum(1 << c for c, ch in enumerate(row) if ch == "*") for row in view.board]
        first = self._placements(board, view.current, width)
        if not first:  # every drop tops out: the game ends whatever we do
            return Move(f"1 {SHAPES[view.current][0].rotation}", 0.0)
        first.sort(key=lambda p: -p[0])
        best = first[0]
        if self.lookahead:
            w_land, w_rows = self.weights[0], self.weights[1]
            best_total = None
            for value, shape, col, new, cleared, landing in first[:BEAM]:
                follow = self._placements(new, view.next, width)
                own = w_land * landing + w_rows * cleared
                total = own + max(p[0] for p in follow) if follow else TOP_OUT + value
                if best_total is None or total > best_total:
                    best_total = total
                    best = (value, shape, col, new, cleared, landing)
        _, shape, col, _, cleared, _ = best
        return Move(f"{col + 1} {shape.rotation}", float(cleared))
