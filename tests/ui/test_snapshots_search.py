"""Snapshots of Search (80x24, 120x40, 200x50) and of annotated steps (replay, Compare) on the
deterministic analysis database, with one annotation of fixed time."""

from __future__ import annotations

import sqlite3

import pytest

from s3gym_tui.app import S3GymApp
from s3gym_tui.screens.compare import CompareScreen
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.screens.search import SearchScreen
from s3gym_tui.store import Store
from tests.ui.analysis_data import (DIVERGE_AT, DIVERGING_HISTORY, DIVERGING_SUMMARY, FIXED_TIME,  # noqa: F401
                                    analysis_db, analysis_template)
from tests.ui.settle import settle

QUERY = "opponent cheat phase:eval"


@pytest.fixture
def marked_db(analysis_db):
    with Store(analysis_db) as store:
        store.annotations.add_annotation("step", "mistake", author="human:tester", episode_id=DIVERGING_HISTORY,
                                         step_index=DIVERGE_AT, note="a person steered it into the opponent's grudge",
                                         correction="collaborate")
        store.annotations.add_annotation("step", "insight", author="human:tester", episode_id=DIVERGING_SUMMARY,
                                         step_index=DIVERGE_AT, note="kept cooperating")
    conn = sqlite3.connect(analysis_db)
    conn.execute("UPDATE annotations SET created_at = ?", (FIXED_TIME,))
    conn.execute("UPDATE steps SET latency_ms = 10")  # measured when the database was built: not fixed
    conn.commit()
    conn.close()
    return analysis_db


def _snap(snap_compare, path, settings, size, run) -> bool:
    app = S3GymApp(db_path=path, settings=settings)

    async def run_before(pilot) -> None:
        await settle(pilot)
        await run(pilot)
        await settle(pilot)

    return snap_compare(app, terminal_size=size, run_before=run_before)


async def _search(pilot) -> None:
    await pilot.press("slash")
    await pilot.pause()
    assert isinstance(pilot.app.screen, SearchScreen)
    pilot.app.screen.query_one("#search-input").value = QUERY
    await pilot.press("enter")
    await settle(pilot)
    await pilot.press("down")


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)], ids=["80x24", "120x40", "200x50"])
def test_search(snap_compare, marked_db, settings, size):
    assert _snap(snap_compare, marked_db, settings, size, _search)


SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)], ids=["80x24", "120x40", "200x50"])


@SIZES
def test_annotated_step_in_replay(snap_compare, marked_db, settings, size):
    async def run(pilot) -> None:
        pilot.app.open_episode(DIVERGING_HISTORY, at_step=DIVERGE_AT)
        await settle(pilot)
        assert isinstance(pilot.app.screen, PlayScreen)

    assert _snap(snap_compare, marked_db, settings, size, run)


@SIZES
def test_annotated_steps_in_compare(snap_compare, marked_db, settings, size):
    async def run(pilot) -> None:
        pilot.app.open_compare(DIVERGING_HISTORY, DIVERGING_SUMMARY)
        await settle(pilot)
        assert isinstance(pilot.app.screen, CompareScreen)
        await pilot.press("g")

    assert _snap(snap_compare, marked_db, settings, size, run)
