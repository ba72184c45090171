"""What an episode may see: the one rule for experience, used by the runner (history and summary
sources), forks, hand play, summary trials and training (datasets, rollout seeds).

An episode stands at an experience state x of a run (its Vantage). It may see that run's finished
exploration episodes 0..x-1 and the summary version state x used; never itself, never an episode of
that run at or after x, never an evaluation episode, never a later summary version. A fork stands
where its source stood, so a borrow from the source's run never reaches past the source's state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable, Optional, Sequence

from s3gym_tui.engine.experience import ExperienceState, HeldOutViolation, exact_window
from s3gym_tui.models import (Episode, Step, Summary, explore_episode_id, is_explore_episode_id, phase_of_seed,
                              summary_in_use)
from s3gym_tui.engine.pathways import IN_CONTEXT, pathway as pathway_named

# who decided what an episode sees (Episode.experience_source)
STATE, SOURCE, CHOSEN, NONE = "state", "source", "chosen", "none"
_MAX_FORK_DEPTH = 256  # a fork chain longer than this is a damaged file, not a person's work


class ContextLeak(HeldOutViolation):
    """An episode was about to see itself, an episode after its experience state, an evaluation
    episode or a later summary version. Never caught silently."""


def is_evaluation(episode: Episode) -> bool:
    """Evaluation data by any of its marks: phase, mode or seed range."""
    return episode.phase == "eval" or episode.mode == "eval" or phase_of_seed(episode.seed) == "eval"


def require_exploration_seed(seed: int) -> int:
    """The seed, if it may be played as exploration (rollouts, training); ValueError otherwise."""
    if phase_of_seed(int(seed)) != "explore":
        raise ValueError(f"seed {seed} is an evaluation seed: rollouts and training use exploration seeds only")
    return int(seed)


@dataclass(frozen=True)
class Vantage:
    """Where an episode stands: exploration episodes 0..x-1 of `run_id` (None: no run, nothing).

    `exclude`: the episode itself and the episodes it was forked from (never visible to it).
    `limits`: (run, x) pairs no context of it or of its forks may reach past; its own state is one."""

    run_id: Optional[str]
    x: int = 0
    exclude: frozenset[str] = frozenset()
    limits: tuple[tuple[str, int], ...] = ()

    @classmethod
    def state(cls, run_id: str, x: int, episode_id: Optional[str] = None) -> "Vantage":
        """Experience state x of a run (what its exploration episode x and its evaluation at x see)."""
        return cls(run_id, x, frozenset({episode_id} if episode_id else ()), ((run_id, x),))

    def limit(self, run_id: Optional[str]) -> Optional[int]:
        """The exploration count no context may reach past for `run_id` (None: no limit)."""
        found = [x for run, x in self.limits if run == run_id]
        return min(found) if found else None

    def may_see(self, episode: Episode, *, finished: bool = True) -> bool:
        """THE rule. `finished=False` for training data only (an interrupted exploration episode's
        steps are still the agent's own exploration); experience shows finished episodes."""
        limit = self.limit(episode.run_id)
        return (self.run_id is not None and episode.run_id == self.run_id and not is_evaluation(episode)
                and 0 <= episode.index < self.x and (limit is None or episode.index < limit)
                and episode.id not in self.exclude and (episode.status == "finished" or not finished))

    def why_not(self, episode: Episode) -> str:
        """Why `may_see` refuses an episode (one line)."""
        if is_evaluation(episode):
            return f"{episode.id} is an evaluation episode"
        if episode.id in self.exclude:
            return f"{episode.id} is the episode itself or one it was forked from"
        if episode.run_id != self.run_id:
            return f"{episode.id} is not an episode of run {self.run_id}"
        if episode.status != "finished":
            return f"{episode.id} is not finished"
        return f"{episode.id} is exploration episode {episode.index}, at or after state x={self.x}"

    def describe(self) -> str:
        return f"run {self.run_id} at x={self.x}" if self.run_id else "no run"


@dataclass(frozen=True)
class Borrow:
    """A person's explicit choice of other experience for a fork: run `run_id`'s latest state (never
    past the source's own state when it is the source's run), or no experience (run_id None)."""

    run_id: Optional[str] = None


# ----- where an episode stands -----------------------------------------------------------------------
def vantage_of(store, episode: Episode, _depth: int = 0) -> Vantage:
    """The experience state an existing episode was played at (recorded, or derived for older rows):
    a run's episode at its own state; a fork where its source stood; a standalone episode at the
    state it borrowed."""
    parent = Vantage(None)
    if episode.fork_of and _depth < _MAX_FORK_DEPTH:
        source = store.episodes.find_episode(episode.fork_of)
        if source is not None:
            parent = vantage_of(store, source, _depth + 1)
    if episode.run_id is not None:
        run_id: Optional[str] = episode.run_id
        x = episode.index if episode.phase == "explore" else int(episode.checkpoint or 0)
    elif episode.experience_source is not None:
        run_id, x = episode.experience_run_id, int(episode.experience_x or 0)
    elif episode.fork_of:  # an older fork: it stood where its source stood
        run_id, x = parent.run_id, parent.x
    else:  # an older standalone episode: the state its recorded context came from
        run_id, x = _inferred_state(store, episode)
    limits = parent.limits + (((run_id, x),) if run_id is not None else ())
    return Vantage(run_id, x, parent.exclude | {episode.id}, limits)


def _inferred_state(store, episode: Episode) -> tuple[Optional[str], int]:
    seen = [e for e in (store.episodes.find_episode(i) for i in episode.history_episode_ids) if e is not None]
    if seen and seen[0].run_id is not None:
        return seen[0].run_id, max(e.index for e in seen) + 1
    if episode.summary_id:
        summary = store.summaries.get_summary(episode.summary_id)
        return summary.run_id, summary_x(store, summary)
    return None, 0


def latest_x(store, run_id: str) -> int:
    """A run's newest experience state: one past its last finished exploration episode."""
    done = [e.index for e in store.episodes.list(run_id, phase="explore")
            if e.status == "finished" and not is_evaluation(e)]
    return max(done) + 1 if done else 0


def _explore_index(run_id: str, episode_id: str) -> Optional[int]:
    if not is_explore_episode_id(run_id, episode_id):
        return None
    return int(episode_id[len(run_id) + 2:])


def summary_x(store, summary: Summary) -> int:
    """The experience state a summary version belongs to: the state it was written for, else the
    first state at which all its sources are visible."""
    if summary.for_episode_id:
        index = _explore_index(summary.run_id, summary.for_episode_id)
        if index is not None:
            return index
    indexes = []
    for source in summary.source_episode_ids:
        index = _explore_index(summary.run_id, source)
        if index is None:
            found = store.episodes.find_episode(source)
            index = found.index if found is not None else 0
        indexes.append(index)
    return max(indexes) + 1 if indexes else 0


def state_summary(store, run_id: str, x: int) -> Optional[Summary]:
    """The summary version experience state x of a run used (never a later one): the recorded state
    (experience_states), else what its episodes saw, else the version in use among those built from
    episodes before x (models.summary_in_use)."""
    ids = store.summaries.state_summary_ids(run_id, x)
    if ids is not None and (ids[1] or ids[0]):
        return store.summaries.get_summary(ids[1] or ids[0])
    at_x = store.episodes.find_episode(explore_episode_id(run_id, x))
    if at_x is None:
        at_x = next((e for e in store.episodes.list(run_id, phase="eval", checkpoint=x) if e.summary_id), None)
    if at_x is not None and at_x.summary_id:
        return store.summaries.get_summary(at_x.summary_id)
    return summary_in_use([s for s in store.summaries.list(run_id) if summary_x(store, s) <= x])


# ----- what it sees -----------------------------------------------------------------------------------
def visible_episodes(store, vantage: Vantage, *, finished: bool = True,
                     candidates: Optional[Iterable[Episode]] = None) -> list[Episode]:
    """The episodes `vantage` may see, oldest first (of `candidates`, else of its run)."""
    if vantage.run_id is None:
        return []
    pool = candidates if candidates is not None else store.episodes.list(vantage.run_id, phase="explore")
    return sorted((e for e in pool if vantage.may_see(e, finished=finished)), key=lambda e: (e.index, e.started_at))


def visible_history(store, vantage: Vantage) -> list[tuple[Episode, list[Step]]]:
    """The finished exploration episodes `vantage` may see, with their steps (history, summaries)."""
    return [(e, store.episodes.steps(e.id)) for e in visible_episodes(store, vantage)]


def experience_at(store, vantage: Vantage, pathway: str, model: str,
                  summary: Optional[Summary] = None) -> ExperienceState:
    """What an episode at `vantage` sees on `pathway`: the history window of the episodes it may see
    (the run's budget and oracle setting), or `summary` (default: the version its state used)."""
    if vantage.run_id is None:
        return ExperienceState(vantage.x, pathway)
    config = store.runs.get_run(vantage.run_id).config
    return pathway_named(pathway).seen(
        vantage.x, model, config, lambda: visible_history(store, vantage),
        lambda: summary if summary is not None else state_summary(store, vantage.run_id, vantage.x))


def as_the_source(store, source: Episode, pathway: str, model: str) -> tuple[Vantage, ExperienceState]:
    """A fork's default: the source's own context at its state. On the source's pathway exactly what
    it saw (its history ids and cut, its summary version); on another pathway, its state's."""
    here = vantage_of(store, source)
    vantage = Vantage(here.run_id, here.x, here.exclude, here.limits)
    if pathway != source.pathway or pathway not in IN_CONTEXT:
        return vantage, experience_at(store, vantage, pathway, model)
    if pathway == "summary":
        summary = store.summaries.get_summary(source.summary_id) if source.summary_id else None
        return vantage, ExperienceState(here.x, pathway, summary=summary)
    seen = [store.episodes.get_episode(i) for i in source.history_episode_ids]
    oracle = bool(here.run_id) and store.runs.get_run(here.run_id).config.oracle_feedback
    window = exact_window(model, [(e, store.episodes.steps(e.id)) for e in seen], source.history_cut, oracle)
    return vantage, ExperienceState(here.x, pathway, history=window)


def borrowed(store, run_id: Optional[str], pathway: str, model: str,
             within: Optional[Vantage] = None) -> tuple[Vantage, ExperienceState]:
    """Experience a person chose: run `run_id`'s latest state and the summary version it would use
    next; when `within` (a fork source's vantage) limits that run, its state there instead."""
    if run_id is None:
        return Vantage(None, 0, within.exclude if within else frozenset(), within.limits if within else ()), \
            ExperienceState(0, pathway)
    latest = latest_x(store, run_id)
    limit = within.limit(run_id) if within is not None else None
    exclude, limits = (within.exclude, within.limits) if within is not None else (frozenset(), ())
    if limit is not None:  # the source's own run: never past the source's state
        vantage = Vantage(run_id, min(limit, latest), exclude, limits)
        return vantage, experience_at(store, vantage, pathway, model)
    vantage = Vantage(run_id, latest, exclude, limits + ((run_id, latest),))
    summary = store.summaries.current_summary(run_id) if pathway == "summary" else None
    return vantage, experience_at(store, vantage, pathway, model, summary)


# ----- the guard --------------------------------------------------------------------------------------
def check_context(store, vantage: Vantage, history_ids: Sequence[str], summary: Optional[Summary]) -> None:
    """Refuse (ContextLeak) a context that holds anything `vantage` may not see: a history episode, a
    summary of another run, or a summary built from an episode it may not see."""
    sources = [("history episode", i) for i in history_ids]
    if summary is not None:
        if summary.run_id != vantage.run_id:
            raise ContextLeak(f"summary v{summary.version} of run {summary.run_id} cannot be seen from "
                              f"{vantage.describe()}")
        sources += [(f"summary v{summary.version} source", i) for i in summary.source_episode_ids]
    found: dict[str, Optional[Episode]] = {}
    for role, episode_id in sources:
        if episode_id not in found:  # only what it names is read (a window is bounded by its budget)
            found[episode_id] = store.episodes.find_episode(episode_id)
        episode = found[episode_id]
        if episode is None:
            raise ContextLeak(f"{role} {episode_id} is not a stored episode")
        if not vantage.may_see(episode):
            raise ContextLeak(f"{role} {episode_id} cannot be seen from {vantage.describe()}: "
                              f"{vantage.why_not(episode)}")


def context_fields(store, vantage: Vantage, experience: ExperienceState, source: str) -> dict:
    """The Episode fields recording what an episode at `vantage` sees, after check_context."""
    history = experience.history
    ids = history.episode_ids if history else ()
    check_context(store, vantage, ids, experience.summary)
    return dict(summary_id=experience.summary.id if experience.summary else None, history_episode_ids=ids,
                history_cut=history.dropped if history else 0, experience_run_id=vantage.run_id,
                experience_x=vantage.x, experience_source=source)


def same_game_in_context(store, episode: Episode) -> list[str]:
    """The episodes in `episode`'s context (its history, or its summary's sources) played on the very
    game it plays (same game, mode and seed): a borrowed state that holds this game's answer. A fork
    never has one (its source's context never holds the source); hand play that borrows a run's latest
    state can, when the person picks a seed that run already explored. Not refused (the person chose
    it): the screen says so."""
    ids = list(episode.history_episode_ids)
    if episode.summary_id:
        summary = store.summaries.get_summary(episode.summary_id)
        ids += [i for i in summary.source_episode_ids if i not in ids]
    found = []
    for episode_id in ids:
        seen = store.episodes.find_episode(episode_id)
        if seen is not None and (seen.game, seen.mode, seen.seed) == (episode.game, episode.mode, episode.seed):
            found.append(seen.id)
    return found


def context_note(store, episode: Episode) -> str:
    """What an episode's context is, in words (plain text from the store: gate it before a screen)."""
    run, x, how = episode.experience_run_id, episode.experience_x, episode.experience_source
    if how is None:
        return "not recorded (stored before v7)"
    if how == STATE:
        return f"its run's state x={x}"
    if how == NONE or run is None:
        return "no experience" + (" (chosen)" if how == CHOSEN else "")
    if how == SOURCE:
        return f"as the source at x={x} (run {run})"
    capped = ""
    if episode.fork_of:
        source = store.episodes.find_episode(episode.fork_of)
        if source is not None and vantage_of(store, source).limit(run) == x:
            capped = ", no later than the source's state"
    return f"borrowed from run {run} at x={x} (chosen{capped})"
