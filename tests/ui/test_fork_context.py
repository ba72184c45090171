"""Forking on the Play screen, the way a person does it: replay trust-history-x002, move to step 3,
press f, take the dialog's choice, let the model step; then read the stored fork and the prompt it
was sent. By default the fork sees what x002 saw (x000, x001), never x002 itself; other experience
is a choice the dialog offers, the fork records and the screen states."""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.ui.settle import settle
from s3gym_tui.app import S3GymApp
from s3gym_tui.config import Settings
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.screens.dialogs import ForkDialog
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.agent_panel import AgentPanel

RUN = "trust-history-demo"
X002 = f"{RUN}-x002"


def trust_run(store: Store, run_id: str, episodes: int) -> None:
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="history",
                                          explore_episodes=episodes, eval_every=3, eval_episodes=1), run_id=run_id)
    asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())


@pytest.fixture
def db(tmp_path):
    path = tmp_path / "fork.db"
    with Store(path) as store:
        trust_run(store, RUN, 3)
        trust_run(store, "other", 4)
    return path


@pytest.fixture
def app(db):
    return S3GymApp(db_path=db, settings=Settings(default_model="scripted/trust", theme="dark",
                                                  human_name="tester"))


async def fork_x002_at_step_3(pilot, experience: str | None = None) -> PlayScreen:
    """Replay x002, move to step 3, press f, (choose the experience,) fork, let the model step once."""
    pilot.app.open_episode(X002)
    await pilot.pause()
    await pilot.press("right", "right", "right", "f")
    await pilot.pause()
    dialog = pilot.app.screen
    assert isinstance(dialog, ForkDialog)
    if experience is not None:
        dialog.query_one("#fork-experience").value = experience
        await pilot.pause()
    await pilot.click("#fork")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, PlayScreen) and screen.episode.fork_of == X002 and len(screen.steps) == 3
    await pilot.press("n")
    await settle(pilot)
    assert len(screen.steps) == 4
    return screen


def context_shown(screen: PlayScreen) -> str:
    return str(screen.query_one(AgentPanel).query_one("#agent-context").render())


def stored_fork(db, fork_id: str):
    """The stored fork and the user message of its first own prompt (step 3, sent by the model)."""
    with Store(db) as store:
        fork = store.episodes.get_episode(fork_id)
        return fork, json.loads(store.prompts.step_prompt(fork_id, 3))[-1]["content"]


async def test_pressing_f_on_x002_at_step_3_forks_with_what_x002_saw(app, db):
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await fork_x002_at_step_3(pilot)  # the dialog's default choice
        fork_id, shown = screen.episode.id, context_shown(screen)
    fork, prompt = stored_fork(db, fork_id)
    assert fork.history_episode_ids == (f"{RUN}-x000", f"{RUN}-x001")
    assert prompt.startswith("Hint Messages:\n--- Previous episode 1 (seed 0, 10 steps) ---")
    assert "Previous episode 2 (seed 1, 10 steps)" in prompt
    assert "Previous episode 3 (seed 2" not in prompt  # never the episode being forked
    assert (fork.experience_run_id, fork.experience_x, fork.experience_source) == (RUN, 2, "source")
    assert f"context: as the source at x=2 (run {RUN})" in shown


async def test_choosing_the_source_run_still_stops_at_the_source_state(app, db):
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await fork_x002_at_step_3(pilot, f"run:{RUN}")
        fork_id = screen.episode.id
        assert f"borrowed from run {RUN} at x=2 (chosen, no later than the source's state)" in context_shown(screen)
    fork, prompt = stored_fork(db, fork_id)
    assert fork.history_episode_ids == (f"{RUN}-x000", f"{RUN}-x001")
    assert fork.experience_source == "chosen" and "Previous episode 3 (seed 2" not in prompt


async def test_choosing_another_run_is_recorded_and_stated(app, db):
    async with app.run_test(size=(160, 45)) as pilot:
        screen = await fork_x002_at_step_3(pilot, "run:other")
        fork_id = screen.episode.id
        assert "context: borrowed from run other at x=4 (chosen)" in context_shown(screen)
    fork, prompt = stored_fork(db, fork_id)
    assert fork.history_episode_ids == tuple(f"other-x{i:03d}" for i in range(4))
    assert (fork.experience_run_id, fork.experience_x, fork.experience_source) == ("other", 4, "chosen")
    assert "Previous episode 4 (seed 3, 10 steps)" in prompt


async def test_hand_play_on_a_seed_the_borrowed_run_explored_warns(app):
    """Play from Home borrowing a run on a seed it explored: the agent has seen this very game, and the
    screen says so (a fair test picks another seed); another seed gets no such warning."""
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_play(game="trust", mode="explore", seed=1, model="scripted/trust", pathway="history",
                      source_run_id=RUN)
        await pilot.pause()
        assert any("same seed 1" in n.message and f"{RUN}-x001" in n.message for n in app._notifications)
        app.pop_screen()
        await pilot.pause()
        app.clear_notifications()
        app.open_play(game="trust", mode="explore", seed=9, model="scripted/trust", pathway="history",
                      source_run_id=RUN)
        await pilot.pause()
        assert not any("same seed" in n.message for n in app._notifications)
