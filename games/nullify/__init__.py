"""Nullify: combine exact rationals and operators until the board cancels to empty."""

from games.nullify.game import NullifyGame as GAME
from games.nullify.policy import NullifyPolicy as POLICY

__all__ = ["GAME", "POLICY"]
