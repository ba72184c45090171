"""Every screen fits the terminal it is in: a screen below the top one follows a resize (its size
classes and what it lays out by width), Play at 80x24 shows board and steps with its layout keys in
the footer, tables name the columns they leave out, long ids are shortened in the middle."""

from __future__ import annotations

from rich.text import Text
from textual.widgets import OptionList

from s3gym_tui.app import S3GymApp
from s3gym_tui.screens.compare import CompareScreen
from s3gym_tui.screens.home import HomeScreen
from tests.ui.analysis_data import (DIVERGING_HISTORY, DIVERGING_SUMMARY, analysis_db,  # noqa: F401
                                    analysis_template)
from tests.ui.settle import settle


async def test_home_follows_a_resize_made_while_another_screen_was_on_top(analysis_db, settings):
    """Seen: 80x24 -> 200x50 on Compare, and Home came back in its compact layout. Textual sends a
    resize only to the top screen and the one right under it; Compare opened from Pairs has two."""
    app = S3GymApp(db_path=analysis_db, settings=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        home = pilot.app.screen
        assert isinstance(home, HomeScreen) and home.has_class("-narrow") and home.has_class("-short")
        pilot.app.open_pairs()
        await settle(pilot)
        pilot.app.open_compare(DIVERGING_HISTORY, DIVERGING_SUMMARY)
        await settle(pilot)
        assert isinstance(pilot.app.screen, CompareScreen)
        await pilot.resize_terminal(200, 50)
        await settle(pilot)
        assert pilot.app.screen.has_class("-wide")
        for _ in range(2):
            await pilot.press("escape")
            await settle(pilot)
        assert pilot.app.screen is home
        assert home.has_class("-huge") and home.has_class("-tall")
        assert not home.has_class("-narrow") and not home.has_class("-short")
        game_list = home.query_one("#game-list", OptionList)
        assert " — " in str(game_list.options[0].prompt)  # the descriptions are back (wide layout)
        assert home.query_one("#run-details").display
        assert "created" in [str(c.label) for c in home.query_one("#runs").columns.values()]


def inside(region, width: int, height: int) -> bool:
    return region.width > 0 and region.height > 0 and region.right <= width and region.bottom <= height


async def open_play_steps(pilot, game: str, steps: int = 2):
    pilot.app.open_play(game=game, mode="explore", seed=0, model=f"scripted/{game}")
    await settle(pilot)
    for _ in range(steps):
        await pilot.press("n")
        await settle(pilot)
    from s3gym_tui.screens.play import PlayScreen

    assert isinstance(pilot.app.screen, PlayScreen)
    return pilot.app.screen


async def test_chess_at_80x24_shows_the_whole_board_beside_the_steps(demo_db, settings):
    """Seen: at 80x24 the chess board filled the screen, no steps, agent or footer keys for the layout."""
    from s3gym_tui.widgets.key_hints import KeyHints
    from s3gym_tui.widgets.steps_table import StepsTable

    app = S3GymApp(db_path=demo_db[0], settings=settings.model_copy(update={"default_model": "scripted/chess"}))
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_play_steps(pilot, "chess")
        board, steps = screen.query_one("#board"), screen.query_one("#steps")
        assert screen.has_class("-narrow", "-short", "-beside")  # the narrow-and-short layout, beside
        assert inside(board.region, 80, 24) and inside(steps.region, 80, 24)
        assert board.region.right <= steps.region.x  # side by side
        assert steps.region.width >= 36 and steps.region.height >= 10
        # the large board whole in width: its 15 columns (row label, 15 cells) are drawn, not cut
        assert any(line.rstrip().endswith(". .") or line.rstrip()[-1:] != "" for line in
                   [board.render_line(y).text for y in range(board.size.height)])
        assert board.scrollable_content_region.width >= 32  # 3 + 2 * 15 - 1 columns
        assert len(steps.steps) == 2 and steps.row_count == 3
        hints = screen.query_one(KeyHints).plain
        for key, word in (("b", "Board"), ("z", "Zoom"), ("i", "Agent")):
            assert f" {key} {word} " in hints, (key, hints)
        assert not screen.query_one("#agent").region  # the agent panel is one key away
        await pilot.press("i")
        await pilot.pause()
        agent = screen.query_one("#agent")
        assert screen.maximized is agent and agent.region.height >= 15
        assert inside(screen.query_one(KeyHints).region, 80, 24)  # the footer stays while zoomed
        await pilot.press("i")
        await pilot.pause()
        assert screen.maximized is None and not screen.query_one("#agent").region
        await pilot.press("z")
        await pilot.pause()
        assert screen.maximized is board and inside(screen.query_one(KeyHints).region, 80, 24)
        await pilot.press("escape")
        await pilot.pause()
        assert screen.maximized is None
        await pilot.press("b")  # the board off: its rows go to the steps and the agent, side by side
        await pilot.pause()
        assert not board.region and screen.query_one("#agent").region and steps.region.height >= 15
        await pilot.press("b")
        await pilot.pause()
        assert board.region and screen.query_one(StepsTable).region


async def test_trust_at_80x24_has_the_board_on_top_and_the_steps_under_it(demo_db, settings):
    app = S3GymApp(db_path=demo_db[0], settings=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_play_steps(pilot, "trust")
        board, steps = screen.query_one("#board"), screen.query_one("#steps")
        assert screen.has_class("-narrow", "-short") and not screen.has_class("-beside")
        assert board.region.bottom <= steps.region.y and steps.region.width >= 70
        assert board.virtual_size.height <= board.scrollable_content_region.height  # the board whole


async def test_layout_keys_are_shown_dimmed_while_a_person_types_an_action(demo_db, settings):
    """With the take-over field focused (t, on purpose), b and z are typed into it: the footer shows
    them unavailable (dimmed) instead of hiding them, and esc gives them back."""
    from s3gym_tui.widgets.key_hints import KeyHints

    app = S3GymApp(db_path=demo_db[0], settings=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_play_steps(pilot, "trust", 1)
        await pilot.press("t")
        await pilot.pause()
        await pilot.press("b", "z")
        await pilot.pause()
        assert screen.query_one("#takeover").value == "bz"
        assert screen.query_one("#board").display and screen.maximized is None
        hints = screen.query_one(KeyHints)
        spans = {key for _row, _start, _end, key in hints._spans}
        assert {"b", "z", "i"} <= spans
        text = hints.render()
        dim = {text.plain[s.start:s.end].strip() for s in text.spans if "dim" in str(s.style)}
        assert {"b", "z", "i"} <= dim
        await pilot.press("escape")
        await pilot.pause()
        await pilot.press("b")
        await pilot.pause()
        assert not screen.query_one("#board").display


GGUF = "hosted_vllm//home/teacher/models/Qwen2.5-7B-Instruct-GGUF/qwen2.5-7b-instruct-q4_k_m-00001-of-00002.gguf"


def add_gguf_run(path) -> str:
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import Store

    with Store(path) as store:
        store.runs.create_run(RunConfig(model=GGUF, game="chess", pathway="summary", explore_episodes=6),
                              run_id="chess-gguf-local")
    return "chess-gguf-local"


async def test_a_long_model_id_is_cut_in_the_middle_and_never_pushes_pathway_and_status_off(demo_db, settings):
    """Seen at 120x40: one served GGUF path widened the model column and pushed pathway and status off
    every row. Now it is shortened in the middle; the whole id is in the details (wide), the tooltip and
    under the table (narrow, where the details are hidden)."""
    from s3gym_tui.widgets.fit_table import FitTable

    run_id = add_gguf_run(demo_db[0])
    for size in ((120, 40), (80, 24), (200, 50)):
        app = S3GymApp(db_path=demo_db[0], settings=settings)
        async with app.run_test(size=size) as pilot:
            await settle(pilot)
            screen = pilot.app.screen
            table = screen.query_one("#runs", FitTable)
            table.move_cursor(row=table.get_row_index(run_id))
            await settle(pilot)
            assert {"id", "model", "pathway", "status"} <= set(table.shown_columns), size
            shown = str(table.get_cell(run_id, "model"))
            assert "…" in shown and shown.startswith("hosted_v") and shown.endswith(".gguf")
            assert str(table.full_cell(run_id, "model")) == GGUF
            assert sum(c.get_render_width(table) for c in table.columns.values()) <= \
                table.scrollable_content_region.width  # nothing runs off the right edge
            assert GGUF in str(table.tooltip)
            panel = screen.query_one("#runs-panel")
            if screen.query_one("#run-details").display:
                assert GGUF in str(screen.query_one("#run-details").render()).replace("\n", "")
            else:
                assert "model: hosted_vllm" in str(panel.border_subtitle)
            if table.dropped:
                assert f"not shown: {', '.join(table.dropped)}" in str(panel.border_subtitle)


async def test_report_at_80_columns_keeps_the_curve_metrics_and_names_what_it_leaves_out(demo_db, settings):
    """Seen: at 80x24 the curves table stopped at y0 (Avg, Max, AUC+, NABA invisible, nothing said)."""
    from s3gym_tui.widgets.fit_table import FitTable

    path, ids = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        pilot.app.open_report([ids["trust-history"], ids["trust-summary"]])
        await settle(pilot)
        screen = pilot.app.screen
        table = screen.query_one("#report-curve-table", FitTable)
        assert {"run", "pathway", "Avg", "Max", "AUC+", "NABA"} <= set(table.shown_columns)
        assert table.dropped  # 80 columns cannot hold all eleven
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= table.scrollable_content_region.width
        title = str(screen.query_one("#report-curve-title").render())
        assert "not shown at 80 columns: " + ", ".join(table.dropped) in title
        dropped_key = next(k for k in ("why —", "ckpts", "model", "game", "y0") if k not in table.shown_columns)
        assert table.get_cell(ids["trust-history"], dropped_key) is not None or dropped_key == "why —"
        await pilot.resize_terminal(200, 50)
        await settle(pilot)
        assert not table.dropped and "not shown" not in str(screen.query_one("#report-curve-title").render())


async def test_summaries_at_80_columns_keep_status_and_pin(demo_db, settings):
    from s3gym_tui.widgets.fit_table import FitTable

    path, ids = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        pilot.app.open_summaries(ids["trust-summary"])
        await settle(pilot)
        table = pilot.app.screen.query_one("#sum-versions", FitTable)
        assert {"v", "status", "pin"} <= set(table.shown_columns)
        assert sum(c.get_render_width(table) for c in table.columns.values()) <= table.scrollable_content_region.width
        if table.dropped:
            assert table.border_subtitle == f"not shown: {', '.join(table.dropped)}"
            assert table.note().startswith("not shown at 80 columns: ")


async def test_agent_panel_says_there_is_more_and_shows_it_all_zoomed(demo_db, settings):
    """Seen: action and feedback clipped to ~2 lines with no ellipsis, at every size."""
    from s3gym_tui.widgets.agent_panel import AgentPanel, ClampedText

    app = S3GymApp(db_path=demo_db[0], settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play_steps(pilot, "trust", 1)
        feedback = screen.query_one(AgentPanel).query_one("#agent-feedback", ClampedText)
        long = "Round 2: " + " ".join(f"word{i}" for i in range(120))
        feedback.set_text(Text(long))
        await pilot.pause()
        shown = str(feedback.render())
        assert "more line" in shown and "i shows all" in shown and shown.count("\n") < 3
        await pilot.press("i")
        await pilot.pause()
        assert feedback.size.height > 3 and "more line" not in str(feedback.render())
        assert "word119" in str(feedback.render())
