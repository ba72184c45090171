"""Nullify: combine exact rationals and operators until the board cancels to empty."""

from s3gym_games.nullify.game import NullifyGame as GAME
from s3gym_games.nullify.policy import NullifyPolicy as POLICY

__all__ = ["GAME", "POLICY"]
