"""Every screen fits the terminal it is in: a screen below the top one follows a resize (its size
classes and what it lays out by width), Play at 80x24 shows board and steps with its layout keys in
the footer, tables name the columns they leave out, long ids are shortened in the middle."""

from __future__ import annotations

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
        assert screen.has_class("-compact") and screen.has_class("-beside")
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
        assert screen.has_class("-compact") and not screen.has_class("-beside")
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
