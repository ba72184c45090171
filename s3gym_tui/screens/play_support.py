"""Non-widget helpers of the play screen: model call settings, litellm warm-up, replayed boards."""

from __future__ import annotations

import asyncio
import gc
import importlib
import sys
from typing import Any, Optional, Protocol, Sequence

import s3gym_games as games
from s3gym_tui.models import Episode, Step

_heap_frozen = False


class PlayHost(Protocol):
    """What the play screen's parts (LiveDriver, ForkControls, CreditLink) use of the screen that owns
    them. The parts are typed by this, not by PlayScreen, so they never import the screen back (the
    screen imports its parts: no circle play <-> play_live <-> play_replay)."""

    app: Any
    episode: Optional[Episode]
    steps: list[Step]
    position: int
    workers: Any

    def notify(self, message: str, **kwargs: Any) -> Any: ...

    def post_message(self, message: Any) -> bool: ...

    def run_worker(self, work: Any, **kwargs: Any) -> Any: ...

    def call_after_refresh(self, callback: Any, *args: Any) -> bool: ...

    def refresh_chrome(self) -> None: ...

    def show_proposal(self, proposal: Any) -> None: ...

    def add_step(self, episode: Episode, step: Step) -> None: ...

    def show_latest(self) -> None: ...


def call_settings(model: str, app_settings: Any = None):
    """Interactive calls: the model's own api base, max tokens, timeout, decoding and model arguments
    (config file or the app's model settings), else the engine's defaults; fewer retries (a person
    is waiting)."""
    from s3gym_tui.engine.llm import CallSettings

    extra = {}
    if app_settings is not None:
        own = app_settings.model_settings(model)
        extra = {k: v for k, v in (("api_base", own.api_base), ("max_tokens", own.max_tokens),
                                   ("timeout_s", own.timeout_s), ("decoding", own.decoding)) if v is not None}
        if own.model_args:
            extra["model_args"] = tuple(own.model_args.items())
    return CallSettings(model=model, max_retries=2, **extra)


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


def typical_step(latencies_ms: Sequence[float], game: str) -> str:
    """'typical step 8.1 s (median of 40 stored steps on chess)': the median call time of the model's
    stored steps (steps.latency_ms), or '' when none is stored."""
    import statistics

    if not latencies_ms:
        return ""
    median = statistics.median(latencies_ms) / 1000
    shown = f"{median:.1f} s" if median < 60 else f"{median / 60:.1f} min"
    n = len(latencies_ms)
    return f"typical step {shown} (median of {n} stored step{'s' if n != 1 else ''} on {game})"


def call_so_far(progress: Any) -> str:
    """What the call under way has done, as its provider reports it (engine.call_progress): the
    prompt read, the tokens written or streamed, the retries and why ('' when nothing is known)."""
    return progress.describe() if progress is not None else ""


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
