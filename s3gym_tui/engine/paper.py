"""The S3Gym paper's own figures (arXiv 2608.31100), printed beside ours where the paper gives them.

Facts quoted in the project's protocol spec (protocol.md, "Reference figures"); no other source.
"""

from __future__ import annotations

# Self-judging agreement by game (share of steps where s > 0 equals r > 0).
AGREEMENT_BY_GAME: dict[str, float] = {
    "chess": 0.496, "minesweeper": 0.820, "nullify": 0.827, "pvz": 0.881,
    "snake": 0.879, "tetris": 0.846, "trust": 0.665,
}

# Summary vs History, mean Delta NABA (Summary NABA - History NABA) over the paper's 7 models.
MEAN_DELTA_NABA_BY_GAME: dict[str, float] = {
    "tetris": 6.20, "trust": 8.43, "nullify": 2.79, "chess": 3.37,
    "minesweeper": -1.12, "pvz": -2.11, "snake": -0.81,
}
PAPER_MODELS = 7  # the number of models the paper's Delta NABA means are over


def paper_agreement(game: str) -> float | None:
    return AGREEMENT_BY_GAME.get(game)


def paper_delta_naba(game: str) -> float | None:
    return MEAN_DELTA_NABA_BY_GAME.get(game)
