"""Snapshots of the demo's path at 80x24, 120x40 and 200x50 on a demo database built by `s3gym demo`
(tests/ui/demo_tour_data.py: fixed ids and times): the tour, Report opened at its Delta NABA table, and
Compare at the first divergence of the top History-better pair with the cited lines highlighted. Each SVG
was looked at before it was accepted."""

from __future__ import annotations

import pytest

from s3gym_tui.app import S3GymApp
from s3gym_tui.engine.compare import best_pairs
from s3gym_tui.store import Store
from tests.ui.demo_tour_data import tour_db, tour_template  # noqa: F401 - fixtures
from tests.ui.settle import settle, until

SIZES = ((80, 24), (120, 40), (200, 50))


async def tour(pilot) -> None:
    await pilot.press("d")
    await settle(pilot)


async def report_at_delta(pilot) -> None:
    await tour(pilot)
    await pilot.press("1")
    await settle(pilot)
    await until(pilot, lambda: pilot.app.screen.at is None, what="the report in place")


async def compare_at_divergence(pilot) -> None:
    with Store(pilot.app.db_path) as store:
        pair = best_pairs(store, limit=1, winner="history")[0]
    pilot.app.open_compare(pair.history_episode, pair.summary_episode, at_divergence=True)
    await settle(pilot)


STEPS = {"tour": tour, "report_at_delta": report_at_delta, "compare_at_divergence": compare_at_divergence}
CASES = [(name, size) for name in STEPS for size in SIZES]


def open_with(action):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await action(pilot)
        await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("name,size", CASES, ids=[f"{n}-{w}x{h}" for n, (w, h) in CASES])
def test_the_demo_path_at_three_sizes(snap_compare, tour_db, settings, name, size):
    app = S3GymApp(db_path=tour_db, settings=settings)
    assert snap_compare(app, terminal_size=size, run_before=open_with(STEPS[name]))
