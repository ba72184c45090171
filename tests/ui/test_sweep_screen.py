"""The Sweeps screen follows a sweep that another process (here: a thread with its own store
connection and event loop) drives: progress appears without a key press, then the finished state."""

from __future__ import annotations

import asyncio
import threading

from s3gym_tui.app import S3GymApp
from s3gym_tui.engine.sweep import SweepRunner
from s3gym_tui.models import SweepConfig
from s3gym_tui.screens.protocol import ProtocolScreen
from s3gym_tui.screens.sweep import SweepScreen
from s3gym_tui.store import Store


def _cell(table, row: int, column: str) -> str:
    value = table.get_cell_at((row, [c.key.value for c in table.columns.values()].index(column)))
    return str(getattr(value, "plain", value))


async def _until(pilot, condition, timeout: float = 120.0) -> None:
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not condition():
        assert loop.time() < deadline, "the screen never showed it"
        await pilot.pause(0.1)


async def test_the_sweep_view_follows_a_headless_sweep_live(tmp_path, settings):
    path = tmp_path / "s.db"
    config = SweepConfig(games=("trust",), pathways=("none", "summary"), models=("scripted",),
                         settings={"explore_episodes": 4, "eval_every": 2, "eval_episodes": 1})
    with Store(path) as store:
        sweep, runs = store.sweeps.create_sweep(config)
    go = threading.Event()
    errors: list[BaseException] = []

    def headless() -> None:
        go.wait()
        try:
            with Store(path) as own:
                asyncio.run(SweepRunner(own, own.sweeps.get_sweep(sweep.id), backoff_base_s=0).run())
        except BaseException as exc:  # noqa: BLE001 - reported by the test
            errors.append(exc)

    worker = threading.Thread(target=headless, daemon=True)
    worker.start()
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(140, 36)) as pilot:
        await pilot.pause()
        await pilot.press("w")  # Home -> Sweeps
        await _until(pilot, lambda: isinstance(app.screen, SweepScreen) and app.screen.reads >= 1)
        screen = app.screen
        table = screen.query_one("#sweep-runs")
        assert table.row_count == 2 and screen.sweep_id == sweep.id
        assert {_cell(table, r, "status") for r in range(2)} == {"created"}
        assert _cell(table, 0, "episodes").endswith(f"0/{4 + 3 * 1}")
        go.set()  # the headless sweep starts now; the screen is not touched again
        await _until(pilot, lambda: any(p.status == "running" or p.episodes_done for p in screen.progress))
        await _until(pilot, lambda: screen.progress and all(p.status == "finished" for p in screen.progress)
                     and "finished" in str(screen.query_one("#sweep-status").content))
        worker.join(timeout=60)
        assert not errors
        assert {_cell(table, r, "status") for r in range(2)} == {"finished"}
        assert all(_cell(table, r, "episodes").endswith("7/7") for r in range(2))
        assert all(_cell(table, r, "checkpoints") == "3/3" for r in range(2))
        assert "runs 2/2" in str(screen.query_one("#sweep-status").content)
        with Store(path) as store:
            assert store.sweeps.get_sweep(sweep.id).status == "finished"
        table.focus()
        await pilot.press("o")  # a run's protocol view, watching (not driving) it
        await _until(pilot, lambda: isinstance(app.screen, ProtocolScreen))
        assert app.screen.run_id in {r.id for r in runs} and not app.screen.running
