"""Snapshots of Play on every game at 80x24, 120x40 and 200x50 (scripted model, a few steps in):
the board complete at every size (at 80x24 the board first, the panels giving way)."""

from __future__ import annotations

import pytest

import s3gym_games as games
from tests.ui.test_snapshots_play import settle, snapshot_app, snapshot_db_template  # noqa: F401 - fixtures

SIZES = ((80, 24), (120, 40), (200, 50))
STEPS = {"pvz": 25}  # PvZ after zombies have piled up; the others after two steps


def steps_then(game: str, n: int):
    async def run_before(pilot) -> None:
        pilot.app.open_play(game=game, mode="explore", seed=0, model=f"scripted/{game}")
        await pilot.pause()
        for _ in range(n):
            await pilot.press("n")
            await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


@pytest.mark.parametrize("size", SIZES, ids=lambda s: f"{s[0]}x{s[1]}")
@pytest.mark.parametrize("game", games.names())
def test_play_board_snapshot(snap_compare, snapshot_app, game, size):
    assert snap_compare(snapshot_app(default_model=f"scripted/{game}"), terminal_size=size,
                        run_before=steps_then(game, STEPS.get(game, 2)))
