"""One live truth in the app: screens follow what another process writes (no key pressed), a run
driven elsewhere is shown read-only with its driver, `s` stops a fresh run within one model call,
a run can be deleted from Home, a summary edit made while a run is live says, and records, the
first state that uses it, and a commit seen as the app closes is told to no screen."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from textual.widgets import DataTable

from s3gym_tui.app import S3GymApp
from s3gym_tui.models import RunConfig
from s3gym_tui.screens.dialogs import ConfirmDialog
from s3gym_tui.screens.home import HomeScreen
from s3gym_tui.screens.protocol import ProtocolScreen
from s3gym_tui.screens.run_control import ResumeDialog
from s3gym_tui.screens.summaries import SummariesScreen
from s3gym_tui.store import Store

from tests import cli_fork
from tests.fake_openai import FakeOpenAI
from tests.ui.settle import until as _until

pytestmark = pytest.mark.usefixtures("forked_child_runs")  # the app's run processes: tests/conftest.py

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml",
       "OPENAI_API_KEY": "sk-test-not-a-real-key-000"}


@pytest.fixture
def server():
    fake = FakeOpenAI(delay_s=0.05).start()
    yield fake
    fake.stop()


def headless(db: Path, server: FakeOpenAI, *extra: str):
    """`python -m s3gym_tui run trust ...`, forked from the preloaded CLI (tests/cli_fork.py)."""
    return cli_fork.spawn(["run", "trust", "-m", "openai/fake", "--api-base", server.base_url, "--db", str(db),
                           *extra], cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)


async def until(pilot, predicate, timeout: float = 60.0, what: str = "condition"):
    return await _until(pilot, predicate, timeout, what, step=0.1)


def run_ids(screen: HomeScreen) -> list[str]:
    table = screen.query_one("#runs", DataTable)
    return [table.coordinate_to_cell_key((row, 0))[0].value for row in range(table.row_count)]


async def test_home_and_protocol_follow_a_headless_run_without_a_key(demo_db, settings, server):
    path, _ = demo_db
    server.default["delay_s"] = 0.05  # 300+ calls: the run cannot finish before it is terminated
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        home = app.screen
        assert isinstance(home, HomeScreen)
        before = set(run_ids(home))
        proc = headless(path, server, "--episodes", "30", "--eval-episodes", "1")
        try:
            new = await until(pilot, lambda: set(run_ids(home)) - before, what="the new run on Home")
            run_id = new.pop()
            await until(pilot, lambda: "PID" in str(home.query_one("#runs", DataTable).get_cell(run_id, "status")),
                        what="the driver in Home's status column")
            app.open_protocol(run_id)
            screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
            await until(pilot, lambda: screen.lease is not None, what="the lease on Protocol")
            assert screen.lease.pid == proc.pid and screen.running and screen.child is None
            status = str(screen.query_one("#proto-status").content)
            assert f"driven by PID {proc.pid}" in status and "press r" not in status
            first = len(screen.current_steps) + 100 * len(screen.explore_done)
            await until(pilot, lambda: len(screen.current_steps) + 100 * len(screen.explore_done) > first + 3,
                        what="steps of the headless run appearing live")
            screen.action_resume()  # a second driver is not started: the screen keeps following
            await pilot.pause()
            assert screen.child is None and app.screen is screen
        finally:
            proc.terminate()
            proc.wait(timeout=60)
        await until(pilot, lambda: screen.lease is None, what="the lease to go")
        status = str(screen.query_one("#proto-status").content)
        assert "terminated (SIGTERM)" in status and "press r to resume" in status


async def test_stop_a_fresh_run_within_one_model_call(tmp_path, settings, server):
    server.default["delay_s"] = 0.3
    path = tmp_path / "fresh.db"
    app = S3GymApp(db_path=path, settings=settings.model_copy(
        update={"default_model": "openai/fake"}))
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-a-real-key-000")
    async with app.run_test(size=(120, 40)) as pilot:
        with Store(path) as store:
            run = store.runs.create_run(RunConfig(model="openai/fake", game="trust", api_base=server.base_url))
        app.open_protocol(run.id)
        screen = await until(pilot, lambda: isinstance(app.screen, ProtocolScreen) and app.screen)
        await pilot.press("r")  # resume (here: start) is asked, then runs as `s3gym resume`
        await until(pilot, lambda: isinstance(app.screen, ResumeDialog))
        await pilot.press("y")
        child = await until(pilot, lambda: screen.child, what="the run's process")
        try:
            await until(pilot, lambda: len(server.requests) >= 3, what="a few model calls")
            await pilot.press("s")
            assert child.process.wait(timeout=30) == 130
        finally:
            if child.alive:
                child.process.kill()
                child.process.wait()
        calls = len(server.requests)
        with Store(path) as store:
            stopped = store.runs.get_run(run.id)
            steps = sum(e.n_steps for e in store.episodes.list(run.id))
        assert (stopped.status, stopped.status_reason) == ("stopped", "interrupted (Ctrl-C)")
        await pilot.pause(1.5)
        assert len(server.requests) <= calls + 1  # at most the call that was in flight
        with Store(path) as store:
            assert sum(e.n_steps for e in store.episodes.list(run.id)) == steps
            assert store.leases.lease(run.id) is None


async def test_a_store_poll_while_the_app_closes_tells_no_screen(demo_db, settings, monkeypatch):
    """Closing, Textual (8.2.8: App._close_all, then the app's timers stop) empties the screen stack
    before it stops the store poll's timer: a poll firing in between, with a commit to tell (another
    process writing as the app closes), must not look for a screen (ScreenStackError ended a UI test
    now and then on a loaded machine)."""
    from s3gym_tui.store.watch import StoreWatcher

    monkeypatch.setattr(StoreWatcher, "changed", lambda self: True)  # a commit before every poll
    polled = []  # (screens on the stack, store generation before, after) of the poll in between
    close_all = S3GymApp._close_all

    async def closed_then_polled(self) -> None:
        await close_all(self)
        before = self.store_generation
        self._poll_store()  # what the timer does when it fires here
        polled.append((len(self.screen_stack), before, self.store_generation))

    monkeypatch.setattr(S3GymApp, "_close_all", closed_then_polled)
    app = S3GymApp(db_path=demo_db[0], settings=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        await until(pilot, lambda: app.store_generation > 0, what="a poll telling Home")
        assert isinstance(app.screen, HomeScreen)
    (screens, before, after), = polled
    assert screens == 0 and after == before  # the poll came after the screens were gone, and told nobody


async def test_delete_a_run_from_home(demo_db, settings):
    path, ids = demo_db
    doomed = ids["snake-summary"]
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        home = app.screen
        table = home.query_one("#runs", DataTable)
        table.focus()
        table.move_cursor(row=table.get_row_index(doomed))
        await pilot.pause()
        await pilot.press("delete")
        dialog = await until(pilot, lambda: isinstance(app.screen, ConfirmDialog) and app.screen)
        assert dialog.question.startswith(f"Delete run {doomed}?")
        await pilot.press("escape")  # keep it
        await pilot.pause()
        assert doomed in run_ids(home)
        await pilot.press("delete")
        await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
        await pilot.press("y")
        await until(pilot, lambda: doomed not in run_ids(home), what="the run to leave the list")
    with Store(path) as store:
        assert doomed not in {r.id for r in store.runs.list_runs()}
        assert store.episodes.list(doomed) == []


async def test_an_edit_during_a_live_run_names_and_records_its_first_state(demo_db, settings, server,
                                                                          monkeypatch):
    path, _ = demo_db
    server.default["delay_s"] = 0.15
    proc = headless(path, server, "--pathway", "summary", "--episodes", "12", "--eval-every", "3",
                    "--eval-episodes", "1")
    app = S3GymApp(db_path=path, settings=settings)
    notes: list[str] = []
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            monkeypatch.setattr(app, "notify", lambda message, **kw: notes.append(str(message)))
            store = app.store

            def live_run():
                leases = store.leases.live_leases()
                for run in store.runs.list_runs():
                    if run.id in leases and store.summaries.list(run.id):
                        return run
                return None

            run = await until(pilot, live_run, what="a live summary run with a summary")
            app.open_summaries(run.id)
            screen = await until(pilot, lambda: isinstance(app.screen, SummariesScreen) and app.screen)
            await pilot.pause()
            edited = screen.save_edit("Cooperate first.", "Never cheat twice.", "Probe once.")
            assert edited is not None
            said = [n for n in notes if f"Saved v{edited.version}" in n]
            action = store.summaries.summary_actions(run.id)[-1]
            assert action["action"] == "edit" and action["summary_id"] == edited.id
            x = action["effective_from_x"]
            assert x is not None and said and f"From state x={x}:" in said[-1]
            # a fresh process sees the edit at once
            seen = subprocess.run([sys.executable, "-c",
                                   "import sys; from s3gym_tui.store import Store; "
                                   "s = Store(sys.argv[1], read_only=True); "
                                   "print(s.summaries.get_summary(sys.argv[2]).retain)", str(path), edited.id],
                                  cwd=ROOT, env=ENV, capture_output=True, text=True, timeout=60)
            assert seen.stdout.strip() == "Cooperate first.", seen.stderr
    finally:
        proc.wait(timeout=300)
    with Store(path) as store:
        assert store.summaries.state_x_began(run.id)[x] == edited.id  # state x began from the edit
        written = {s.for_episode_id: s for s in store.summaries.list(run.id) if s.author.startswith("model")}
        from s3gym_tui.models import explore_episode_id

        assert written[explore_episode_id(run.id, x)].parent_version == edited.version
        for earlier in range(1, x):
            model_summary = written.get(explore_episode_id(run.id, earlier))
            if model_summary is not None:
                assert model_summary.parent_version != edited.version
