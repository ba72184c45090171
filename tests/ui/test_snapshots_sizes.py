"""Snapshots of every screen at 80x24, 120x40 and 200x50 (Play of every game is in
test_snapshots_games.py). On the deterministic analysis database (tests/ui/analysis_data.py: fixed ids
and times), plus one run whose model is a long served GGUF path (Home shortens it in the middle) and
a person's Play episode on Trust. Each SVG was looked at before it was accepted."""

from __future__ import annotations

import sqlite3

import pytest

from s3gym_tui.app import S3GymApp
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store
from tests.ui.analysis_data import (DIVERGING_HISTORY, DIVERGING_SUMMARY, FIXED_TIME, HISTORY_RUN,  # noqa: F401
                                    SUMMARY_RUN, analysis_template)
from tests.ui.settle import settle

SIZES = ((80, 24), (120, 40), (200, 50))
GGUF = "hosted_vllm//home/teacher/models/Qwen2.5-7B-Instruct-GGUF/qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf"


@pytest.fixture
def sizes_db(analysis_template, tmp_path):
    import shutil

    path = tmp_path / "sizes.db"
    shutil.copy(analysis_template, path)
    with Store(path) as store:
        store.runs.create_run(RunConfig(model=GGUF, game="chess", pathway="summary", explore_episodes=6, eval_every=3,
                                        eval_episodes=2), run_id="chess-gguf-local")
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE runs SET created_at = ? WHERE id = 'chess-gguf-local'", (FIXED_TIME,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path


@pytest.fixture(autouse=True)
def deterministic(monkeypatch):
    """Play episode ids and call latencies (the parts that depend on random and the clock)."""
    import itertools
    import types

    counter = itertools.count(1)
    monkeypatch.setattr("s3gym_tui.engine.play.uuid",
                        types.SimpleNamespace(uuid4=lambda: types.SimpleNamespace(hex=f"{next(counter):010d}")))
    clock = itertools.count()
    monkeypatch.setattr("s3gym_tui.engine.llm.time",
                        types.SimpleNamespace(perf_counter=lambda: next(clock) * 0.012))


def open_with(action):
    async def run_before(pilot) -> None:
        await settle(pilot)
        await action(pilot)
        await settle(pilot)
        pilot.app.clear_notifications()
        await pilot.pause()

    return run_before


async def home(pilot) -> None:
    table = pilot.app.screen.query_one("#runs")
    table.move_cursor(row=table.get_row_index("chess-gguf-local"))


async def play(pilot) -> None:
    pilot.app.open_play(game="trust", mode="explore", seed=0, model="scripted/trust", pathway="history",
                        source_run_id=HISTORY_RUN)
    await settle(pilot)
    for key in ("n", "n", "n"):
        await pilot.press(key)
        await settle(pilot)


async def play_agent(pilot) -> None:
    await play(pilot)
    await pilot.press("i")


async def run_dialog(pilot) -> None:
    screen = pilot.app.screen
    game_list = screen.query_one("#game-list")
    game_list.highlighted = [o.id for o in game_list.options].index("trust")
    screen.query_one("#model-select").value = "scripted/trust"
    screen.query_one("#pathway").value = "summary"
    await settle(pilot)
    await pilot.press("f6")


async def help_(pilot) -> None:
    await pilot.press("question_mark")


SCREENS = {
    "home": home,
    "play": play,
    "play_agent": play_agent,
    "run_dialog": run_dialog,
    "help": help_,
    "protocol": lambda pilot: _open(pilot, pilot.app.open_protocol, SUMMARY_RUN),
    "summaries": lambda pilot: _open(pilot, pilot.app.open_summaries, SUMMARY_RUN),
    "compare": lambda pilot: _open(pilot, pilot.app.open_compare, DIVERGING_HISTORY, DIVERGING_SUMMARY),
    "pairs": lambda pilot: _open(pilot, pilot.app.open_pairs),
    "report": lambda pilot: _open(pilot, pilot.app.open_report, [HISTORY_RUN, SUMMARY_RUN]),
    "sweeps": lambda pilot: _open(pilot, pilot.app.open_sweeps),
    "training": lambda pilot: _open(pilot, pilot.app.open_training, SUMMARY_RUN),
}


async def _open(pilot, opener, *args) -> None:
    opener(*args)
    await settle(pilot)


# Report at 80x24 is left out: its checkpoint plot (textual-plotext, 11 rows) drew the y tick 18.88 in
# some runs and 18.75 in others (not understood yet); its layout at 80 columns is checked by
# tests/ui/test_sizes.py::test_report_at_80_columns_keeps_the_curve_metrics_and_names_what_it_leaves_out.
CASES = [(screen, size) for screen in SCREENS for size in SIZES]


@pytest.mark.parametrize("screen,size", CASES, ids=[f"{s}-{w}x{h}" for s, (w, h) in CASES])
def test_every_screen_at_three_sizes(snap_compare, sizes_db, settings, screen, size):
    app = S3GymApp(db_path=sizes_db, settings=settings)
    assert snap_compare(app, terminal_size=size, run_before=open_with(SCREENS[screen]))
