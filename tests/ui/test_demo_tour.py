"""The demo in the app: Home's entry (a line and d), the guided tour whose stops open their screens in place,
and Compare's highlighting of what a reply cites at the first divergence of the top pair."""

from __future__ import annotations

import re

import pytest

from s3gym_tui.app import S3GymApp
from s3gym_tui.engine.compare import best_pairs, first_divergence
from s3gym_games.prompt import format_score
from s3gym_tui.models import explore_episode_id
from s3gym_tui.store import Store
from tests.ui.demo_tour_data import tour_db, tour_template  # noqa: F401 - fixtures
from tests.ui.settle import settle, until

pytestmark = pytest.mark.usefixtures("forked_child_runs")  # the app's run processes: tests/conftest.py


@pytest.fixture
def demo_home(monkeypatch, tmp_path):
    """Where Home's d looks for the demo database (not the user's data directory)."""
    path = tmp_path / "elsewhere" / "s3gym-demo.db"
    monkeypatch.setattr("s3gym_tui.engine.demo.default_demo_path", lambda: path)
    return path


def top_pair(path):
    with Store(path) as store:
        pair = best_pairs(store, limit=1, winner="history")[0]
        h = store.episodes.steps(pair.history_episode, include_prompt=False)
        s = store.episodes.steps(pair.summary_episode, include_prompt=False)
        return pair, first_divergence(h, s), h, s


async def test_home_shows_the_newcomer_a_line_and_d_offers_to_build_the_demo(tmp_path, settings, demo_home):
    from s3gym_tui.screens.dialogs import ConfirmDialog

    app = S3GymApp(db_path=tmp_path / "mine.db", settings=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        assert "New here? d: the 10-minute demo" in str(app.screen.query_one("#new-session").border_subtitle)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog)
        assert "Build the demo database?" in app.screen.question and str(demo_home) in app.screen.question
        await pilot.press("escape")
        await settle(pilot)
        assert not demo_home.exists() and app.db_path == tmp_path / "mine.db"


async def test_d_refuses_a_file_at_the_demo_path_that_is_not_a_demo(tmp_path, settings, demo_home):
    demo_home.parent.mkdir(parents=True)
    demo_home.write_text("my notes")
    app = S3GymApp(db_path=tmp_path / "mine.db", settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        assert any("is not a demo database" in n.message for n in app._notifications)
        assert demo_home.read_text() == "my notes"


async def test_d_switches_to_a_ready_demo_database_and_opens_its_tour(tmp_path, settings, tour_db, monkeypatch):
    from s3gym_tui.screens.dialogs import ConfirmDialog
    from s3gym_tui.screens.home import HomeScreen
    from s3gym_tui.screens.tour import TourScreen

    monkeypatch.setattr("s3gym_tui.engine.demo.default_demo_path", lambda: tour_db)
    mine = tmp_path / "mine.db"
    app = S3GymApp(db_path=mine, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        assert isinstance(app.screen, ConfirmDialog) and "Open the demo database?" in app.screen.question
        await pilot.press("y")
        await until(pilot, lambda: isinstance(app.screen, TourScreen), what="the tour")
        await settle(pilot)
        assert app.db_path == tour_db
        assert [type(s) for s in app.screen_stack[1:]] == [HomeScreen, TourScreen]
        assert app.screen.tour is not None and len(app.screen.tour.stops) == 4
        assert "This is the demo database" in str(app.screen_stack[1].query_one("#new-session").border_subtitle)


async def test_the_tour_opens_each_stop_in_place(tour_db, settings):
    from s3gym_tui.screens.compare import CompareScreen
    from s3gym_tui.screens.pairs import PairsScreen
    from s3gym_tui.screens.report import ReportScreen
    from s3gym_tui.screens.summaries import SummariesScreen
    from s3gym_tui.screens.tour import TourScreen

    pair, k, _, _ = top_pair(tour_db)
    with Store(tour_db) as store:
        used = store.episodes.get_episode(pair.summary_episode).summary_id
    app = S3GymApp(db_path=tour_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        tour = app.screen
        assert isinstance(tour, TourScreen)
        assert [s.screen for s in tour.tour.stops] == ["report", "pairs", "compare", "summaries"]

        await pilot.press("1")
        await settle(pilot)
        report = app.screen
        assert isinstance(report, ReportScreen)
        await until(pilot, lambda: report.at is None, what="the report in place")
        assert app.focused is report.query_one("#report-delta-table")
        body, title = report.query_one("#report-body"), report.query_one("#report-delta-title")
        assert body.scroll_y == pytest.approx(title.virtual_region.y) and body.scroll_y > 0
        await pilot.press("escape")
        await settle(pilot)

        await pilot.press("2")
        await settle(pilot)
        assert isinstance(app.screen, PairsScreen) and app.screen.winner == "history"
        assert app.screen.selected_pair() == pair  # the largest gap History won, first
        await pilot.press("escape")
        await settle(pilot)

        await pilot.press("3")
        await settle(pilot)
        assert isinstance(app.screen, CompareScreen)
        assert app.screen.episode_ids == (pair.history_episode, pair.summary_episode)
        assert app.screen.position == k == app.screen.divergence
        await pilot.press("escape")
        await settle(pilot)

        await pilot.press("4")
        await settle(pilot)
        assert isinstance(app.screen, SummariesScreen) and app.screen.run_id == pair.summary_run
        assert app.screen.selected_id == used
        table = app.screen.query_one("#sum-versions")
        assert table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value == used
        await pilot.press("escape")
        await settle(pilot)
        assert app.screen is tour and tour.visited == {"1", "2", "3", "4"}


@pytest.mark.parametrize("size", [(80, 24), (120, 40)])
async def test_compare_highlights_what_each_reply_cites_at_the_first_divergence(tour_db, settings, size):
    from s3gym_tui.widgets.compare_side import CompareSide

    pair, k, h_steps, s_steps = top_pair(tour_db)
    history_reply, summary_reply = h_steps[k].reply, s_steps[k].reply
    cited_steps = [(int(n), int(s)) for n, s in re.findall(r"Previous episode (\d+), step (\d+)", history_reply)]
    assert cited_steps, "the History agent cites the steps it used"
    summary_rule = re.search(r"summary rule (\[[^\]]*\] [^:]+):", summary_reply).group(1)
    history_rule = re.search(r"History (\[[^\]]*\] [^:]+):", history_reply).group(1)
    app = S3GymApp(db_path=tour_db, settings=settings)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        app.open_compare(pair.history_episode, pair.summary_episode, at_divergence=True)
        await settle(pilot)
        a, b = app.screen.query_one("#cmp-a", CompareSide), app.screen.query_one("#cmp-b", CompareSide)
        # A: every cited step of an earlier episode, as the store has it: its observation and its answer line
        with Store(tour_db) as store:
            for episode_no, step_no in cited_steps:
                step = store.episodes.steps(explore_episode_id(pair.history_run, episode_no - 1))[step_no - 1]
                assert f"LLM: Answer: {step.action}, Score: {format_score(step.self_score)}" in a.highlighted
                assert all(line in a.highlighted for line in step.observation.split("\n")[1:] if line.strip())
        assert sum(line.startswith("LLM: ") for line in a.highlighted) == len(set(cited_steps))
        # B: the summary rule its reply cites, and nothing else
        assert b.highlighted and all(" ".join(line.split()).startswith(summary_rule + ":") for line in b.highlighted)
        # B says its summary lacks the rule A used
        step_b = b.query_one(".side-step").content.plain
        assert "not in this summary" in " ".join(step_b.split())
        assert history_rule.split("]")[0] in " ".join(step_b.split())
        # the first highlighted line of each side is scrolled into view
        for side in (a, b):
            scroll = side.query_one(".side-context")
            row = side.focus_row()
            assert row is not None and scroll.scroll_y <= row < scroll.scroll_y + scroll.size.height


async def test_d_builds_the_demo_database_as_its_own_process_then_switches_to_it(tmp_path, settings, demo_home,
                                                                                 monkeypatch):
    """The whole newcomer path from another database: d, Build, `s3gym demo` runs as a process of its own
    (the test-only small schedule, inherited), its progress shown, then the app is on the demo's tour."""
    import json

    from s3gym_tui.engine import demo
    from s3gym_tui.screens.demo import DemoBuildDialog
    from s3gym_tui.screens.tour import TourScreen

    monkeypatch.setenv(demo.SCHEDULE_ENV, json.dumps({"games": ["trust"], "explore_episodes": 1, "eval_every": 1,
                                                      "eval_episodes": 1, "step_cap": 3, "contrast": None}))
    mine = tmp_path / "mine.db"
    app = S3GymApp(db_path=mine, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("d")
        await settle(pilot)
        await pilot.press("y")
        dialog = await until(pilot, lambda: isinstance(app.screen, DemoBuildDialog) and app.screen, what="the build")
        await until(pilot, lambda: not dialog.is_attached or "PID" in dialog.query_one("#demo-log").content.plain,
                    timeout=120, what="the build followed")
        await until(pilot, lambda: isinstance(app.screen, TourScreen), timeout=300, what="the tour")
        await settle(pilot)
        assert app.db_path == demo_home and demo.mark_of_file(demo_home).status == "ready"
        assert app.screen.tour is not None and app.screen.tour.stops[0].run_ids
        assert mine.exists()  # the database the app was on is still there, untouched
