"""Compare screen (two episodes stepped together) and the History-vs-Summary pairs list."""

from __future__ import annotations

from rich.console import Console
from textual.widgets import DataTable

from s3gym_tui.app import S3GymApp
from s3gym_tui.engine.compare import best_pairs, cumulative_rewards, state_at
from s3gym_tui.engine.glossary import VERDICT_MARKS
from s3gym_tui.engine.judging import verdict
from s3gym_tui.screens.analysis_common import fmt_score
from s3gym_tui.screens.compare import DIVERGENCE_STYLE, CompareScreen
from s3gym_tui.screens.pairs import PairsScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.board import BoardPanel
from s3gym_tui.widgets.checkpoint_plot import CurvePlot
from s3gym_tui.widgets.compare_side import CompareSide
from tests.ui.analysis_data import (DIVERGE_AT, DIVERGING_HISTORY, DIVERGING_SUMMARY,  # noqa: F401
                                    analysis_db, analysis_template)


def plain(renderable) -> str:
    console = Console(width=100, record=True, color_system=None)
    console.print(renderable)
    return console.export_text()


def board_text(screen, side_id: str) -> str:
    """What the side's board shows: the rendering of the game state it was given."""
    side = screen.query_one(side_id, CompareSide)
    return plain(side.game.render())


async def open_compare(app, pilot, a, b) -> CompareScreen:
    app.open_compare(a, b)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, CompareScreen)
    return screen


async def test_aligned_rows_and_the_first_divergence(analysis_db, settings):
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        store = app.store
        steps_a, steps_b = store.episodes.steps(DIVERGING_HISTORY), store.episodes.steps(DIVERGING_SUMMARY)
        screen = await open_compare(app, pilot, DIVERGING_HISTORY, DIVERGING_SUMMARY)
        table = screen.query_one("#cmp-table", DataTable)
        assert table.row_count == max(len(steps_a), len(steps_b)) + 1  # + the final-score row
        for i, (a, b) in enumerate(zip(steps_a, steps_b)):
            row = [str(c) for c in table.get_row_at(i)]
            assert row[:9] == [str(i + 1), a.action, fmt_score(a.self_score), fmt_score(a.reward),
                               VERDICT_MARKS[verdict(a.self_score, a.reward)],
                               b.action, fmt_score(b.self_score), fmt_score(b.reward),
                               VERDICT_MARKS[verdict(b.self_score, b.reward)]]
            assert (row[9] == "") == (a.action == b.action)
        assert screen.divergence == DIVERGE_AT
        # the first divergent row is highlighted, and only it
        for i in range(len(steps_a)):
            styles = {str(c.style) for c in table.get_row_at(i)}
            assert (DIVERGENCE_STYLE in styles) == (i == DIVERGE_AT)
        assert str(table.get_row_at(DIVERGE_AT)[9]) == "◆"
        assert f"first divergence at step {DIVERGE_AT + 1}" in str(screen.query_one("#cmp-status").content)
        assert screen.position == 0
        await pilot.press("g")
        await pilot.pause()
        assert screen.position == DIVERGE_AT and table.cursor_row == DIVERGE_AT
        assert "◀ here" in str(screen.query_one("#cmp-status").content)
        # both cumulative reward curves are plotted
        curves = screen.query_one(CurvePlot).curves
        assert [c.label for c in curves] == ["A: history", "B: summary"]
        assert [y for _, y in curves[0].points[1:]] == cumulative_rewards(steps_a)
        assert [y for _, y in curves[1].points[1:]] == cumulative_rewards(steps_b)


async def test_stepping_moves_both_boards_together(analysis_db, settings):
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        store = app.store
        ep_a, ep_b = store.episodes.get_episode(DIVERGING_HISTORY), store.episodes.get_episode(DIVERGING_SUMMARY)
        steps_a, steps_b = store.episodes.steps(ep_a.id), store.episodes.steps(ep_b.id)
        screen = await open_compare(app, pilot, ep_a.id, ep_b.id)

        def check(k: int) -> None:
            assert screen.position == k
            a, b = screen.query_one("#cmp-a", CompareSide), screen.query_one("#cmp-b", CompareSide)
            assert a.game.observation() == state_at(ep_a, steps_a, k).observation()
            assert b.game.observation() == state_at(ep_b, steps_b, k).observation()
            caption = f"before step {k + 1}" if k < len(steps_a) else f"final · after {len(steps_a)} steps"
            assert a.query_one(BoardPanel).border_subtitle == caption
            assert board_text(screen, "#cmp-a") == plain(state_at(ep_a, steps_a, k).render())
            assert board_text(screen, "#cmp-b") == plain(state_at(ep_b, steps_b, k).render())
            if k < len(steps_a):
                side_a = str(screen.query_one("#cmp-a").query_one(".side-step").content)
                side_b = str(screen.query_one("#cmp-b").query_one(".side-step").content)
                assert side_a.startswith(f"Step {k + 1}: {steps_a[k].action}")
                assert side_b.startswith(f"Step {k + 1}: {steps_b[k].action}")

        check(0)
        before = board_text(screen, "#cmp-a"), board_text(screen, "#cmp-b")
        await pilot.press("n")
        check(1)
        assert (board_text(screen, "#cmp-a"), board_text(screen, "#cmp-b")) != before  # both moved
        await pilot.press("right", "right")
        check(3)
        await pilot.press("left")
        check(2)
        await pilot.press("p")
        check(1)
        await pilot.press("end")
        check(len(steps_a))
        assert "Episode over" in str(screen.query_one("#cmp-a").query_one(".side-step").content)
        await pilot.press("n")  # past the end: stays
        check(len(steps_a))
        await pilot.press("home")
        check(0)
        await pilot.press("down", "down")  # moving in the aligned table moves the boards too
        await pilot.pause()
        check(2)


async def test_each_side_shows_what_its_agent_had_in_context(analysis_db, settings):
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        summary_id = app.store.episodes.get_episode(DIVERGING_SUMMARY).summary_id
        tips = app.store.summaries.get_summary(summary_id).as_tips()
        screen = await open_compare(app, pilot, DIVERGING_HISTORY, DIVERGING_SUMMARY)
        a, b = screen.query_one("#cmp-a"), screen.query_one("#cmp-b")
        assert a.query_one(".side-context").border_title == "Context: raw history (Hint Messages)"
        assert b.query_one(".side-context").border_title == "Context: summary tips (Hint Messages)"
        history = str(a.query_one(".side-context-text").content)
        assert history.count("--- Previous episode") == 3 and "LLM: Answer:" in history
        assert tips in str(b.query_one(".side-context-text").content)


async def test_identical_episodes_have_no_divergence(analysis_db, settings):
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_compare(app, pilot, "trust-history-demo-c000-e0", "trust-summary-demo-c000-e0")
        assert screen.divergence is None
        await pilot.press("g")
        await pilot.pause()
        assert screen.position == 0
        assert any("no divergence" in n.message for n in app._notifications)


async def test_a_missing_episode_is_a_message_not_a_crash(analysis_db, settings):
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_compare(app, pilot, DIVERGING_HISTORY, "no-such-episode")
        assert any("no-such-episode" in n.message for n in app._notifications)
        await pilot.press("n", "g", "end")
        assert screen.query_one("#cmp-b").border_title == "B: missing"


# ----- pairs ------------------------------------------------------------------------------------
async def open_pairs(app, pilot) -> PairsScreen:
    app.open_pairs()
    await pilot.pause()
    await app.workers.wait_for_complete()
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, PairsScreen)
    return screen


def table_rows(screen) -> list[list[str]]:
    table = screen.query_one("#pairs-table", DataTable)
    return [[str(c) for c in table.get_row_at(i)] for i in range(table.row_count)]


async def test_pairs_lists_the_demo_pairs_sorted_by_difference_and_opens_compare(demo_db, settings):
    path, ids = demo_db
    with Store(path) as store:
        expected = best_pairs(store, limit=None)
    # trust history vs trust summary share seeds and checkpoints: 2 seeds x 3 checkpoints
    assert len(expected) == 6
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_pairs(app, pilot)
        rows = table_rows(screen)
        assert len(rows) == len(expected)
        for row, pair in zip(rows, expected):
            assert row[:4] == [pair.game, pair.model, str(pair.seed), str(pair.x)]
            assert row[7] == pair.winner
        diffs = [abs(float(r[6])) for r in rows]
        assert diffs == sorted(diffs, reverse=True)
        await pilot.press("down", "enter")
        await pilot.pause()
        compare = app.screen
        assert isinstance(compare, CompareScreen)
        assert compare.episode_ids == (expected[1].history_episode, expected[1].summary_episode)
        assert {ids["trust-history"], ids["trust-summary"]} == {
            app.store.episodes.get_episode(e).run_id for e in compare.episode_ids}


async def test_pairs_put_the_largest_difference_first_and_filter_by_winner_and_game(analysis_db, settings):
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_pairs(app, pilot)
        rows = table_rows(screen)
        assert len(rows) == 4
        first = screen.pairs[0]
        assert (first.history_episode, first.summary_episode) == (DIVERGING_HISTORY, DIVERGING_SUMMARY)
        assert first.diff != 0 and rows[0][7] == first.winner
        winner = first.winner
        presses = {"history": 1, "summary": 2}[winner]
        for _ in range(presses):
            await pilot.press("f")
            await pilot.pause()
            await app.workers.wait_for_complete()
            await pilot.pause()
        assert screen.winner == winner
        assert [p.winner for p in screen.pairs] == [winner]
        other = "history" if winner == "summary" else "summary"
        screen.query_one("#pairs-winner-select").value = other  # the other side won nowhere
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.winner == other
        assert screen.pairs == [] and "No pairs" in str(screen.query_one("#pairs-status").content)
        screen.query_one("#pairs-winner-select").value = "all"
        screen.query_one("#pairs-game-select").value = "snake"
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert screen.game == "snake" and screen.pairs == []
        screen.query_one("#pairs-game-select").value = "trust"
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert len(screen.pairs) == 4
        screen.query_one("#pairs-table").focus()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(app.screen, CompareScreen)
        assert app.screen.divergence == DIVERGE_AT


async def test_compare_commands_are_in_the_command_palette(analysis_db, settings):
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_compare(app, pilot, DIVERGING_HISTORY, DIVERGING_SUMMARY)
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"first divergence")
        await app.workers.wait_for_complete()  # the palette searches in a worker of its own
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert app.screen is screen
        assert screen.position == DIVERGE_AT
