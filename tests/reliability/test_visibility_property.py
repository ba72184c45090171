"""What an episode may see, as a property over generated histories of actions (Hypothesis): runs
(History or Summary, small history budgets that cut) advanced a few exploration episodes at a time,
forks of any stored episode at any step (runs' episodes, forks of forks, hand play, trials) with the
default context or a chosen borrow (none, the source's run, another run), human edits and pins of
summaries, hand play borrowing a run, summary trials.

Checked on every stored episode, by rules written here independently of engine.visibility:
- its context (history ids, and the sources of its summary) never holds itself, an episode it was
  forked from, an evaluation episode or an unfinished one;
- never an episode of a run at or after the state at which it or any episode it was forked from
  stood in that run (a run's episode at its x; a borrow at the state it took);
- a run's episode sees exactly its run's finished exploration episodes before x (minus the cut);
- a default fork has its source's history ids, cut and summary version; a chosen borrow holds only
  episodes finished when it was made; no summary version later than its lineage's in that run;
- the prompt it was sent shows exactly the episodes it records.
More examples: `S3GYM_PROPERTY_EXAMPLES=200 python -m pytest tests/reliability/test_visibility_property.py`.
"""

from __future__ import annotations

import asyncio
import json
import os
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from s3gym_tui.engine.events import EpisodeDone
from s3gym_tui.engine.play import PlayError, fork_session, new_play_session
from s3gym_tui.engine.runner import ProtocolRunner, call_settings
from s3gym_tui.engine.trial import try_summary
from s3gym_tui.engine.visibility import Borrow
from s3gym_tui.models import EVAL_SEED_BASE, Episode, RunConfig
from s3gym_tui.store import Store

EXAMPLES = int(os.environ.get("S3GYM_PROPERTY_EXAMPLES", "25"))
SETTINGS = call_settings(RunConfig(model="scripted/trust", game="trust"), 0)


def is_eval(e: Episode) -> bool:
    return e.phase == "eval" or e.mode == "eval" or e.seed >= EVAL_SEED_BASE


def advance(store: Store, run_id: str, k: int) -> None:
    """Drive a run until k more exploration episodes finished (or it ends); it stays resumable."""
    holder: list = []

    def on_event(event) -> None:
        if isinstance(event, EpisodeDone) and event.episode.phase == "explore" and event.episode.status == "finished":
            holder[1] += 1
            if holder[1] >= k:
                holder[0].stop("paused by the test")

    runner = ProtocolRunner(store, store.runs.get_run(run_id), on_event, backoff_base_s=0)
    holder[:] = [runner, 0]
    asyncio.run(runner.run_protocol())


def finished_explore(store: Store, run_id: str) -> dict[str, Episode]:
    return {e.id: e for e in store.episodes.list(run_id, phase="explore") if e.status == "finished" and not is_eval(e)}


def own_state(e: Episode) -> tuple[str, int] | None:
    if e.run_id is None:
        return None
    return e.run_id, e.index if e.phase == "explore" else int(e.checkpoint or 0)


class World:
    """The store, and what the test itself knows about each episode it made (independent of the code)."""

    def __init__(self, store: Store, runs: list[str]) -> None:
        self.store, self.runs = store, runs
        self.bounds: dict[str, set[tuple[str, int]]] = {}  # episode -> (run, x) it and its forks stay below
        self.default_forks: set[str] = set()
        self.finished_when_made: dict[str, set[str]] = {}  # chosen borrows: the run's finished episodes then

    def lineage(self, e: Episode) -> list[Episode]:
        chain = [e]
        while chain[-1].fork_of:
            chain.append(self.store.episodes.get_episode(chain[-1].fork_of))
        return chain

    def bounds_of(self, e: Episode) -> set[tuple[str, int]]:
        found = set(self.bounds.get(e.id, set()))
        if own_state(e):
            found.add(own_state(e))
        if e.fork_of:
            found |= self.bounds_of(self.store.episodes.get_episode(e.fork_of))
        return found

    def borrow_state(self, run_id: str, within: set[tuple[str, int]]) -> tuple[str, int]:
        finished = finished_explore(self.store, run_id)
        latest = max((e.index for e in finished.values()), default=-1) + 1
        limits = [x for run, x in within if run == run_id]
        return run_id, min([latest] + limits)


def one_step(session) -> None:
    if not session.done:
        session.commit(asyncio.run(session.propose()))


forks = st.tuples(st.just("fork"), st.integers(0, 10_000), st.booleans(), st.floats(0, 1),
                  st.sampled_from([None, None, "none", "history", "summary"]),
                  st.sampled_from(["source", "source", "none", "run0", "run1"]))
operations = st.lists(st.one_of(
    st.tuples(st.just("advance"), st.integers(0, 1), st.integers(1, 2)),
    forks, forks,
    st.tuples(st.just("play"), st.sampled_from(["run0", "run1", None]), st.sampled_from(["history", "summary"]),
              st.integers(0, 6)),
    st.tuples(st.just("edit"), st.integers(0, 1), st.booleans()),
    st.tuples(st.just("trial"), st.integers(0, 1), st.integers(0, 10_000)),
), min_size=3, max_size=16)

run_specs = st.tuples(*[st.fixed_dictionaries({
    "pathway": st.sampled_from(["history", "summary"]),
    "explore_episodes": st.integers(2, 4),
    "eval_every": st.integers(1, 3),
    "eval_episodes": st.integers(0, 1),
    "history_budget": st.sampled_from([700, 1_500, 100_000]),  # a Trust episode is ~600 tokens
})] * 2)


def apply(world: World, op: tuple) -> None:
    store = world.store
    kind = op[0]
    if kind == "advance":
        advance(store, world.runs[op[1]], op[2])
    elif kind == "fork":
        _, pick, standalone, where, pathway, choice = op
        candidates = store.episodes.list()
        if standalone and any(e.run_id is None for e in candidates):  # forks of forks, of hand play, of trials
            candidates = [e for e in candidates if e.run_id is None]
        source = candidates[pick % len(candidates)]
        at = int(round(where * source.n_steps))
        within = world.bounds_of(source)
        borrow = None if choice == "source" else Borrow(None if choice == "none" else world.runs[int(choice[-1])])
        try:
            session = fork_session(store, source.id, at, SETTINGS, pathway, borrow)
        except PlayError as exc:  # only a source whose own context broke the rule may be refused
            raise AssertionError(f"fork of {source.id} refused: {exc}") from None
        fork = session.episode
        event(f"fork: {choice}{' of a fork' if source.fork_of else ''}{' of a standalone' if not source.run_id else ''}")
        if borrow is None:
            world.default_forks.add(fork.id)
        elif borrow.run_id is not None:
            world.bounds[fork.id] = {world.borrow_state(borrow.run_id, within)}
            world.finished_when_made[fork.id] = set(finished_explore(store, borrow.run_id))
        one_step(session)
    elif kind == "play":
        _, run, pathway, seed = op
        run_id = world.runs[int(run[-1])] if run else None
        finished = set(finished_explore(store, run_id)) if run_id else set()
        session = new_play_session(store, "trust", "explore", seed, SETTINGS, pathway,
                                   store.runs.get_run(run_id) if run_id else None)
        if run_id:
            world.bounds[session.episode.id] = {world.borrow_state(run_id, set())}
            world.finished_when_made[session.episode.id] = finished
        one_step(session)
    elif kind == "edit":
        current = store.summaries.current_summary(world.runs[op[1]])
        if current is not None:
            edit = store.summaries.edit_summary(current.id, "edited", "edited", "edited", "human:tester")
            if op[2]:
                store.summaries.set_pinned(edit.id, True, author="human:tester")
    elif kind == "trial":
        run = store.runs.get_run(world.runs[op[1]])
        versions = store.summaries.list(run.id)
        if versions and run.config.eval_episodes:
            asyncio.run(try_summary(store, run, versions[op[2] % len(versions)], backoff_base_s=0))


def check(world: World, e: Episode) -> None:
    store = world.store
    lineage = world.lineage(e)
    ancestors = {m.id for m in lineage}
    summary = store.summaries.get_summary(e.summary_id) if e.summary_id else None
    seen = list(e.history_episode_ids)
    sources = list(summary.source_episode_ids) if summary else []
    assert len(set(seen)) == len(seen), e.id
    bounds = world.bounds_of(e)
    for episode_id in seen + sources:
        other = store.episodes.get_episode(episode_id)
        assert episode_id not in ancestors, f"{e.id} sees {episode_id}, itself or an episode it was forked from"
        assert not is_eval(other), f"{e.id} sees evaluation episode {episode_id}"
        assert other.status == "finished" and other.run_id is not None, (e.id, episode_id)
        for run_id, x in bounds:
            assert other.run_id != run_id or other.index < x, \
                f"{e.id} sees {episode_id}, at or after the state x={x} of run {run_id} it stands below"
    for episode_id in seen:
        if e.id in world.finished_when_made:
            assert episode_id in world.finished_when_made[e.id], f"{e.id} sees {episode_id}, unfinished when borrowed"
    if e.run_id is not None:  # a run's episode: exactly its run's finished exploration before x (cut oldest first)
        run_id, x = own_state(e)
        before = sorted((o for o in finished_explore(store, run_id).values() if o.index < x), key=lambda o: o.index)
        if e.pathway == "history":
            assert seen == [o.id for o in before][len(before) - len(seen):] and len(seen) + e.history_cut == len(before)
        if summary is not None:
            assert summary.run_id == run_id
    if e.id in world.default_forks:
        source = store.episodes.get_episode(e.fork_of)
        if e.pathway == source.pathway:
            assert (e.history_episode_ids, e.history_cut, e.summary_id) == \
                   (source.history_episode_ids, source.history_cut, source.summary_id), e.id
    if summary is not None:  # never a version later than one its lineage used in that run
        for member in lineage[1:]:
            if member.run_id == summary.run_id and member.summary_id:
                assert summary.version <= store.summaries.get_summary(member.summary_id).version, (e.id, member.id)
    prompts = [s for s in store.episodes.steps(e.id) if s.index >= (e.fork_step or 0) and s.reply and s.actor == "model"]
    if prompts:  # what it was sent shows exactly what it records
        text = json.loads(store.prompts.step_prompt(e.id, prompts[0].index))[-1]["content"]
        if e.pathway == "history":
            assert text.count("--- Previous episode ") == len(seen), e.id
            for episode_id in seen:
                other = store.episodes.get_episode(episode_id)
                assert f"--- Previous episode {other.index + 1} (seed {other.seed}, " in text
        elif e.pathway == "summary" and summary is not None:
            assert summary.as_tips() in text
        else:
            assert "Hint Messages" not in text


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(specs=run_specs, ops=operations)
def test_no_context_holds_itself_a_later_episode_or_evaluation_data(specs, ops):
    with tempfile.TemporaryDirectory() as tmp:
        with Store(Path(tmp) / "v.db") as store:
            runs = []
            for i, spec in enumerate(specs):
                config = RunConfig(model="scripted/trust", game="trust", **spec)
                runs.append(store.runs.create_run(config, run_id=f"r{i}").id)
                advance(store, runs[-1], 1)
            world = World(store, runs)
            for op in ops:
                apply(world, op)
            for episode in store.episodes.list():
                check(world, episode)
                if episode.history_cut:
                    event("a history cut")
