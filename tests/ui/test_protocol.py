"""Protocol screen: launch a fresh run and watch it finish, stop and resume, open a finished run."""

from __future__ import annotations

import asyncio

import pytest

import games
from s3gym_tui.engine import session as session_module
from s3gym_tui.app import S3GymApp
from s3gym_tui.models import RunConfig
from s3gym_tui.screens.protocol import ProtocolScreen
from s3gym_tui.screens.report import ReportScreen
from s3gym_tui.screens.summaries import SummariesScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.board import BoardPanel
from s3gym_tui.widgets.checkpoint_plot import CurvePlot


def new_run(path, **config):
    with Store(path) as store:
        cfg = dict(model="scripted/trust", game="trust", pathway="summary", explore_episodes=2,
                   eval_every=1, eval_episodes=1)
        cfg.update(config)
        return store.create_run(RunConfig(**cfg))


def label_text(screen, selector) -> str:
    return str(screen.query_one(selector).content)


def assert_complete(store: Store, run) -> None:
    """Every episode finished once, steps numbered 0..n-1 with no duplicates, every checkpoint stored."""
    cfg = run.config
    episodes = store.episodes(run.id)
    assert sorted(e.id for e in episodes) == sorted({e.id for e in episodes})
    assert sum(e.phase == "explore" for e in episodes) == cfg.explore_episodes
    assert sum(e.phase == "eval" for e in episodes) == len(cfg.checkpoints()) * cfg.eval_episodes
    for episode in episodes:
        steps = store.steps(episode.id, include_prompt=False)
        assert episode.status == "finished"
        assert [s.index for s in steps] == list(range(len(steps))) and episode.n_steps == len(steps)
        assert games.verify_trajectory(episode.game, episode.mode, episode.seed,
                                       [s.action for s in steps]) == episode.score
    assert [c.x for c in store.checkpoints(run.id)] == cfg.checkpoints()


@pytest.fixture
def gate(monkeypatch):
    """Holds the run inside its n-th model call (until released), so a test can stop it at a
    known point instead of racing it."""

    class Gate:
        def __init__(self) -> None:
            self.calls = 0
            self.hold_at = 25
            self.released = asyncio.Event()

        async def wait_held(self, pilot) -> None:
            for _ in range(5000):
                if self.calls >= self.hold_at:
                    return
                await pilot.pause()
            raise AssertionError("the run never reached the gate")

    gate = Gate()
    real = session_module.complete

    async def gated(settings, messages, context):
        gate.calls += 1
        if gate.calls == gate.hold_at:
            await gate.released.wait()
        return await real(settings, messages, context)

    monkeypatch.setattr(session_module, "complete", gated)
    return gate


async def test_fresh_run_runs_to_completion_and_shows_checkpoints(demo_db, settings):
    path, _ = demo_db
    run = new_run(path)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProtocolScreen)
        await app.workers.wait_for_complete()
        await pilot.pause()
        stored = app.store.get_run(run.id)
        assert stored.status == "finished"
        assert_complete(app.store, stored)
        checkpoints = app.store.checkpoints(run.id)
        assert screen.points == {c.x: c.mean for c in checkpoints}
        curve = screen.query_one(CurvePlot).curves[0]
        assert curve.points == tuple((c.x, c.mean) for c in checkpoints)
        assert label_text(screen, "#proto-explore-label") == "Exploration 2/2"
        assert label_text(screen, "#proto-check-label") == "Checkpoints 3/3"
        latest = app.store.current_summary(run.id)
        assert latest is not None and screen.latest_summary == latest
        assert screen.query_one("#proto-summary").border_title.startswith(f"Summary v{latest.version}")
        assert "[finished]" in str(screen.query_one("#proto-status").content)
        # the current episode panel shows the last step of an episode of this run
        assert screen.current_episode is not None and screen.current_episode.run_id == run.id
        assert screen.query_one(BoardPanel).border_subtitle.endswith(f"step {len(screen.current_steps)}")
        assert "Last action:" in str(screen.query_one("#proto-step").content)


async def test_stop_then_resume_gives_a_finished_run_without_duplicated_steps(demo_db, settings, gate):
    path, _ = demo_db
    run = new_run(path, explore_episodes=6, eval_every=3, eval_episodes=2)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        await pilot.pause()
        screen = app.screen
        await gate.wait_held(pilot)  # inside an episode, waiting for the model
        assert screen.running
        await pilot.press("s")
        await app.workers.wait_for_complete()
        await pilot.pause()
        stopped = app.store.get_run(run.id)
        assert stopped.status == "stopped" and not screen.running
        assert "[stopped]" in str(screen.query_one("#proto-status").content)
        at_stop = app.store.episodes(run.id)
        assert sum(e.status == "finished" for e in at_stop) < 6 + 3 * 2
        assert any(e.status == "running" for e in at_stop)  # stopped inside an episode
        await pilot.press("r")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        final = app.store.get_run(run.id)
        assert final.status == "finished"
        assert_complete(app.store, final)
        assert label_text(screen, "#proto-explore-label") == "Exploration 6/6"
        assert set(screen.points) == {0, 3, 6}


async def test_leaving_the_screen_stops_the_run_and_reopening_resumes_it(demo_db, settings, gate):
    path, _ = demo_db
    run = new_run(path, explore_episodes=4, eval_every=2, eval_episodes=1)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        await pilot.pause()
        screen = app.screen
        await gate.wait_held(pilot)
        assert screen.running
        await pilot.press("escape")
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert not isinstance(app.screen, ProtocolScreen)
        assert app.store.get_run(run.id).status == "stopped"
        app.open_protocol(run.id)  # a stopped run resumes when opened
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert_complete(app.store, app.store.get_run(run.id))


async def test_finished_run_opens_with_its_stored_curve_without_running(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    with Store(path) as store:
        before = sum(e.n_steps for e in store.episodes(run_id))
        checkpoints = store.checkpoints(run_id)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run_id)
        await pilot.pause()
        screen = app.screen
        assert not screen.running and screen._worker is None
        assert screen.query_one(CurvePlot).curves[0].points == tuple((c.x, c.mean) for c in checkpoints)
        assert label_text(screen, "#proto-check-label") == f"Checkpoints {len(checkpoints)}/{len(checkpoints)}"
        await pilot.press("r")  # nothing left to run
        await pilot.pause()
        assert not screen.running
        assert sum(e.n_steps for e in app.store.episodes(run_id)) == before
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, SummariesScreen) and app.screen.run_id == run_id
        await pilot.press("escape")
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, ReportScreen) and app.screen.run_ids == [run_id]


async def test_a_model_that_cannot_be_reached_stops_the_run_with_a_message(demo_db, settings):
    path, _ = demo_db
    run = new_run(path, model="nosuchprovider/nosuchmodel", max_retries=0)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProtocolScreen)
        assert app.store.get_run(run.id).status in ("stopped", "failed")
        assert screen.error
        assert screen.error in str(screen.query_one("#proto-status").content)
        assert any(n.severity == "error" for n in app._notifications)


async def test_unknown_run_is_a_message_not_a_crash(demo_db, settings):
    path, _ = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol("no-such-run")
        await pilot.pause()
        assert isinstance(app.screen, ProtocolScreen)
        assert "no-such-run" in str(app.screen.query_one("#proto-status").content)
        await pilot.press("r", "s")
        await pilot.pause()


async def test_a_model_whose_replies_do_not_parse_is_flagged(demo_db, settings, monkeypatch):
    from s3gym_tui.providers import fault

    path, _ = demo_db
    monkeypatch.setattr(fault.SETTINGS, "faults", ("wrong_language",))
    run = new_run(path, model="fault/trust", pathway="none", explore_episodes=1, eval_every=1, eval_episodes=0)
    app = S3GymApp(db_path=path, settings=settings)
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            app.open_protocol(run.id)
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
            screen = app.screen
            status = str(screen.query_one("#proto-status").content)
            assert "replies did not parse" in status and "100%" in status
            assert screen.contract_warning.startswith("fault/trust: 10 of its last 10")
        app = S3GymApp(db_path=path, settings=settings)  # reopened later: the stored replies say it too
        async with app.run_test(size=(120, 40)) as pilot:
            app.open_protocol(run.id)
            await pilot.pause()
            assert "replies did not parse" in str(app.screen.query_one("#proto-status").content)
    finally:
        fault.reset()
