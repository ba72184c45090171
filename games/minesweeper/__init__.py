"""Minesweeper: constraint satisfaction on a 9x9 board with 10-20 mines and first-click safety."""

from games.minesweeper.game import MinesweeperGame as GAME
from games.minesweeper.policy import MinesweeperPolicy as POLICY

__all__ = ["GAME", "POLICY"]
