"""Events the engine yields as values: the store persists them, the UI and CLI render them."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Literal, Optional, Union

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


LiveState = Literal["idle", "thinking", "proposal", "running", "over"]


@dataclass(frozen=True)
class LiveChanged:
    """A live episode (engine.live) moved to `state` (or its queue or propose-then-wait changed)."""

    episode_id: str
    state: LiveState


@dataclass(frozen=True)
class ProposalMade:
    """The model proposed an action that waits for a person (propose-then-wait): not executed."""

    episode_id: str
    proposal: Any  # engine.session.Proposal


@dataclass(frozen=True)
class CallFailed:
    """A model call failed after its retries; the episode is intact and can continue."""

    episode_id: str
    error: str


@dataclass(frozen=True)
class StepRefused:
    """An action could not be stored (nothing was taken: the game stays at the stored state)."""

    episode_id: str
    error: str


Event = Union[EpisodeStarted, StepStarted, StepDone, EpisodeDone, SummaryWritten, CheckpointScored, RunFinished,
              LiveChanged, ProposalMade, CallFailed, StepRefused]
EventSink = Callable[[Event], None]


def ignore(_: Event) -> None:
    """The default sink."""
