"""Hand-driven episodes outside the protocol: new play sessions, forks, experience borrowed from a run."""

from __future__ import annotations

import uuid
from typing import Optional

from s3gym_tui.engine.events import EventSink, ignore
from s3gym_tui.engine.experience import ExperienceState, effective_budget, history_window
from s3gym_tui.engine.llm import CallSettings
from s3gym_tui.engine.session import EpisodeSession
from s3gym_tui.models import Episode, Run, phase_of_seed


class PlayError(ValueError):
    """A play or fork request that cannot be honoured (one-line message)."""


def borrowed_experience(store, run: Optional[Run], pathway: str, model: str) -> ExperienceState:
    """What a hand-driven episode sees of a run's experience: its finished exploration episodes
    (History) or the summary version the agent would use next (Summary). Read-only."""
    if run is None or pathway in ("none", "trained"):
        return ExperienceState(0, pathway)
    explore = sorted((e for e in store.episodes(run.id, phase="explore") if e.status == "finished"),
                     key=lambda e: e.index)
    if pathway == "history":
        budget = effective_budget(model, run.config.history_budget, run.config.max_tokens)
        window = history_window(model, [(e, store.steps(e.id)) for e in explore], budget)
        return ExperienceState(len(explore), pathway, history=window)
    return ExperienceState(len(explore), pathway, summary=store.current_summary(run.id))


def new_play_session(store, game: str, mode: str, seed: int, settings: CallSettings, pathway: str = "none",
                     source_run: Optional[Run] = None, on_event: EventSink = ignore,
                     experience: Optional[ExperienceState] = None) -> EpisodeSession:
    """A standalone episode (no run) the user steps by hand. Seeds keep their phase: an eval
    episode must use an evaluation seed."""
    if phase_of_seed(seed) != mode:
        raise PlayError(f"seed {seed} belongs to the {phase_of_seed(seed)} range; "
                        f"{mode} episodes use {'seeds >= 1000000' if mode == 'eval' else 'seeds < 1000000'}")
    experience = experience or borrowed_experience(store, source_run, pathway, settings.model)
    episode = Episode(
        id=f"play-{uuid.uuid4().hex[:10]}", run_id=None, game=game, mode=mode, phase=mode, seed=seed,
        index=0, model=settings.model, pathway=pathway,
        summary_id=experience.summary.id if experience.summary else None,
        history_episode_ids=experience.history.episode_ids if experience.history else (),
        history_cut=experience.history.dropped if experience.history else 0,
    )
    return EpisodeSession(store, episode, settings, experience, on_event)


def fork_session(store, source_episode_id: str, at_step: int, settings: CallSettings,
                 pathway: Optional[str] = None, source_run: Optional[Run] = None,
                 on_event: EventSink = ignore) -> EpisodeSession:
    """Branch a new episode from the exact state after `at_step` steps of a stored episode.

    The new episode starts with copies of the source's first `at_step` steps (so replaying it
    rebuilds the same state) and continues with the chosen model and pathway."""
    source = store.find_episode(source_episode_id)
    if source is None:
        raise PlayError(f"no episode {source_episode_id!r} to fork from")
    steps = store.steps(source.id)
    if isinstance(at_step, bool) or not isinstance(at_step, int) or not 0 <= at_step <= len(steps):
        raise PlayError(f"episode {source.id} has {len(steps)} steps; cannot fork after step {at_step}")
    pathway = pathway or source.pathway
    experience = borrowed_experience(store, source_run, pathway, settings.model)
    episode = Episode(
        id=f"fork-{uuid.uuid4().hex[:10]}", run_id=None, game=source.game, mode=source.mode,
        phase=source.phase, seed=source.seed, index=0, model=settings.model, pathway=pathway,
        summary_id=experience.summary.id if experience.summary else None,
        history_episode_ids=experience.history.episode_ids if experience.history else (),
        history_cut=experience.history.dropped if experience.history else 0,
        fork_of=source.id, fork_step=at_step,
    )
    store.add_episode(episode, [s.model_copy(update={"episode_id": episode.id}) for s in steps[:at_step]])
    return EpisodeSession(store, store.find_episode(episode.id), settings, experience, on_event)


def preview_action(game, action: str):
    """The game's answer (a StepResult: valid, feedback) to `action` in its current state, from a
    copy: the episode itself does not move. Lets a person see that an action would be refused
    before it costs a turn."""
    import games

    probe = games.make(game.name, game.mode)
    probe.restore(game.snapshot())
    return probe.step(action)
