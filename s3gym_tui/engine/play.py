"""Hand-driven episodes outside the protocol: new play sessions, forks, experience borrowed from a run."""

from __future__ import annotations

import uuid
from typing import Literal, Optional

from pydantic import BaseModel, ConfigDict, field_validator

import s3gym_games as games

from s3gym_tui.engine.events import EventSink, ignore
from s3gym_tui.engine.experience import ExperienceState
from s3gym_tui.engine.llm import CallSettings
from s3gym_tui.engine.session import EpisodeSession
from s3gym_tui.engine.visibility import (CHOSEN, NONE, SOURCE, Borrow, ContextLeak, Vantage, as_the_source,
                                         borrowed, context_fields, vantage_of)
from s3gym_tui.models import Episode, Run, phase_of_seed
from s3gym_tui.engine.pathways import IN_CONTEXT


class PlayError(ValueError):
    """A play or fork request that cannot be honoured (one-line message)."""


Experience = Literal["source", "none", "run"]


class PlayOptions(BaseModel):
    """What a live episode is opened with: a new one (game, mode, seed) or a fork (fork_of, fork_step).
    None for mode or pathway means their default; None for model means the configured default model
    (Settings.default_model); `experience` (forks): what the source saw ("source", the default), nothing
    ("none"), or source_run_id's experience ("run", the default when a run is named)."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    game: Optional[str] = None
    mode: str = "explore"
    seed: Optional[int] = None
    model: Optional[str] = None
    pathway: str = "none"
    source_run_id: Optional[str] = None
    fork_of: Optional[str] = None
    fork_step: Optional[int] = None
    experience: Optional[Experience] = None

    @field_validator("mode", "pathway", mode="before")
    @classmethod
    def _none_is_the_default(cls, value, info):
        return cls.model_fields[info.field_name].default if value is None or value == "" else value

    @property
    def borrowed(self) -> Experience:
        """The experience chosen, with its default filled in."""
        return self.experience or ("run" if self.source_run_id else "source")


def open_live_session(store, options: PlayOptions, settings: CallSettings,
                      on_event: EventSink = ignore) -> EpisodeSession:
    """The session `options` ask for: a fork of a stored episode or a new standalone episode (raises
    PlayError, LeakageError, StoreError or GameError with a one-line message when it cannot)."""
    source_run = store.runs.get_run(options.source_run_id) if options.source_run_id else None
    if options.fork_of:  # what the source saw, unless the person chose other experience
        borrow = None if options.borrowed == "source" else \
            Borrow(source_run.id if options.borrowed == "run" and source_run else None)
        return fork_session(store, options.fork_of, int(options.fork_step or 0), settings, options.pathway, borrow,
                            on_event)
    if not options.game or options.seed is None:
        raise PlayError("choose a game and a seed")
    return new_play_session(store, games.canonical(options.game), options.mode, int(options.seed), settings,
                            options.pathway, source_run, on_event)


def new_play_session(store, game: str, mode: str, seed: int, settings: CallSettings, pathway: str = "none",
                     source_run: Optional[Run] = None, on_event: EventSink = ignore,
                     experience: Optional[tuple[Vantage, ExperienceState]] = None) -> EpisodeSession:
    """A standalone episode (no run) the user steps by hand. Seeds keep their phase: an eval
    episode must use an evaluation seed.

    It sees what the person chose (engine.visibility): `source_run`'s latest experience (History or
    Summary), or `experience` (a summary trial's version at its state), or nothing."""
    if phase_of_seed(seed) != mode:
        raise PlayError(f"seed {seed} belongs to the {phase_of_seed(seed)} range; "
                        f"{mode} episodes use {'seeds >= 1000000' if mode == 'eval' else 'seeds < 1000000'}")
    if experience is not None:
        (vantage, state), how = experience, CHOSEN
    elif source_run is not None and pathway in IN_CONTEXT:
        (vantage, state), how = borrowed(store, source_run.id, pathway, settings.model), CHOSEN
    else:
        (vantage, state), how = (Vantage(None), ExperienceState(0, pathway)), NONE
    episode = Episode(
        id=f"play-{uuid.uuid4().hex[:10]}", run_id=None, game=game, mode=mode, phase=mode, seed=seed,
        index=0, model=settings.model, pathway=pathway, **context_fields(store, vantage, state, how))
    return EpisodeSession(store, episode, settings, state, on_event)


def fork_session(store, source_episode_id: str, at_step: int, settings: CallSettings,
                 pathway: Optional[str] = None, borrow: Optional[Borrow] = None,
                 on_event: EventSink = ignore) -> EpisodeSession:
    """Branch a new episode from the exact state after `at_step` steps of a stored episode.

    The new episode starts with copies of the source's first `at_step` steps (so replaying it
    rebuilds the same state) and continues with the chosen model and pathway. It sees what its source
    saw at that state (its history ids and cut, its summary version), unless `borrow` names other
    experience a person chose: then it records that choice, and a borrow from the source's own run
    stops at the source's state. Never the source itself, nor anything after it (engine.visibility)."""
    source = store.episodes.find_episode(source_episode_id)
    if source is None:
        raise PlayError(f"no episode {source_episode_id!r} to fork from")
    steps = store.episodes.steps(source.id)
    if isinstance(at_step, bool) or not isinstance(at_step, int) or not 0 <= at_step <= len(steps):
        raise PlayError(f"episode {source.id} has {len(steps)} steps; cannot fork after step {at_step}")
    pathway = pathway or source.pathway
    if borrow is None:
        (vantage, experience), how = as_the_source(store, source, pathway, settings.model), SOURCE
    else:
        within = vantage_of(store, source)
        (vantage, experience), how = borrowed(store, borrow.run_id, pathway, settings.model, within), CHOSEN
    try:
        context = context_fields(store, vantage, experience, how)
    except ContextLeak as exc:
        raise PlayError(f"cannot fork {source.id} with this context: {exc}") from None
    episode = Episode(
        id=f"fork-{uuid.uuid4().hex[:10]}", run_id=None, game=source.game, mode=source.mode,
        phase=source.phase, seed=source.seed, index=0, model=settings.model, pathway=pathway,
        fork_of=source.id, fork_step=at_step, **context)
    copies = [s.model_copy(update={"episode_id": episode.id, "prompt": store.prompts.prompt_of(s)})
              for s in steps[:at_step]]  # the prompts as sent: the store keeps them against the copies
    store.episodes.add_episode(episode, copies)
    return EpisodeSession(store, store.episodes.find_episode(episode.id), settings, experience, on_event)


def preview_action(game, action: str):
    """The game's answer (a StepResult: valid, feedback) to `action` in its current state, from a
    copy: the episode itself does not move. Lets a person see that an action would be refused
    before it costs a turn."""
    probe = games.make(game.name, game.mode)
    probe.restore(game.snapshot())
    return probe.step(action)
