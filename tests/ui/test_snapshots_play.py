"""Snapshots of Home, Play (after scripted steps, with a proposal waiting), Help; 120x40 and 80x24.

Deterministic: run ids and creation times are fixed in the database, play episode ids and call
latencies are made deterministic with monkeypatch (the only parts that depend on clocks or random)."""

from __future__ import annotations

import asyncio
import itertools
import shutil
import sqlite3
import types
from pathlib import Path

import pytest

from tests.ui.settle import settle
from s3gym_tui.app import S3GymApp
from s3gym_tui.config import Settings
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store

RUNS = (("trust-history-demo", "trust", "history", 6), ("trust-summary-demo", "trust", "summary", 6),
        ("snake-summary-demo", "snake", "summary", 3))


def build_snapshot_db(path: Path) -> None:
    store = Store(path)
    for run_id, game, pathway, episodes in RUNS:
        run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway=pathway,
                                              explore_episodes=episodes, eval_every=3, eval_episodes=2),
                                    run_id=run_id)
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    store.close()
    conn = sqlite3.connect(path)  # fixed creation times (shown in the recent-runs table)
    with conn:
        for n, (run_id, *_rest) in enumerate(RUNS):
            conn.execute("UPDATE runs SET created_at = ? WHERE id = ?",
                         (f"2026-11-0{n + 1}T09:30:00.000+00:00", run_id))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


@pytest.fixture(scope="module")
def snapshot_db_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("snap") / "snap.db"
    build_snapshot_db(path)
    return path


@pytest.fixture
def snapshot_app(snapshot_db_template, tmp_path, monkeypatch):
    """The real app on a private copy, with deterministic play ids and latencies."""
    db = tmp_path / "snap.db"
    shutil.copy(snapshot_db_template, db)
    counter = itertools.count(1)
    monkeypatch.setattr("s3gym_tui.engine.play.uuid",
                        types.SimpleNamespace(uuid4=lambda: types.SimpleNamespace(hex=f"{next(counter):010d}")))
    clock = itertools.count()
    monkeypatch.setattr("s3gym_tui.engine.llm.time",
                        types.SimpleNamespace(perf_counter=lambda: next(clock) * 0.012))

    def make(**settings) -> S3GymApp:
        base = Settings(default_model="scripted/trust", theme="dark", human_name="tester")
        return S3GymApp(db_path=db, settings=base.model_copy(update=settings))

    return make




def play_keys(*keys: str):
    """Open Play (Trust, History borrowed from the demo run), then press keys one at a time."""
    async def run_before(pilot) -> None:
        pilot.app.open_play(game="trust", mode="explore", seed=0, model="scripted/trust",
                            pathway="history", source_run_id="trust-history-demo")
        await pilot.pause()
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


def test_home_snapshot(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), terminal_size=(120, 40))


def test_play_after_steps_snapshot(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), terminal_size=(120, 40), run_before=play_keys("n", "n", "n"))


def test_play_proposal_waiting_snapshot(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(propose_then_wait=True), terminal_size=(120, 40),
                        run_before=play_keys("n", "a", "n", "a", "n"))


def test_help_snapshot(snap_compare, snapshot_app):
    async def run_before(pilot) -> None:
        await pilot.press("question_mark")
        await settle(pilot)  # the help's text is made off the UI thread

    assert snap_compare(snapshot_app(), terminal_size=(120, 40), run_before=run_before)


def test_play_small_terminal_snapshot(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), terminal_size=(80, 24), run_before=play_keys("n", "n", "n"))


def test_home_small_terminal_snapshot(snap_compare, snapshot_app):
    assert snap_compare(snapshot_app(), terminal_size=(80, 24))


def run_dialog_open():
    async def run_before(pilot) -> None:
        await settle(pilot)  # the pilot starts when the app is ready, not when Home has composed
        screen = pilot.app.screen
        game_list = screen.query_one("#game-list")
        game_list.highlighted = [o.id for o in game_list.options].index("snake")
        screen.query_one("#model-select").value = "scripted/snake"
        screen.query_one("#pathway").value = "history"
        await settle(pilot)
        await pilot.press("f6")
        await settle(pilot)  # the estimate is computed off the UI thread
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", [(120, 40), (80, 24)], ids=["120x40", "80x24"])
def test_run_dialog_with_its_estimate_snapshot(snap_compare, snapshot_app, size):
    assert snap_compare(snapshot_app(), terminal_size=size, run_before=run_dialog_open())
