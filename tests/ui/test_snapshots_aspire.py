"""Snapshots of the ASPIRE screen at 80x24, 120x40 and 200x50: a whole run of the scripted operator (the
offline plan, through the real controller: adaptive, two memory candidates rolled back, the base kept and
submitted, hidden scores shown after the end), the fixture's final-only run (refused ⊘ and error ✗ calls,
an sft candidate rolled back, a grpo candidate final, a memory one retained), the fixture's interrupted
adaptive run (hidden scores "—" though stored), and the new-run dialog. Ids, times and clock-dependent
figures are fixed (tests/ui/aspire_data.py). Each SVG was looked at before it was accepted."""

from __future__ import annotations

import shutil

import pytest

from s3gym_tui.app import S3GymApp
from tests.ui.aspire_data import FINISHED, LIVE, build_aspire_db, build_scripted_aspire
from tests.ui.settle import settle

SIZES = ((80, 24), (120, 40), (200, 50))


@pytest.fixture(scope="session")
def aspire_snap_template(tmp_path_factory):
    path = tmp_path_factory.mktemp("aspire-snap") / "aspire.db"
    build_aspire_db(path)
    build_scripted_aspire(path)
    return path


@pytest.fixture
def aspire_snap_db(aspire_snap_template, tmp_path):
    path = tmp_path / "aspire.db"
    shutil.copy(aspire_snap_template, path)
    return path


async def _open(pilot, aspire_id=None, keys=()) -> None:
    await settle(pilot)
    pilot.app.open_aspire(aspire_id)
    await settle(pilot)
    for key in keys:
        await pilot.press(key)
        await settle(pilot)
    pilot.app.clear_notifications()
    await pilot.pause()


SCREENS = {
    "aspire": lambda pilot: _open(pilot),  # the newest: the scripted operator's run
    "aspire_marks": lambda pilot: _open(pilot, FINISHED),
    "aspire_hidden": lambda pilot: _open(pilot, LIVE),
    "aspire_dialog": lambda pilot: _open(pilot, keys=("n",)),
}
CASES = [(screen, size) for screen in SCREENS for size in SIZES]


@pytest.mark.parametrize("screen,size", CASES, ids=[f"{s}-{w}x{h}" for s, (w, h) in CASES])
def test_aspire_at_three_sizes(snap_compare, aspire_snap_db, settings, screen, size):
    app = S3GymApp(db_path=aspire_snap_db, settings=settings)
    assert snap_compare(app, terminal_size=size, run_before=SCREENS[screen])
