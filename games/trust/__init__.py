"""Trust Evolution: an iterated prisoner's dilemma against a hidden, fixed opponent strategy."""

from games.trust.game import TrustGame as GAME
from games.trust.policy import TrustPolicy as POLICY

__all__ = ["GAME", "POLICY"]
