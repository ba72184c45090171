"""Snapshots of the credit view at 80x24, 120x40 and 200x50: one episode opened from its replay with `w`
at the step a person steered (its aligned PI and evidence links below), both sides from Compare, and an
episode whose credit was never computed. On the deterministic analysis database plus tests/ui/credit_data.py.
Each SVG was looked at before it was accepted."""

from __future__ import annotations

import pytest

from s3gym_tui.app import S3GymApp
from s3gym_tui.store import Store
from tests.ui.analysis_data import DIVERGING_HISTORY, DIVERGING_SUMMARY, analysis_template  # noqa: F401
from tests.ui.credit_data import STEP_WITH_EVIDENCE, add_group_credit
from tests.ui.settle import settle
from tests.ui.test_snapshots_sizes import SIZES, deterministic, open_with, sizes_db  # noqa: F401


def _with_credit(pilot) -> None:
    with Store(pilot.app.db_path) as store:
        add_group_credit(store)


async def from_replay(pilot) -> None:
    _with_credit(pilot)
    pilot.app.open_episode(DIVERGING_HISTORY, at_step=STEP_WITH_EVIDENCE)
    await settle(pilot)
    await pilot.press("w")


async def from_compare(pilot) -> None:
    _with_credit(pilot)
    pilot.app.open_compare(DIVERGING_HISTORY, DIVERGING_SUMMARY)
    await settle(pilot)
    await pilot.press("g", "w")  # the first divergence, then both sides' credit


async def not_computed(pilot) -> None:
    _with_credit(pilot)
    pilot.app.open_credit(["trust-history-demo-c000-e0"])


SCREENS = {"credit": from_replay, "credit_compare": from_compare, "credit_missing": not_computed}
CASES = [(screen, size) for screen in SCREENS for size in SIZES]


@pytest.mark.parametrize("screen,size", CASES, ids=[f"{s}-{w}x{h}" for s, (w, h) in CASES])
def test_credit_view_at_three_sizes(snap_compare, sizes_db, settings, screen, size):
    app = S3GymApp(db_path=sizes_db, settings=settings)
    assert snap_compare(app, terminal_size=size, run_before=open_with(SCREENS[screen]))
