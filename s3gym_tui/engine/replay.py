"""A stored episode's game state at any position, rebuilt from its actions."""

from __future__ import annotations

from typing import Any, Sequence

import s3gym_games as games
from s3gym_tui.models import Episode, Step


class ReplayBoard:
    """The game state after the first `position` steps of an episode, stepping forward incrementally
    and rebuilding only when moving back. `steps` is read, not copied: a live episode's list grows."""

    def __init__(self, episode: Episode, steps: Sequence[Step]) -> None:
        self.episode = episode
        self.steps = steps
        self._game: Any = None
        self._at = -1

    def at(self, position: int) -> Any:
        if self._game is None or position < self._at:
            self._game = games.make(self.episode.game, self.episode.mode)
            self._game.reset(self.episode.seed)
            self._at = 0
        while self._at < position:
            self._game.step(self.steps[self._at].action)
            self._at += 1
        return self._game

    def reset(self) -> None:
        """Forget the cached state (the steps were replaced)."""
        self._game, self._at = None, -1
