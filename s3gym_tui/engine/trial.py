"""Trying one summary version outside the protocol: the run's evaluation seeds, eval mode, that
version as the hint, as standalone episodes (no run, so the run's record is never changed)."""

from __future__ import annotations

import asyncio
import statistics
from dataclasses import dataclass
from typing import Optional

from s3gym_tui.engine.events import EventSink, ignore
from s3gym_tui.engine.experience import ExperienceState
from s3gym_tui.engine.play import new_play_session
from s3gym_tui.engine.runner import call_settings
from s3gym_tui.engine.visibility import Vantage, summary_x
from s3gym_tui.models import Run, Summary


@dataclass(frozen=True)
class SummaryTrial:
    """The outcome of `try_summary`: the episodes played, their verifier scores and the mean."""

    summary_id: str
    version: int
    episode_ids: tuple[str, ...]
    scores: tuple[float, ...]

    @property
    def mean(self) -> Optional[float]:
        return statistics.fmean(self.scores) if self.scores else None


async def try_summary(store, run: Run, summary: Summary, on_event: EventSink = ignore,
                      backoff_base_s: float = 0.5) -> SummaryTrial:
    """Play the run's `eval_episodes` evaluation seeds with `summary` under Hint Messages.

    The episodes stand at the state the version belongs to (engine.visibility.summary_x) and record
    it as a person's choice; the guard refuses a version built from anything that state may not see.

    Episodes are played one after another (the embedded model is not thread-safe and a local
    server is rarely faster in parallel); each is stored as a standalone evaluation episode that
    names the summary version it saw. Model failures propagate (ModelUnavailable)."""
    if summary.run_id != run.id:
        raise ValueError(f"summary v{summary.version} belongs to run {summary.run_id}, not {run.id}")
    config = run.config
    settings = call_settings(config, backoff_base_s)
    vantage = Vantage.state(run.id, summary_x(store, summary))  # the state the version belongs to
    experience = (vantage, ExperienceState(x=vantage.x, pathway="summary", summary=summary))
    ids, scores = [], []
    for j in range(config.eval_episodes):
        session = new_play_session(store, config.game, "eval", config.eval_seed(j), settings,
                                   pathway="summary", on_event=on_event, experience=experience)
        episode = await session.play()
        ids.append(episode.id)
        scores.append(float(episode.score or 0.0))
        await asyncio.sleep(0)
    return SummaryTrial(summary.id, summary.version, tuple(ids), tuple(scores))
