"""Tetris: column-and-rotation hard drops on a small board; cleared rows score."""

from s3gym_games.tetris.game import TetrisGame as GAME
from s3gym_games.tetris.policy import TetrisPolicy as POLICY

__all__ = ["GAME", "POLICY"]
