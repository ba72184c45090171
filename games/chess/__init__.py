"""Chess (hidden-rule piece-position prediction): infer each piece's movement rule, predict its next cell."""

from s3gym_games.chess.game import ChessGame as GAME
from s3gym_games.chess.policy import ChessPolicy as POLICY

__all__ = ["GAME", "POLICY"]
