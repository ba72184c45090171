"""Protocol screen: a run is a process of its own. Opening a run never runs it; r resumes it (after a
dialog with what is left) as `s3gym resume`, which the screen follows through the store; leaving the
screen or quitting the app leaves it running; s stops it (Ctrl-C to its process, from Protocol or Home)."""

from __future__ import annotations

import os
import signal
import time

import pytest

import s3gym_games as games
from s3gym_tui.app import S3GymApp
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.screens.home import HomeScreen
from s3gym_tui.screens.protocol import ProtocolScreen
from s3gym_tui.screens.report import ReportScreen
from s3gym_tui.screens.run_control import QuitDialog, ResumeDialog
from s3gym_tui.screens.summaries import SummariesScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.board import BoardPanel
from s3gym_tui.widgets.checkpoint_plot import CurvePlot
from s3gym_tui.widgets.table import DataTable
from tests.ui.settle import until as _until

pytestmark = pytest.mark.usefixtures("forked_child_runs")  # the app's run processes: tests/conftest.py

LONG = dict(model="scripted/snake", game="snake", pathway="none", explore_episodes=2000, eval_every=1000,
            eval_episodes=0)  # runs for minutes: only a stop ends it


def new_run(path, **config):
    with Store(path) as store:
        cfg = dict(model="scripted/trust", game="trust", pathway="summary", explore_episodes=2,
                   eval_every=1, eval_episodes=1)
        cfg.update(config)
        return store.runs.create_run(RunConfig(**cfg))


def label_text(screen, selector) -> str:
    return str(screen.query_one(selector).content)


def assert_complete(store: Store, run) -> None:
    """Every episode finished once, steps numbered 0..n-1 with no duplicates, every checkpoint stored."""
    cfg = run.config
    episodes = store.episodes.list(run.id)
    assert sorted(e.id for e in episodes) == sorted({e.id for e in episodes})
    assert sum(e.phase == "explore" for e in episodes) == cfg.explore_episodes
    assert sum(e.phase == "eval" for e in episodes) == len(cfg.checkpoints()) * cfg.eval_episodes
    for episode in episodes:
        steps = store.episodes.steps(episode.id, include_prompt=False)
        assert episode.status == "finished"
        assert [s.index for s in steps] == list(range(len(steps))) and episode.n_steps == len(steps)
        assert games.verify_trajectory(episode.game, episode.mode, episode.seed,
                                       [s.action for s in steps]) == episode.score
    assert [c.x for c in store.checkpoints.list(run.id)] == cfg.checkpoints()


async def until(pilot, predicate, timeout: float = 90.0, what: str = "condition"):
    return await _until(pilot, predicate, timeout, what)


def alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


def steps_of(path, run_id) -> int:
    with Store(path) as store:
        return sum(e.n_steps for e in store.episodes.list(run_id))


@pytest.fixture
def reaper():
    """Processes a test started: killed (and reaped) at its end, whatever happened."""
    started: list = []
    yield started
    for process in started:
        if process.poll() is None:
            process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)


async def resume_here(pilot, screen, reaper):
    """r on Protocol, then y in the dialog that shows what is left; the run's process."""
    await pilot.press("r")
    dialog = await until(pilot, lambda: isinstance(pilot.app.screen, ResumeDialog) and pilot.app.screen,
                         what="the resume dialog")
    await until(pilot, lambda: dialog.estimate is not None, what="the estimate of what is left")
    await pilot.press("y")
    from s3gym_tui.screens.run_control import children

    # the newest process this app started for the run, ended or not (screen.child is a living one only:
    # a process that fails at once, as one for an unknown provider does, may have ended already)
    child = await until(pilot, lambda: next((c for c in reversed(children(pilot.app).children)
                                             if c.run_id == screen.run_id), None), what="the run's process")
    reaper.append(child.process)
    return child


async def test_opening_a_created_run_does_not_start_it_r_does_and_the_screen_follows(demo_db, settings,
                                                                                         reaper):
    path, _ = demo_db
    run = new_run(path)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
        await pilot.pause(0.5)
        assert app.store.runs.get_run(run.id).status == "created" and not screen.running
        assert "press r to resume" in label_text(screen, "#proto-status")
        await pilot.press("r")
        dialog = await until(pilot, lambda: isinstance(app.screen, ResumeDialog) and app.screen)
        await until(pilot, lambda: dialog.estimate is not None)
        text = label_text(dialog, "#resume-estimate")
        assert "What is left" in text and "2 episodes" in text
        await pilot.press("escape")  # not resumed
        await pilot.pause(0.3)
        assert app.store.runs.get_run(run.id).status == "created" and screen.child is None
        child = await resume_here(pilot, screen, reaper)
        assert child.argv[3:5] == ["resume", run.id]
        assert child.process.wait(timeout=120) == 0
        await until(pilot, lambda: screen.run.status == "finished", what="the screen to see the end")
        stored = app.store.runs.get_run(run.id)
        assert_complete(app.store, stored)
        checkpoints = app.store.checkpoints.list(run.id)
        assert screen.points == {c.x: c.mean for c in checkpoints}
        assert screen.query_one(CurvePlot).curves[0].points == tuple((c.x, c.mean) for c in checkpoints)
        assert label_text(screen, "#proto-explore-label") == "Exploration 2/2"
        assert label_text(screen, "#proto-check-label") == "Checkpoints 3/3"
        latest = app.store.summaries.current_summary(run.id)
        assert latest is not None and screen.latest_summary == latest
        assert "[finished]" in label_text(screen, "#proto-status")
        assert screen.current_episode is not None and screen.current_episode.run_id == run.id
        assert screen.query_one(BoardPanel).border_subtitle.endswith(f"step {len(screen.current_steps)}")


async def test_a_run_started_here_outlives_the_screen_and_the_app(demo_db, settings, reaper):
    """esc leaves it running (the process and the store say so); quitting offers leave or stop, and
    a run left running goes on after the app is gone."""
    path, _ = demo_db
    run = new_run(path, **LONG)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
        child = await resume_here(pilot, screen, reaper)
        await until(pilot, lambda: screen.lease is not None, what="the lease on Protocol")
        assert screen.lease.pid == child.pid
        assert "(started by this app)" in label_text(screen, "#proto-status")
        await pilot.press("escape")
        await until(pilot, lambda: isinstance(app.screen, HomeScreen))
        await until(pilot, lambda: steps_of(path, run.id) > 0, what="the first steps")
        before = steps_of(path, run.id)
        await pilot.pause(1.0)
        assert child.alive and app.store.leases.lease(run.id).pid == child.pid
        assert app.store.runs.get_run(run.id).status == "running" and steps_of(path, run.id) > before
        await pilot.press("ctrl+q")
        dialog = await until(pilot, lambda: isinstance(app.screen, QuitDialog) and app.screen)
        assert run.id in label_text(dialog, ".dialog-text")
        await pilot.press("escape")  # cancel: the app stays
        await pilot.pause()
        assert app.is_running
        await pilot.press("ctrl+q")
        await until(pilot, lambda: isinstance(app.screen, QuitDialog))
        await pilot.press("l")  # leave it running
        await pilot.pause(0.3)
    assert not app.is_running
    before = steps_of(path, run.id)
    time.sleep(1.0)
    assert alive(child.pid) and child.alive
    with Store(path) as store:
        assert store.runs.get_run(run.id).status == "running"
        assert store.leases.lease(run.id).pid == child.pid and store.leases.lease(run.id).alive()
    assert steps_of(path, run.id) > before


async def test_s_stops_then_opening_the_stopped_run_does_not_resume_it(demo_db, settings, reaper):
    path, _ = demo_db
    run = new_run(path, **LONG)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
        child = await resume_here(pilot, screen, reaper)
        await until(pilot, lambda: screen.lease is not None, what="the lease")
        await pilot.press("s")
        assert child.process.wait(timeout=60) == 130  # the CLI's clean stop (Ctrl-C)
        stopped = app.store.runs.get_run(run.id)
        assert (stopped.status, stopped.status_reason) == ("stopped", "interrupted (Ctrl-C)")
        assert app.store.leases.lease(run.id) is None
        await until(pilot, lambda: "[stopped]" in label_text(screen, "#proto-status"))
        steps = steps_of(path, run.id)
        await pilot.press("escape")
        app.open_protocol(run.id)  # opened again: it stays stopped
        screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
        await pilot.pause(1.0)
        assert not screen.running and screen.child is None and len(app.child_runs.alive()) == 0
        assert app.store.runs.get_run(run.id).status == "stopped" and steps_of(path, run.id) == steps
        assert "interrupted (Ctrl-C)" in label_text(screen, "#proto-status")
        await pilot.press("escape")  # nor from Home's list (enter opens)
        home = await until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen)
        table = home.query_one("#runs", DataTable)
        table.focus()
        table.move_cursor(row=table.get_row_index(run.id))
        await pilot.press("enter")
        await until(pilot, lambda: isinstance(app.screen, ProtocolScreen))
        await pilot.pause(1.0)
        assert app.store.runs.get_run(run.id).status == "stopped" and steps_of(path, run.id) == steps


async def test_s_on_home_stops_the_highlighted_run(demo_db, settings, reaper):
    path, _ = demo_db
    run = new_run(path, **LONG)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
        child = await resume_here(pilot, screen, reaper)
        await until(pilot, lambda: screen.lease is not None, what="the lease")
        await pilot.press("escape")
        home = await until(pilot, lambda: isinstance(app.screen, HomeScreen) and app.screen)
        table = home.query_one("#runs", DataTable)
        await until(pilot, lambda: "running" in str(table.get_cell(run.id, "status")))
        table.focus()
        table.move_cursor(row=table.get_row_index(run.id))
        await pilot.pause()
        await pilot.press("s")
        assert child.process.wait(timeout=60) == 130
        stopped = app.store.runs.get_run(run.id)
        assert (stopped.status, stopped.status_reason) == ("stopped", "interrupted (Ctrl-C)")
        await until(pilot, lambda: str(table.get_cell(run.id, "status")) == "stopped")
        await pilot.press("r")  # resume from Home is asked too
        await until(pilot, lambda: isinstance(app.screen, ResumeDialog))
        await pilot.press("escape")
        await pilot.pause(0.5)
        assert app.store.runs.get_run(run.id).status == "stopped" and not app.child_runs.alive()


async def test_quit_can_stop_the_runs_it_started(demo_db, settings, reaper):
    path, _ = demo_db
    run = new_run(path, **LONG)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
        child = await resume_here(pilot, screen, reaper)
        await until(pilot, lambda: screen.lease is not None, what="the lease")
        await pilot.press("ctrl+q")
        await until(pilot, lambda: isinstance(app.screen, QuitDialog))
        await pilot.press("s")
        await pilot.pause(0.3)
    assert child.process.wait(timeout=60) == 130
    with Store(path) as store:
        final = store.runs.get_run(run.id)
        assert (final.status, final.status_reason) == ("stopped", "interrupted (Ctrl-C)")
        assert store.leases.lease(run.id) is None


async def test_finished_run_opens_with_its_stored_curve_without_running(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    with Store(path) as store:
        before = sum(e.n_steps for e in store.episodes.list(run_id))
        checkpoints = store.checkpoints.list(run_id)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run_id)
        await pilot.pause()
        screen = app.screen
        assert not screen.running and screen.child is None
        assert screen.query_one(CurvePlot).curves[0].points == tuple((c.x, c.mean) for c in checkpoints)
        assert label_text(screen, "#proto-check-label") == f"Checkpoints {len(checkpoints)}/{len(checkpoints)}"
        await pilot.press("r")  # nothing left to run
        await pilot.pause()
        assert not screen.running and screen.child is None
        assert sum(e.n_steps for e in app.store.episodes.list(run_id)) == before
        await pilot.press("m")
        await pilot.pause()
        assert isinstance(app.screen, SummariesScreen) and app.screen.run_id == run_id
        await pilot.press("escape")
        await pilot.press("t")
        await pilot.pause()
        assert isinstance(app.screen, ReportScreen) and app.screen.run_ids == [run_id]


async def test_a_model_that_cannot_be_reached_is_said_and_the_run_stays_as_it_was(demo_db, settings, reaper):
    path, _ = demo_db
    run = new_run(path, model="nosuchprovider/nosuchmodel", max_retries=0)
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
        child = await resume_here(pilot, screen, reaper)
        assert child.process.wait(timeout=120) not in (0, 130)
        note = await until(pilot, lambda: next((n for n in app._notifications if n.severity == "error"), None),
                           what="the error")
        assert "nosuchprovider" in str(note.message) and str(child.log) in str(note.message)
        assert app.store.runs.get_run(run.id).status in ("created", "stopped", "failed")
        await until(pilot, lambda: "[starting]" not in label_text(screen, "#proto-status"))


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
    try:
        with Store(path) as store:  # the run as a headless process would have stored it
            await ProtocolRunner(store, store.runs.get_run(run.id), backoff_base_s=0).run_protocol()
        app = S3GymApp(db_path=path, settings=settings)
        async with app.run_test(size=(120, 40)) as pilot:
            app.open_protocol(run.id)
            await pilot.pause()
            screen = app.screen
            status = label_text(screen, "#proto-status")
            assert "replies did not parse" in status and "100%" in status
            assert screen.contract_warning.startswith("fault/trust: 10 of its last 10")
    finally:
        fault.reset()


async def test_report_pairs_and_summaries_open_while_it_runs_and_s_there_stops_it(demo_db, settings, reaper):
    from s3gym_tui.screens.pairs import PairsScreen

    path, _ = demo_db
    run = new_run(path, **{**LONG, "pathway": "summary", "game": "trust", "model": "scripted/trust"})
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run.id)
        screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
        child = await resume_here(pilot, screen, reaper)
        await until(pilot, lambda: screen.lease is not None, what="the lease")
        await pilot.press("t")
        report = await until(pilot, lambda: isinstance(app.screen, ReportScreen) and app.screen)
        assert report.run_ids == [run.id]
        await pilot.press("escape")
        app.open_pairs()
        await until(pilot, lambda: isinstance(app.screen, PairsScreen))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is screen)
        await pilot.press("m")
        await until(pilot, lambda: isinstance(app.screen, SummariesScreen) and app.screen.run_id == run.id)
        await pilot.pause(0.5)
        assert child.alive and app.store.runs.get_run(run.id).status == "running"
        assert not [n for n in app._notifications if n.severity == "error"]
        await pilot.press("s")  # from Summaries
        assert child.process.wait(timeout=60) == 130
        assert app.store.runs.get_run(run.id).status == "stopped"
