"""Play: each step shows its own board, feedback, prompt and reply (live, replay, forks); refused
take-over actions need a second confirmation; a model breaking the reply contract is flagged."""

from __future__ import annotations

import pytest

from s3gym_tui.app import S3GymApp
from s3gym_tui.engine.runner import explore_episode_id
from s3gym_tui.providers import fault
from s3gym_tui.screens.dialogs import TextInputDialog
from s3gym_tui.widgets.agent_panel import AgentPanel
from s3gym_tui.widgets.board import BoardPanel
from s3gym_tui.widgets.steps_table import StepsTable
from tests.ui.test_play import fork_at, open_play, settle, stored, trust


@pytest.fixture
def app(demo_db, settings):
    return S3GymApp(db_path=demo_db[0], settings=settings)


def feedback_line(screen) -> str:
    return str(screen.query_one(AgentPanel).query_one("#agent-feedback").render())


async def test_live_older_step_shows_its_own_board_and_feedback(app, demo_db):
    """The Nullify case: after the last step ('solved'), step 0 selected shows step 0's things."""
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, game="nullify", mode="explore", seed=0, model="scripted/nullify")
        await pilot.press("r")
        await settle(pilot)
        steps = screen.steps
        assert len(steps) >= 2 and screen.session.done
        last = steps[-1].feedback
        assert last in feedback_line(screen)
        board = screen.query_one(BoardPanel)
        final_subtitle = str(board.border_subtitle)
        table = screen.query_one(StepsTable)
        table.focus()
        await pilot.press("home")  # the start, then down to step 0
        await pilot.press("down")
        await pilot.pause()
        assert screen.position == 1 and not screen.following
        assert steps[0].feedback in feedback_line(screen) and "step 0" in feedback_line(screen)
        if steps[0].feedback != last:
            assert last not in feedback_line(screen)
        assert screen.query_one(AgentPanel).shown.action == steps[0].action
        assert "after step 0" in str(board.border_subtitle) and str(board.border_subtitle) != final_subtitle
        assert board.game.steps == 1  # the board after one step, not the final one
        await pilot.press("end")
        assert screen.following and board.game is screen.session.game


async def test_stepping_while_viewing_an_older_step_keeps_the_view(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("n", "n", "n")
        await settle(pilot)
        await pilot.press("left", "left")
        assert screen.position == 1 and not screen.following
        await pilot.press("n")
        await settle(pilot)
        assert len(screen.steps) == 4 and screen.position == 1  # stored, but the view stays
        assert screen.query_one(AgentPanel).shown.action == screen.steps[0].action
        assert "viewing step 0" in str(screen.query_one("#status-line").render())
        await pilot.press("right", "right", "right")
        assert screen.following and screen.query_one(AgentPanel).shown.title == "step 3"


async def test_fork_opens_on_the_last_copied_step(app, demo_db):
    path, ids = demo_db
    source = explore_episode_id(ids["trust-history"], 1)
    _, source_steps = stored(path, source)
    k = 3
    async with app.run_test(size=(120, 40)) as pilot:
        await fork_at(pilot, source, k)
        fork = pilot.app.screen
        agent = fork.query_one(AgentPanel)
        assert fork.position == k and agent.shown.title == f"step {k - 1}"
        assert agent.shown.action == source_steps[k - 1].action
        assert source_steps[k - 1].feedback in feedback_line(fork) and f"step {k - 1}" in feedback_line(fork)
        await pilot.press("home")  # the fork's start: nothing of step 2 shown
        assert agent.shown is None and "the start" in feedback_line(fork)


async def test_a_refused_take_over_action_needs_a_second_enter(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("t", *"defect", "enter")
        await pilot.pause()
        takeover = screen.query_one("#takeover")
        note = screen.query_one("#takeover-note")
        assert takeover.display and note.display
        assert "would refuse" in str(note.render()) and "Enter again" in str(note.render())
        assert stored(demo_db[0], screen.episode.id)[1] == []  # nothing spent yet
        await pilot.press("enter")  # confirmed: it costs the turn
        await settle(pilot)
        _, steps = stored(demo_db[0], screen.episode.id)
        assert len(steps) == 1 and steps[0].action == "defect" and not steps[0].valid
        assert not takeover.display


async def test_editing_a_refused_take_over_action_asks_again(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("t", *"defect", "enter")
        await pilot.pause()
        await pilot.press("backspace", "backspace", "backspace", "backspace", "backspace", "backspace",
                          *"cheat", "enter")  # a valid action plays at once
        await settle(pilot)
        _, steps = stored(demo_db[0], screen.episode.id)
        assert [(s.action, s.valid, s.actor) for s in steps] == [("cheat", True, "human")]


async def test_a_refused_edit_of_a_proposal_needs_a_second_enter(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("p", "n")
        await settle(pilot)
        await pilot.press("e")
        await pilot.pause()
        dialog = pilot.app.screen
        assert isinstance(dialog, TextInputDialog)
        dialog.query_one("#dialog-input").value = "betray"
        await pilot.press("enter")
        await pilot.pause()
        assert pilot.app.screen is dialog and dialog.query_one("#dialog-note").display
        await pilot.press("enter")
        await settle(pilot)
        _, steps = stored(demo_db[0], screen.episode.id)
        assert [(s.action, s.actor, s.valid) for s in steps] == [("betray", "human-edit", False)]


async def test_a_model_whose_replies_do_not_parse_is_flagged(app, demo_db, monkeypatch):
    monkeypatch.setattr(fault.SETTINGS, "faults", ("wrong_language",))
    try:
        async with app.run_test(size=(120, 40)) as pilot:
            screen = await open_play(pilot, game="trust", mode="explore", seed=0, model="fault/trust")
            warning = screen.query_one(AgentPanel).query_one("#agent-warning")
            await pilot.press("n", "n")
            await settle(pilot)
            assert not warning.has_class("-shown")  # two replies: too few to judge
            await pilot.press("n")
            await settle(pilot)
            assert warning.has_class("-shown") and warning.region.height >= 1
            text = str(warning.render())
            assert "3 of its last 3 replies did not parse" in text and "100%" in text
    finally:
        fault.reset()


async def test_chess_pages_the_large_board_and_zooms(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, game="chess", mode="explore", seed=0, model="scripted/chess")
        board = screen.query_one(BoardPanel)
        assert "large: t0" in str(board.border_title)
        await pilot.press("left_square_bracket", "left_square_bracket")
        assert "large: t-2" in str(board.border_title) and board.board_focus == 2
        await pilot.press("right_square_bracket")
        assert "large: t-1" in str(board.border_title)
        await pilot.press("z")
        assert screen.maximized is board and board.region.height > 30
        await pilot.press("escape")
        assert screen.maximized is None and pilot.app.screen is screen


async def test_the_proposal_line_replaces_the_status_line_and_its_labels_click(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **trust())
        body = screen.query_one("#play-body").region
        await pilot.press("p", "n")
        await settle(pilot)
        proposal = screen.query_one("#proposal")
        assert proposal.display and not screen.query_one("#status-row").display
        assert screen.query_one("#play-body").region == body  # nothing above it moved
        veto = proposal.text.index(" v ")
        await pilot.click("#proposal", offset=(veto + 1, 0))
        await pilot.pause()
        assert screen.proposal is None and not proposal.display and screen.query_one("#status-row").display
        assert screen.steps == []  # vetoed: nothing stored


async def test_the_board_gives_its_rows_away_on_b_at_80x24(app, demo_db):
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_play(pilot, game="chess", mode="explore", seed=0, model="scripted/chess")
        board = screen.query_one(BoardPanel)
        assert board.region.height >= 18  # the board first: the whole 15x15 t0 with coordinates
        await pilot.press("b")
        await pilot.pause()
        assert not board.display
        assert screen.query_one("#agent").region.height >= 15 and screen.query_one("#steps").region.height >= 15
        await pilot.press("b")
        await pilot.pause()
        assert board.display and board.region.height >= 18


async def test_notifications_never_cover_the_take_over_input_or_the_proposal(app, demo_db):
    from textual.widgets._toast import Toast

    async with app.run_test(size=(120, 40), notifications=True) as pilot:
        screen = await open_play(pilot, **trust())
        await pilot.press("p", "n")  # a proposal waits (and notifies)
        await settle(pilot)
        screen.notify("a long notification " * 8, title="Something happened")
        await pilot.pause()
        toasts = [t.region for t in screen.walk_children(Toast) if t.region.area]
        proposal = screen.query_one("#proposal").region
        assert toasts and all(not t.overlaps(proposal) for t in toasts)
        await pilot.press("t")
        await pilot.pause()
        screen.notify("another one " * 10)
        await pilot.pause()
        takeover = screen.query_one("#takeover").region
        toasts = [t.region for t in screen.walk_children(Toast) if t.region.area]
        assert takeover.area and all(not t.overlaps(takeover) for t in toasts)


async def test_a_fork_with_a_scripted_model_of_another_game_is_refused_in_the_dialog(app, demo_db):
    from textual.widgets import Input

    path, ids = demo_db
    source = explore_episode_id(ids["trust-history"], 1)
    async with app.run_test(size=(120, 40)) as pilot:
        pilot.app.open_episode(source)
        await pilot.pause()
        await pilot.press("right", "f")
        await pilot.pause()
        dialog = pilot.app.screen
        dialog.query_one("#model-input", Input).value = "scripted/snake"
        await pilot.click("#fork")
        await pilot.pause()
        assert pilot.app.screen is dialog  # refused, still choosing
        assert "scripted/snake plays snake only" in str(dialog.query_one("#fork-error").render())


async def test_shrinking_the_terminal_below_100_columns_gives_the_steps_table_its_share(app, demo_db):
    """Opened wide and shrunk to 80 columns, Play lays out as if opened at 80: the wide layout's
    board column must not stay and squeeze the steps table to a sliver."""
    async with app.run_test(size=(80, 24)) as pilot:
        screen = await open_play(pilot, game="trust", mode="explore", seed=0, model="scripted/trust")
        narrow_width = screen.query_one(StepsTable).region.width
        assert narrow_width >= 20
        await pilot.resize_terminal(200, 50)
        await settle(pilot)
        await pilot.resize_terminal(80, 24)
        await settle(pilot)
        assert screen.query_one(StepsTable).region.width == narrow_width
