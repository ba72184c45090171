"""Minesweeper: constraint satisfaction on a 9x9 board with 10-20 mines and first-click safety."""

from s3gym_games.minesweeper.game import MinesweeperGame as GAME
from s3gym_games.minesweeper.policy import MinesweeperPolicy as POLICY

__all__ = ["GAME", "POLICY"]
