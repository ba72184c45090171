"""Trust Evolution: an iterated prisoner's dilemma against a hidden, fixed opponent strategy."""

from s3gym_games.trust.game import TrustGame as GAME
from s3gym_games.trust.policy import TrustPolicy as POLICY

__all__ = ["GAME", "POLICY"]
