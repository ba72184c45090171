"""Plants-vs-Zombies: spend sun on plants to hold back waves of zombies for as many turns as possible."""

from s3gym_games.pvz.game import PvzGame as GAME
from s3gym_games.pvz.policy import PvzPolicy as POLICY

__all__ = ["GAME", "POLICY"]
