"""Events the engine yields as values: the store persists them, the UI and CLI render them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional, Union

from s3gym_tui.models import Checkpoint, Episode, Run, Step, Summary


@dataclass(frozen=True)
class EpisodeStarted:
    episode: Episode


@dataclass(frozen=True)
class StepStarted:
    episode_id: str
    index: int


@dataclass(frozen=True)
class StepDone:
    episode: Episode
    step: Step


@dataclass(frozen=True)
class EpisodeDone:
    episode: Episode


@dataclass(frozen=True)
class SummaryWritten:
    summary: Summary


@dataclass(frozen=True)
class CheckpointScored:
    checkpoint: Checkpoint


@dataclass(frozen=True)
class RunFinished:
    run: Run
    error: Optional[str] = None


Event = Union[EpisodeStarted, StepStarted, StepDone, EpisodeDone, SummaryWritten, CheckpointScored, RunFinished]
EventSink = Callable[[Event], None]


def ignore(_: Event) -> None:
    """The default sink."""
