"""Forks, hand play and summary trials see only what engine.visibility allows: a fork reproduces its
source's own context at that step (history ids, cut, summary version) unless a person chooses other
experience, which is recorded and never reaches past the source's state in the source's own run.

The case of issue 20: a fork of trust-history-x002 (its history: x000, x001) at step 3 saw x000,
x001 and x002 itself ("Previous episode 3 (seed 2, 10 steps)"), the very episode being forked."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

from s3gym_tui.engine.play import PlayError, fork_session, new_play_session
from s3gym_tui.engine.runner import ProtocolRunner, call_settings
from s3gym_tui.engine.trial import try_summary
from s3gym_tui.engine.visibility import Borrow, ContextLeak, Vantage, check_context, context_note
from s3gym_tui.models import RunConfig, eval_episode_id, explore_episode_id
from s3gym_tui.store import Store

RUN = "trust-history-demo"
X002 = f"{RUN}-x002"


def trust_run(store: Store, run_id: str, pathway: str = "history", episodes: int = 3):
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway=pathway,
                                          explore_episodes=episodes, eval_every=3, eval_episodes=1), run_id=run_id)
    return asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "fork.db") as opened:
        trust_run(opened, RUN)
        yield opened


def one_model_step(store: Store, session) -> str:
    """Let the model take the fork's next step; return the prompt stored for it (as sent)."""
    at = len(session.steps)
    session.commit(asyncio.run(session.propose()))
    return store.prompts.step_prompt(session.episode.id, at)


def user_text(prompt: str) -> str:
    return json.loads(prompt)[-1]["content"]


def settings(store: Store, run_id: str = RUN):
    return call_settings(store.runs.get_run(run_id).config, 0)


def test_a_fork_of_x002_at_step_3_sees_exactly_what_x002_saw(store):
    source = store.episodes.get_episode(X002)
    assert source.history_episode_ids == (f"{RUN}-x000", f"{RUN}-x001")
    session = fork_session(store, X002, 3, settings(store))
    fork = store.episodes.get_episode(session.episode.id)
    assert fork.history_episode_ids == (f"{RUN}-x000", f"{RUN}-x001")
    assert (fork.history_cut, fork.summary_id) == (source.history_cut, source.summary_id)
    assert (fork.experience_run_id, fork.experience_x, fork.experience_source) == (RUN, 2, "source")
    prompt = one_model_step(store, session)
    text = user_text(prompt)
    assert "Previous episode 2 (seed 1, 10 steps)" in text
    assert "Previous episode 3 (seed 2" not in text  # never the episode being forked
    # the same step of the same state with the same context: the very prompt x002 was sent at step 3
    assert prompt == store.prompts.step_prompt(X002, 3)
    assert context_note(store, fork) == f"as the source at x=2 (run {RUN})"


def test_a_borrow_from_the_source_run_stops_at_the_source_state(store):
    session = fork_session(store, X002, 3, settings(store), borrow=Borrow(RUN))
    fork = store.episodes.get_episode(session.episode.id)
    assert fork.history_episode_ids == (f"{RUN}-x000", f"{RUN}-x001")
    assert (fork.experience_run_id, fork.experience_x, fork.experience_source) == (RUN, 2, "chosen")
    assert "Previous episode 3 (seed 2" not in user_text(one_model_step(store, session))
    assert context_note(store, fork) == f"borrowed from run {RUN} at x=2 (chosen, no later than the source's state)"


def test_a_borrow_from_another_run_is_its_latest_state_and_recorded(store):
    trust_run(store, "other", episodes=4)
    session = fork_session(store, X002, 3, settings(store), borrow=Borrow("other"))
    fork = store.episodes.get_episode(session.episode.id)
    assert fork.history_episode_ids == tuple(f"other-x{i:03d}" for i in range(4))
    assert (fork.experience_run_id, fork.experience_x, fork.experience_source) == ("other", 4, "chosen")
    assert context_note(store, fork) == "borrowed from run other at x=4 (chosen)"
    # a fork of that fork, borrowing from the root's run, still stops at the root's state
    again = fork_session(store, fork.id, 2, settings(store), borrow=Borrow(RUN))
    assert again.episode.history_episode_ids == (f"{RUN}-x000", f"{RUN}-x001")
    # and by default it sees what its own source saw
    same = fork_session(store, fork.id, 2, settings(store))
    assert same.episode.history_episode_ids == fork.history_episode_ids
    assert (same.episode.experience_run_id, same.episode.experience_x) == ("other", 4)


def test_no_experience_is_a_choice_too(store):
    session = fork_session(store, X002, 3, settings(store), borrow=Borrow(None))
    fork = store.episodes.get_episode(session.episode.id)
    assert (fork.history_episode_ids, fork.experience_source) == ((), "chosen")
    assert "Hint Messages" not in user_text(one_model_step(store, session))


def test_a_fork_of_an_evaluation_episode_sees_its_checkpoint_state(store):
    source = store.episodes.get_episode(eval_episode_id(RUN, 3, 0))
    fork = fork_session(store, source.id, 2, settings(store)).episode
    assert fork.history_episode_ids == source.history_episode_ids == tuple(f"{RUN}-x{i:03d}" for i in range(3))
    assert (fork.experience_x, fork.phase) == (3, "eval")


def test_a_summary_fork_keeps_the_source_version_never_a_later_one(tmp_path):
    with Store(tmp_path / "summary.db") as store:
        run = trust_run(store, "sum-run", pathway="summary", episodes=4)
        source = store.episodes.get_episode(explore_episode_id(run.id, 2))
        used = store.summaries.get_summary(source.summary_id)
        later = store.summaries.edit_summary(store.summaries.current_summary(run.id).id, "later", "later", "later", "human:alice")
        store.summaries.set_pinned(later.id, True, author="human:alice")
        assert store.summaries.current_summary(run.id).id == later.id != used.id
        for borrow in (None, Borrow(run.id)):
            fork = fork_session(store, source.id, 2, settings(store, run.id), borrow=borrow).episode
            assert fork.summary_id == used.id, borrow
        # on the History pathway it sees the source's state: x000, x001
        fork = fork_session(store, source.id, 2, settings(store, run.id), pathway="history").episode
        assert fork.history_episode_ids == ("sum-run-x000", "sum-run-x001") and fork.summary_id is None


def test_a_fork_whose_source_context_broke_the_rule_is_refused(store):
    """A fork stored before v7 (the bug) holds x002 in its history: forking it as its source would
    copy the leak, so it is refused with the reason; a chosen borrow still works."""
    fork = fork_session(store, X002, 3, settings(store)).episode
    conn = sqlite3.connect(store.path)
    with conn:
        conn.execute("UPDATE episodes SET history_episode_ids = ?, experience_source = NULL, experience_run_id "
                     "= NULL, experience_x = NULL WHERE id = ?",
                     (json.dumps([f"{RUN}-x000", f"{RUN}-x001", X002]), fork.id))
    conn.close()
    with pytest.raises(PlayError, match="x002"):
        fork_session(store, fork.id, 3, settings(store))
    chosen = fork_session(store, fork.id, 3, settings(store), borrow=Borrow(RUN)).episode
    assert chosen.history_episode_ids == (f"{RUN}-x000", f"{RUN}-x001")


def test_the_guard_refuses_itself_a_later_episode_and_evaluation_data(store):
    at_x002 = Vantage.state(RUN, 2, X002)
    check_context(store, at_x002, [f"{RUN}-x000", f"{RUN}-x001"], None)
    for leaked in (X002, f"{RUN}-x001x", eval_episode_id(RUN, 0, 0)):
        with pytest.raises(ContextLeak):
            check_context(store, at_x002, [f"{RUN}-x000", leaked], None)
    with pytest.raises(ContextLeak, match="is the episode itself"):
        check_context(store, Vantage.state(RUN, 3, X002), [X002], None)


def test_hand_play_records_the_borrowed_state(store):
    session = new_play_session(store, "trust", "explore", 7, settings(store), "history", store.runs.get_run(RUN))
    play = store.episodes.get_episode(session.episode.id)
    assert play.history_episode_ids == tuple(f"{RUN}-x{i:03d}" for i in range(3))
    assert (play.experience_run_id, play.experience_x, play.experience_source) == (RUN, 3, "chosen")
    alone = new_play_session(store, "trust", "explore", 7, settings(store)).episode
    assert (alone.history_episode_ids, alone.experience_source) == ((), "none")


def test_a_summary_trial_stands_at_the_state_of_its_version(tmp_path):
    with Store(tmp_path / "trial.db") as store:
        run = trust_run(store, "sum-run", pathway="summary", episodes=4)
        version = store.summaries.get_summary(store.episodes.get_episode(explore_episode_id(run.id, 2)).summary_id)
        trial = asyncio.run(try_summary(store, run, version, backoff_base_s=0))
        for episode_id in trial.episode_ids:
            episode = store.episodes.get_episode(episode_id)
            assert (episode.summary_id, episode.phase) == (version.id, "eval")
            assert (episode.experience_run_id, episode.experience_x, episode.experience_source) == \
                   (run.id, 2, "chosen")


def test_removing_a_run_takes_the_episodes_that_borrowed_from_it(store):
    trust_run(store, "other", episodes=2)
    borrowing = fork_session(store, X002, 3, settings(store), borrow=Borrow("other")).episode
    kept = fork_session(store, X002, 3, settings(store)).episode
    plan = store.hygiene.removal_plan(["other"])
    assert plan.forks_and_trials == 1
    store.hygiene.remove_runs(["other"])
    assert store.episodes.find_episode(borrowing.id) is None and store.episodes.find_episode(kept.id) is not None


def test_hand_play_on_a_seed_the_borrowed_run_explored_is_named(store):
    """Hand play borrowing a run's latest state on a seed that run already explored sees that very game
    played to its end: allowed (the person chose it) but named, so the screen can warn."""
    from s3gym_tui.engine.visibility import same_game_in_context

    run = store.runs.get_run(RUN)
    same = new_play_session(store, "trust", "explore", 1, settings(store), "history", run)
    assert same_game_in_context(store, same.episode) == [f"{RUN}-x001"]
    other = new_play_session(store, "trust", "explore", 7, settings(store), "history", run)
    assert same_game_in_context(store, other.episode) == []
    fork = fork_session(store, X002, 3, settings(store))
    assert same_game_in_context(store, fork.episode) == []


@pytest.mark.parametrize("pathway", ["history", "summary", "none"])
def test_the_vantage_form_of_a_pathway_shows_what_the_run_showed(tmp_path, pathway):
    """engine.pathways builds a window in one place: read back from the store at an episode's vantage,
    a pathway gives every stored episode of a run the experience the runner gave it (history ids and
    cut, or summary version)."""
    from s3gym_tui.engine.visibility import experience_at, vantage_of
    with Store(tmp_path / "vantage.db") as opened:
        trust_run(opened, f"trust-{pathway}-v", pathway=pathway, episodes=4)
        episodes = opened.episodes.list(f"trust-{pathway}-v")
        assert len(episodes) >= 6
        for episode in episodes:
            seen = experience_at(opened, vantage_of(opened, episode), pathway, "scripted/trust")
            if pathway == "history":
                assert seen.history.episode_ids == episode.history_episode_ids, episode.id
                assert seen.history.dropped == episode.history_cut, episode.id
            elif pathway == "summary":
                assert (seen.summary.id if seen.summary else None) == episode.summary_id, episode.id
            else:
                assert seen.history is None and seen.summary is None
