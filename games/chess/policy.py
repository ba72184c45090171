"""Chess reference policy: infer each piece's rule from its 7 visible positions, predict its next cell."""

from __future__ import annotations

from s3gym_games.base import Move, Policy
from s3gym_games.chess.game import Cell, ChessView, candidate_cells


def piece_tracks(view: ChessView) -> dict[str, list[Cell]]:
    """Each piece's positions on the visible boards, oldest first (read off the board rows)."""
    tracks: dict[str, list[Cell]] = {p: [] for p in view.pieces}
    for board in view.boards:
        for r, row in enumerate(board):
            for c, ch in enumerate(row):
                if ch != "." and ch in tracks:
                    tracks[ch].append((r, c))
    return tracks


class ChessPolicy(Policy):
    """Rule inference from the view only. For every piece it tests every hypothesis of every rule
    family (stationary, fixed king step, wrap drift, diagonal bounce, primitive cycles of 2-4 steps,
    rectangular patrols with sides 1-4, both senses) against the piece's 7 visible positions and
    predicts the next cell of a consistent hypothesis (the first family in that order when several
    disagree; they never do on generated instances). Self-score: the mean over pieces of
    1 / (number of distinct candidate cells), 0 for a piece with no consistent hypothesis."""

    def act(self, view: ChessView) -> Move:
        tracks = piece_tracks(view)
        parts = []
        expected = 0.0
        for p in view.pieces:
            track = tracks[p]
            if not track:
                continue
            if len(track) != len(view.boards):  # a piece missing from a board: cannot happen
                parts.append(f"{p}:({track[-1][0]},{track[-1][1]})")
                continue
            cells = candidate_cells(track, view.size)
            if cells:
                expected += 1.0 / len(cells)
                r, c = cells[0]
            else:
                r, c = track[-1]
            parts.append(f"{p}:({r},{c})")
        n = max(1, len(view.pieces))
        return Move(", ".join(parts), round(expected / n, 4))
