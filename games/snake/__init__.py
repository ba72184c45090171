"""Snake: steer a growing snake to apples on a walled 10x10 grid with a few fixed obstacles."""

from s3gym_games.snake.game import SnakeGame as GAME
from s3gym_games.snake.policy import SnakePolicy as POLICY

__all__ = ["GAME", "POLICY"]
