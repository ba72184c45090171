"""Snake: steer a growing snake to apples on a walled 10x10 grid with a few fixed obstacles."""

from games.snake.game import SnakeGame as GAME
from games.snake.policy import SnakePolicy as POLICY

__all__ = ["GAME", "POLICY"]
