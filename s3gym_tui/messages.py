"""Past-tense UI messages posted by workers; screens handle them and own their UI state."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional

from textual.message import Message

from s3gym_tui.models import Summary


@dataclass
class LiveEvent(Message):
    """An event of a live episode (engine.events: StepDone, ProposalMade, ...), shown by its screen."""

    event: Any


@dataclass
class SummaryEdited(Message):
    summary: Summary


@dataclass
class SummaryTested(Message):
    """Test-this-summary finished: the mean verifier score of the run's eval seeds with it."""

    summary_id: str
    scores: tuple[float, ...] = ()
    mean: Optional[float] = None
    error: Optional[str] = None


@dataclass
class ReportBuilt(Message):
    """Run reports (engine.report.RunReport) and the Summary-vs-History rows are ready."""

    reports: list
    deltas: list
    error: Optional[str] = None
    generation: int = 0  # which build this answers (the screen shows only the latest)


@dataclass
class TourBuilt(Message):
    """The demo's guided tour (engine.tour.Tour) was read from the store (None with an error)."""

    tour: Any = None
    error: Optional[str] = None


@dataclass
class PairsListed(Message):
    """History-vs-Summary evaluation pairs (engine.compare.EpisodePair), best first."""

    pairs: list
    error: Optional[str] = None


@dataclass
class StepFailed(Message):
    """An action could not be executed or stored; the episode is intact."""

    error: str


@dataclass
class TrainingViewBuilt(Message):
    """A run's datasets and training checkpoints are ready (training.view.TrainingView)."""

    view: Any = None
    error: Optional[str] = None


@dataclass
class SweepsRead(Message):
    """The stored sweeps and the chosen one's per-run progress, read by a thread worker."""

    sweeps: list  # models.Sweep, newest first
    sweep_id: Optional[str] = None
    progress: Optional[list] = None  # store.sweeps.RunProgress of the chosen sweep
    usage: Optional[dict] = None
    error: Optional[str] = None


@dataclass
class StoreChanged(Message):
    """Some process committed to the store (seen through SQLite's data_version)."""

    generation: int


@dataclass
class CreditProgressed(Message):
    """A credit computation for `episode_id` moved on: `done` of `total` parts (None: not known)."""

    episode_id: str
    done: Optional[int]
    total: Optional[int]
    what: str = ""


@dataclass
class CreditComputed(Message):
    """A credit computation for `episode_id` ended: stored, cancelled, or failed (`error`, one line)."""

    episode_id: str
    cancelled: bool = False
    error: Optional[str] = None
