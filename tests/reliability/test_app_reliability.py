"""The terminal app under stress: killed mid-run and reopened, stepping a model that fails in every
way, bad input typed or opened, a bad database, and a headless run writing the same file."""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from s3gym_tui.app import S3GymApp
from s3gym_tui.cli import main
from s3gym_tui.config import Settings
from s3gym_tui.models import RunConfig
from s3gym_tui.providers import fault
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.screens.protocol import ProtocolScreen
from s3gym_tui.screens.run_control import ResumeDialog
from s3gym_tui.store import Store

from tests import cli_fork
from tests.engine.helpers import check_run_consistency, run_protocol, trajectory
from tests.reliability.support import expected_fault, fault_evidence, file_bytes, one_line

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml"}
SIZE = (120, 40)


@pytest.fixture
def settings() -> Settings:
    return Settings(default_model="scripted/trust", theme="dark", human_name="tester")


def errors_of(app) -> list[str]:
    return [str(n.message) for n in app._notifications if n.severity == "error"]


def notes_of(app) -> str:
    return " | ".join(f"{n.title} {n.message}" for n in app._notifications)


async def arun_protocol(path, run_id, **config):
    """tests.engine.helpers.run_protocol for async tests (they already run an event loop)."""
    from s3gym_tui.engine.runner import ProtocolRunner

    store = Store(path)
    run = store.runs.create_run(RunConfig(**config), run_id=run_id)
    return store, await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()


async def wait_until(pilot, condition, limit: float = 60.0) -> None:
    for _ in range(int(limit / 0.05)):
        if condition():
            return
        await pilot.pause(0.05)
    raise AssertionError("condition not reached")


# ----------------------------------------------------------------------------- kill the app

def test_the_app_killed_mid_run_twice_then_reopened_finishes_the_same_run(tmp_path):
    db = tmp_path / "app.db"
    config = dict(model="scripted/trust", game="trust", pathway="summary", explore_episodes=4, eval_every=2,
                  eval_episodes=2)
    with Store(db) as store:
        store.runs.create_run(RunConfig(**config), run_id="live")
    out = subprocess.run([sys.executable, str(ROOT / "tests" / "reliability" / "app_lives.py"), str(db), "live",
                          "--kills", "2", "--steps", "15", "--seed", "3"],
                         env=ENV, cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    result = json.loads(out.stdout.strip().splitlines()[-1])
    assert result["kills"] == 2 and result["lives"] == 3, result
    assert result["status"] == "finished" and result.get("errors") == [], result
    reference_store, _ = run_protocol(tmp_path / "ref.db", run_id="live", **config)
    store = Store(db)
    assert trajectory(store, "live") == trajectory(reference_store, "live")
    check_run_consistency(store, store.runs.get_run("live"))


# ----------------------------------------------------------------------------- model faults in the UI

async def test_play_screen_survives_every_model_fault(tmp_path, settings):
    """Step a fault model through a whole episode: first a model that is down (retries exhausted:
    a notification, nothing stored), then every fault kind in turn; the app never crashes and
    each stored step carries its own fault."""
    fault.SETTINGS.faults = ("timeout",)
    fault.SETTINGS.transient_attempts = 99  # down
    fault.SETTINGS.huge_chars = 20_000
    app = S3GymApp(db_path=tmp_path / "play.db", settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        app.open_play(game="trust", mode="explore", seed=0, model="fault/trust")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, PlayScreen) and screen.session is not None
        await pilot.press("n")
        await wait_until(pilot, lambda: not screen.thinking and any("Model call failed" in (n.title or "")
                                                                    for n in app._notifications))
        assert screen.steps == [] and app.store.episodes.steps(screen.episode.id) == []
        fault.SETTINGS.faults = None  # all kinds, every request
        fault.SETTINGS.transient_attempts = 1  # back up
        await pilot.press("r")
        await wait_until(pilot, lambda: screen.session.done and not screen.thinking, limit=120)
        await pilot.pause(0.2)
        app.export_screenshot()
        steps = app.store.episodes.steps(screen.episode.id)
        assert len(steps) == len(screen.steps) and len(steps) >= 10
        for step in steps:
            assert not fault_evidence(expected_fault(0, step.index), step), step.index
        assert any("Episode over" in (n.title or "") for n in app._notifications)
        assert app.is_running


@pytest.mark.parametrize("model", ["nosuchprovider/model-x", "openai/gpt-4.1"])
async def test_play_screen_with_an_unreachable_model_notifies_and_stays_usable(tmp_path, settings, monkeypatch,
                                                                               model):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-unreachable")
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.setenv("OPENAI_API_BASE", "http://127.0.0.1:9")
    app = S3GymApp(db_path=tmp_path / "down.db", settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        app.open_play(game="trust", mode="explore", seed=3, model=model)
        await pilot.pause()
        screen = app.screen
        await pilot.press("n")
        await wait_until(pilot, lambda: not screen.thinking and errors_of(app))
        assert screen.steps == [] and app.store.episodes.steps(screen.episode.id) == []
        assert all("\n" not in e for e in errors_of(app))
        await pilot.press("t")  # take over: a person can still play the episode
        await pilot.pause()
        for key in "collaborate":
            await pilot.press(key)
        await pilot.press("enter")
        await wait_until(pilot, lambda: len(app.store.episodes.steps(screen.episode.id)) == 1)
        assert app.store.episodes.steps(screen.episode.id)[0].actor == "human"
        assert app.is_running


# ----------------------------------------------------------------------------- bad input in the UI

async def test_bad_ids_and_choices_are_notifications_not_crashes(tmp_path, settings):
    db = tmp_path / "ui.db"
    (await arun_protocol(db, "done", model="scripted/trust", game="trust", pathway="summary",
                         explore_episodes=2, eval_every=2, eval_episodes=1))[0].close()
    app = S3GymApp(db_path=db, settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        seen = []
        for open_screen, needle in ((lambda: app.open_protocol("nosuch"), "no run 'nosuch'"),
                                    (lambda: app.open_episode("nosuch"), "no episode 'nosuch'"),
                                    (lambda: app.open_play(game="go", seed=0), "unknown game 'go'"),
                                    (lambda: app.open_play(game="trust", mode="eval", seed=5),
                                     "belongs to the explore range"),
                                    (lambda: app.open_play(fork_of="done-x000", fork_step=999),
                                     "cannot fork after step 999"),
                                    (lambda: app.open_play(fork_of="nosuch", fork_step=1),
                                     "no episode 'nosuch'")):
            open_screen()
            await pilot.pause(0.1)
            assert needle in notes_of(app), (needle, notes_of(app))
            seen.append(needle)
            await pilot.press("escape")
            await pilot.pause()
        assert len(seen) == 6 and app.is_running


async def test_an_empty_or_enormous_summary_edit_saves_nothing(tmp_path, settings):
    from s3gym_tui.screens.summaries import SummariesScreen

    db = tmp_path / "sum.db"
    (await arun_protocol(db, "done", model="scripted/trust", game="trust", pathway="summary",
                         explore_episodes=2, eval_every=2, eval_episodes=1))[0].close()
    app = S3GymApp(db_path=db, settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        app.open_summaries("done")
        await pilot.pause(0.2)
        screen = app.screen
        assert isinstance(screen, SummariesScreen)
        versions = len(app.store.summaries.list("done"))
        for texts in (("", " ", "\n"), ("x" * 1_000_000, "a", "n")):
            assert screen.save_edit(*texts) is None
            await pilot.pause()
        assert len(app.store.summaries.list("done")) == versions and len(errors_of(app)) >= 2
        assert app.is_running


def test_the_app_command_refuses_a_bad_database_with_one_line(tmp_path, capsys):
    import sqlite3

    from s3gym_tui.store import SCHEMA_VERSION

    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"not a database " * 500)
    newer = tmp_path / "newer.db"
    Store(newer).close()
    conn = sqlite3.connect(newer)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'", (str(SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    for path, needle in ((corrupt, "not an SQLite database"), (newer, "newer s3gym")):
        before = file_bytes(path)
        assert main(["tui", "--db", str(path)]) == 2
        assert needle in one_line(capsys.readouterr().err)
        assert file_bytes(path) == before


async def test_the_app_itself_on_a_corrupt_database_shows_the_error(tmp_path, settings):
    corrupt = tmp_path / "corrupt.db"
    corrupt.write_bytes(b"not a database " * 500)
    app = S3GymApp(db_path=corrupt, settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause(0.2)
        assert "not an SQLite database" in notes_of(app)
    assert app.return_code in (0, None)


# ----------------------------------------------------------------------------- app + headless writer

async def test_the_app_and_a_headless_run_write_one_database_at_once(tmp_path, settings):
    db = tmp_path / "shared.db"
    configs = {"ui": dict(model="scripted/trust", game="trust", pathway="summary", explore_episodes=3,
                          eval_every=1, eval_episodes=2),
               "cli": dict(model="scripted/nullify", game="nullify", pathway="history", explore_episodes=4,
                           eval_every=1, eval_episodes=2)}
    with Store(db) as store:
        for run_id, config in configs.items():
            store.runs.create_run(RunConfig(**config), run_id=run_id)
    # `python -m s3gym_tui resume cli`, forked from the preloaded CLI (tests/cli_fork.py)
    headless = cli_fork.spawn(["resume", "cli", "--db", str(db)], env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL,
                              stderr=subprocess.PIPE)
    app = S3GymApp(db_path=db, settings=settings)
    async with app.run_test(size=SIZE) as pilot:
        app.open_protocol("ui")
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProtocolScreen)
        await pilot.press("r")  # resumed as its own process, after the dialog
        await wait_until(pilot, lambda: isinstance(app.screen, ResumeDialog))
        await pilot.press("y")
        await wait_until(pilot, lambda: screen.child is not None)
        child = screen.child
        await wait_until(pilot, lambda: not screen.running and app.store.runs.get_run("ui").status == "finished",
                         limit=300)
        assert child.process.wait(timeout=60) == 0
        _, stderr = await asyncio.to_thread(headless.communicate, None, 300)
        app.open_protocol("cli")  # the app reads the run the other process wrote
        await pilot.pause(0.3)
        assert errors_of(app) == [], errors_of(app)
    assert headless.returncode == 0, stderr.decode()[-2000:]
    store = Store(db)
    for run_id, config in configs.items():
        reference_store, _ = await arun_protocol(tmp_path / f"ref-{run_id}.db", run_id, **config)
        assert trajectory(store, run_id) == trajectory(reference_store, run_id)
        check_run_consistency(store, store.runs.get_run(run_id))


async def test_a_step_refused_by_a_locked_or_full_database_is_a_notification(tmp_path, settings, monkeypatch):
    """Take over and play while another writer holds the lock, then while the disk is full: each
    refused step is a notification, nothing half-stored, and play continues consistently after."""
    import sqlite3

    import s3gym_games as games
    from s3gym_tui.store.connection import Connection

    original_init = Connection.__init__

    def short_wait(self, path=None, *, busy_timeout=10.0, **options):
        original_init(self, path, busy_timeout=0.2, **options)

    monkeypatch.setattr(Connection, "__init__", short_wait)
    db = tmp_path / "busy.db"
    app = S3GymApp(db_path=db, settings=settings)

    async def type_action(pilot, text: str) -> None:
        from textual.widgets import Input

        await pilot.press("t")
        await pilot.pause()
        app.screen.query_one("#takeover", Input).value = text  # pasted, not typed key by key
        await pilot.press("enter")
        await pilot.pause(0.1)
        if app.screen.query_one("#takeover-note").display:  # the game would refuse it: confirm
            await pilot.press("enter")
            await pilot.pause(0.1)

    async with app.run_test(size=SIZE) as pilot:
        app.open_play(game="trust", mode="explore", seed=8, model="scripted/trust")
        await pilot.pause()
        screen = app.screen
        await type_action(pilot, "collaborate")
        blocker = sqlite3.connect(db, isolation_level=None)
        blocker.execute("BEGIN IMMEDIATE")
        try:
            await type_action(pilot, "cheat")
            await wait_until(pilot, lambda: "locked by another writer" in notes_of(app))
        finally:
            blocker.execute("ROLLBACK")
            blocker.close()
        conn = app.store.conn
        conn.execute("CREATE TABLE filler (x)")
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages + 2}")
        with contextlib.suppress(sqlite3.OperationalError):  # fill every page: the disk is full
            for _ in range(10_000):
                conn.execute("INSERT INTO filler VALUES (?)", ("f" * 500,))
        for _ in range(12):  # long actions fill the steps table's last page, then one needs a new page
            await type_action(pilot, "cheat" * 400)
            if "disk full" in notes_of(app):
                break
        await wait_until(pilot, lambda: "disk full" in notes_of(app), limit=20)
        refused_at = len(app.store.episodes.steps(screen.episode.id))
        conn.execute("PRAGMA max_page_count = 1073741823")
        conn.execute("DROP TABLE filler")
        await type_action(pilot, "cheat")
        await pilot.press("r")
        await wait_until(pilot, lambda: screen.session.done and not screen.thinking)
        steps = app.store.episodes.steps(screen.episode.id)
        assert steps[0].action == "collaborate"  # the step refused while locked was not stored
        assert all(s.action == "cheat" * 400 for s in steps[1:refused_at])
        assert steps[refused_at].action == "cheat"  # the one refused when full was not stored
        replayed = games.game_class("trust").replay("explore", 8, [s.action for s in steps])
        assert replayed.score() == app.store.episodes.get_episode(screen.episode.id).score
        assert app.is_running
