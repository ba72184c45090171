"""Non-widget helpers of the play screens: what their parts use of a screen, model call settings, call figures."""

from __future__ import annotations

from typing import Any, Optional, Protocol, Sequence

from s3gym_tui.models import Episode, Step


class PlayHost(Protocol):
    """What the play screens' parts (ForkControls) use of the screen that owns them. The parts are
    typed by this, not by PlayScreen, so they never import the screen back (no import circle)."""

    app: Any
    episode: Optional[Episode]
    steps: list[Step]
    position: int


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
