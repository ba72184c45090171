"""Chess (hidden-rule piece-position prediction): infer each piece's movement rule, predict its next cell."""

from games.chess.game import ChessGame as GAME
from games.chess.policy import ChessPolicy as POLICY

__all__ = ["GAME", "POLICY"]
