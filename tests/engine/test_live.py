"""The live episode's state machine (engine.live), without Textual: every transition, the refusals,
stop from every state, and the held-out rules of play (seed phases, no verifier reward in a prompt)."""

from __future__ import annotations

import pytest

from s3gym_tui.engine.events import (CallFailed, EpisodeDone, LiveChanged, ProposalMade, StepDone, StepRefused)
from s3gym_tui.engine.live import LiveEpisode
from s3gym_tui.engine.llm import CallSettings, ModelUnavailable
from s3gym_tui.engine.play import PlayError, PlayOptions, open_live_session
from s3gym_tui.models import EVAL_SEED_BASE
from s3gym_tui.store import Store


class Call:
    """A launched model call the test runs (or not) when it chooses."""

    def __init__(self, work) -> None:
        self.work = work
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True
        self.work.close()


class Calls:
    """The launcher: keeps each call's coroutine until the test finishes it."""

    def __init__(self) -> None:
        self.launched: list[Call] = []

    def __call__(self, work) -> Call:
        self.launched.append(Call(work))
        return self.launched[-1]

    async def finish(self, call: Call | None = None) -> None:
        call = call or self.launched[-1]
        await call.work


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "live.db") as store:
        yield store


def open_live(store, wait: bool = False, **options) -> tuple[LiveEpisode, Calls, list]:
    events: list = []
    calls = Calls()
    options = {"game": "trust", "seed": 0, **options}
    session = open_live_session(store, PlayOptions(**options), CallSettings(model="scripted/trust"))
    return LiveEpisode(session, calls, events.append, wait=wait), calls, events


def kinds(events, kind) -> list:
    return [e for e in events if isinstance(e, kind)]


def stored_actors(store, live) -> list[str]:
    return [s.actor for s in store.episodes.steps(live.episode_id)]


async def test_step_goes_idle_thinking_idle_and_stores_one_model_step(store):
    live, calls, events = open_live(store)
    assert live.state == "idle" and not live.thinking
    assert live.step() is None
    assert live.state == "thinking" and len(calls.launched) == 1
    await calls.finish()
    assert live.state == "idle"
    assert stored_actors(store, live) == ["model"]
    [done] = kinds(events, StepDone)
    assert done.step.index == 0 and done.episode.id == live.episode_id
    assert [e.state for e in kinds(events, LiveChanged)] == ["thinking", "idle"]


async def test_steps_pressed_while_thinking_are_queued_and_taken_one_after_another(store):
    live, calls, _ = open_live(store)
    live.step()
    live.step()
    live.step()
    assert live.queued == 2 and len(calls.launched) == 1  # one call at a time
    await calls.finish(calls.launched[0])
    assert live.queued == 1 and len(calls.launched) == 2 and live.state == "thinking"
    await calls.finish(calls.launched[1])
    await calls.finish(calls.launched[2])
    assert live.queued == 0 and live.state == "idle" and len(calls.launched) == 3
    assert stored_actors(store, live) == ["model"] * 3


async def test_run_continues_until_paused_then_the_call_under_way_completes(store):
    live, calls, _ = open_live(store)
    assert live.run() is None and live.state == "running"
    await calls.finish()
    await calls.finish()
    assert len(calls.launched) == 3 and live.state == "running"
    assert live.pause() is None and live.state == "thinking"  # the call under way goes on
    await calls.finish()
    assert live.state == "idle" and len(calls.launched) == 3
    assert len(stored_actors(store, live)) == 3


async def test_run_to_the_end_of_the_episode_finishes_it(store):
    live, calls, events = open_live(store)
    live.run()
    while live.thinking:
        await calls.finish()
    assert live.state == "over" and not live.running
    [done] = kinds(events, EpisodeDone)
    assert done.episode.status == "finished" and done.episode.score is not None
    assert len(kinds(events, StepDone)) == live.session.game.max_steps == len(stored_actors(store, live))
    assert live.step() == live.run() and live.step().kind == "over"


async def test_propose_then_wait_accept_stores_the_models_action(store):
    live, calls, events = open_live(store, wait=True)
    live.step()
    await calls.finish()
    assert live.state == "proposal"
    [made] = kinds(events, ProposalMade)
    assert made.proposal is live.proposal and not stored_actors(store, live)  # not executed yet
    assert live.accept() is None
    assert live.state == "idle" and live.proposal is None
    [step] = store.episodes.steps(live.episode_id)
    assert step.actor == "model" and step.action == made.proposal.action


async def test_an_edit_is_stored_as_a_human_edit_keeping_the_proposal(store):
    live, calls, _ = open_live(store, wait=True)
    live.step()
    await calls.finish()
    proposed = live.proposal.action
    other = "cheat" if proposed != "cheat" else "collaborate"
    assert live.edit(f"  {other} ", of=live.proposal) is None
    [step] = store.episodes.steps(live.episode_id)
    assert (step.actor, step.action, step.proposed_action) == ("human-edit", other, proposed)


async def test_an_unchanged_edit_is_the_models_own_action(store):
    live, calls, _ = open_live(store, wait=True)
    live.step()
    await calls.finish()
    assert live.edit(live.proposal.action) is None
    assert stored_actors(store, live) == ["model"]


async def test_empty_and_stale_edits_are_refused_and_the_proposal_still_waits(store):
    live, calls, _ = open_live(store, wait=True)
    live.step()
    await calls.finish()
    first = live.proposal
    assert live.edit("   ").kind == "empty"
    assert live.veto() is None and live.state == "idle"
    live.step()
    await calls.finish()
    refused = live.edit("cheat", of=first)  # the dialog was opened on the vetoed proposal
    assert refused.kind == "stale" and "no longer waiting" in refused.reason
    assert live.state == "proposal" and not stored_actors(store, live)


async def test_veto_discards_the_proposal_and_stops_running(store):
    live, calls, _ = open_live(store, wait=True)
    live.run()
    await calls.finish()
    assert live.state == "proposal" and live.running
    assert live.veto() is None
    assert live.state == "idle" and not live.running and not stored_actors(store, live)


async def test_accept_while_running_goes_on_to_the_next_proposal(store):
    live, calls, _ = open_live(store, wait=True)
    live.run()
    await calls.finish()
    live.accept()
    assert live.state == "running" and len(calls.launched) == 2
    await calls.finish()
    assert live.state == "proposal" and stored_actors(store, live) == ["model"]


async def test_take_over_drops_the_call_and_a_late_result_is_ignored(store):
    live, calls, events = open_live(store)
    live.run()
    call = calls.launched[-1]
    assert live.take_over() is None
    assert call.cancelled and live.state == "idle" and not live.running
    assert live.act("cheat") is None
    [step] = store.episodes.steps(live.episode_id)
    assert (step.actor, step.action) == ("human", "cheat")
    assert len(kinds(events, StepDone)) == 1 and live.state == "idle"


async def test_a_late_result_of_a_cancelled_call_stores_nothing(store):
    live, calls, _ = open_live(store)
    live.step()
    work = calls.launched[-1].work
    calls.launched[-1].work = _Uncancellable(work)  # the result arrives although the call was dropped
    assert live.cancel() is None and live.state == "idle"
    await work
    assert not stored_actors(store, live) and live.state == "idle"


class _Uncancellable:
    def __init__(self, work) -> None:
        self.work = work

    def close(self) -> None:
        pass


async def test_take_over_with_a_proposal_waiting_is_a_veto(store):
    live, calls, _ = open_live(store, wait=True)
    live.step()
    await calls.finish()
    assert live.take_over() is None and live.proposal is None and live.state == "idle"


@pytest.mark.parametrize("state", ["idle", "thinking", "proposal", "running"])
async def test_stop_is_honoured_from_every_state(store, state):
    live, calls, events = open_live(store, wait=state == "proposal")
    if state in ("thinking", "proposal"):
        live.step()
    if state == "proposal":
        await calls.finish()
    if state == "running":
        live.run()
    assert live.state == state
    pending = calls.launched[-1] if live.thinking else None
    assert live.stop() is None
    assert live.state == "over" and not live.running and live.proposal is None and not live.thinking
    assert pending is None or pending.cancelled
    [done] = kinds(events, EpisodeDone)
    assert done.episode.status == "stopped"
    assert store.episodes.get_episode(live.episode_id).status == "stopped" and not stored_actors(store, live)
    for command in (live.step, live.run, live.stop, live.take_over, lambda: live.act("cheat")):
        refused = command()
        assert refused.kind == "over" and "over (stopped)" in refused.reason


async def test_illegal_commands_are_refused_with_a_reason_and_change_nothing(store):
    live, calls, events = open_live(store, wait=True)
    for command, kind in ((live.accept, "no_proposal"), (live.veto, "no_proposal"), (lambda: live.edit("cheat"),
                          "no_proposal"), (live.pause, "not_running"), (live.cancel, "no_call")):
        refused = command()
        assert refused is not None and refused.kind == kind and refused.reason
    assert live.state == "idle" and not events and not calls.launched
    live.step()
    await calls.finish()
    refused = live.step()
    assert refused.kind == "waiting" and "proposal is waiting" in refused.reason
    assert live.state == "proposal" and len(calls.launched) == 1 and not stored_actors(store, live)


async def test_a_failed_call_leaves_the_episode_intact_and_stops_the_run(store):
    live, calls, events = open_live(store)

    async def unavailable(**_):
        raise ModelUnavailable("the provider said no")

    live.session.propose = unavailable
    live.run()
    live.step()  # queued
    await calls.finish()
    [failed] = kinds(events, CallFailed)
    assert failed.error == "the provider said no" and failed.episode_id == live.episode_id
    assert live.state == "idle" and live.queued == 0 and not stored_actors(store, live)


async def test_a_step_the_store_refuses_is_not_taken(store):
    live, calls, events = open_live(store)

    def full(*_, **__):
        raise RuntimeError("database or disk is full")

    store.episodes.add_step = full
    live.run()
    await calls.finish()
    [refused] = kinds(events, StepRefused)
    assert "disk is full" in refused.error
    assert live.state == "idle" and live.session.game.steps == 0  # the game went back to the stored state


async def test_propose_then_wait_can_be_switched_between_calls(store):
    live, calls, _ = open_live(store)
    live.set_wait(True)
    live.step()
    await calls.finish()
    assert live.state == "proposal"
    live.set_wait(False)
    live.accept()
    live.step()
    await calls.finish()
    assert live.state == "idle" and stored_actors(store, live) == ["model", "model"]


async def test_check_previews_an_action_without_taking_it(store):
    live, _, _ = open_live(store)
    assert live.check("cheat")[0] and not live.check("fly away")[0]
    assert live.session.game.steps == 0


async def test_close_stores_an_open_episode_as_stopped(store):
    live, calls, _ = open_live(store)
    live.step()
    call = calls.launched[-1]
    live.close()
    assert call.cancelled and store.episodes.get_episode(live.episode_id).status == "stopped"


# ----- the held-out rules --------------------------------------------------------------------------
@pytest.mark.parametrize("mode, seed", [("eval", 3), ("explore", EVAL_SEED_BASE + 3)])
def test_a_seed_of_the_other_phase_is_refused_and_nothing_is_stored(store, mode, seed):
    with pytest.raises(PlayError, match=f"seed {seed}"):
        open_live(store, mode=mode, seed=seed)
    assert store.episodes.list() == []


async def test_a_live_eval_episode_is_held_out_and_no_prompt_carries_a_verifier_reward(store):
    from s3gym_games.prompt import build_messages, messages_json
    from s3gym_tui.engine.experience import turns_from_steps

    live, calls, _ = open_live(store, mode="eval", seed=EVAL_SEED_BASE + 3)
    live.run()
    while live.thinking:
        await calls.finish()
    episode = store.episodes.get_episode(live.episode_id)
    assert (episode.phase, episode.run_id, episode.status) == ("eval", None, "finished")
    steps = store.episodes.steps(live.episode_id)
    assert any(s.reward for s in steps)
    for step in steps:
        assert "verifier reward" not in store.prompts.step_prompt(live.episode_id, step.index)
    # the check can fail: the oracle ablation's prompt does carry the rewards
    oracle = build_messages(live.session.game, "", turns_from_steps(steps, oracle=True), "")
    assert "verifier reward" in messages_json(oracle)


def test_options_fill_their_defaults_and_refuse_unknown_fields():
    options = PlayOptions(game="trust", mode=None, seed=0, pathway=None)
    assert (options.mode, options.pathway, options.borrowed) == ("explore", "none", "source")
    assert PlayOptions(source_run_id="r").borrowed == "run"
    assert PlayOptions(source_run_id="r", experience="none").borrowed == "none"
    with pytest.raises(ValueError):
        PlayOptions(game="trust", speed=3)
    with pytest.raises(ValueError):
        PlayOptions(experience="everything")
