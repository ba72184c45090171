"""Non-widget helpers of the play screen: model call settings, litellm warm-up, replayed boards."""

from __future__ import annotations

import asyncio
import gc
import importlib
import sys
from typing import Any, Sequence

import games
from s3gym_tui.models import Episode, Step

_heap_frozen = False


def call_settings(model: str):
    """Interactive calls: the engine's defaults with fewer retries (a person is waiting)."""
    from s3gym_tui.engine.llm import CallSettings

    return CallSettings(model=model, max_retries=2)


async def ensure_litellm() -> None:
    """Import litellm (seconds, the first time) off the event loop, then freeze the long-lived heap:
    litellm's huge object graph would otherwise make every full GC pass take ~0.4 s (a visible stall
    every few steps)."""
    global _heap_frozen
    if "litellm" not in sys.modules:
        await asyncio.to_thread(importlib.import_module, "litellm")
    if not _heap_frozen:
        _heap_frozen = True
        gc.freeze()


class ReplayBoard:
    """The game state after the first `position` stored steps of an episode, stepping forward
    incrementally and rebuilding only when moving back."""

    def __init__(self, episode: Episode, steps: Sequence[Step]) -> None:
        self.episode = episode
        self.steps = list(steps)
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

    def subtitle(self, game: Any, position: int) -> str:
        final = position == len(self.steps) and position > 0
        where = f"after step {position - 1} (final)" if final else f"before step {position}"
        return f"{self.episode.mode} · seed {self.episode.seed} · {where} · {game.steps}/{game.max_steps}"
