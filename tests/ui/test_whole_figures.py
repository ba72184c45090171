"""Whole figures, visible keys, true answers (issue 36): what a person meets in the first hour of the app.

Each test drives the real app at the size where the defect was seen (120x40 unless said)."""

from __future__ import annotations

import pytest
from textual.geometry import Region

from s3gym_tui.app import S3GymApp
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.widgets.key_hints import KeyHints
from tests.ui.settle import settle


@pytest.fixture
def app(demo_db, settings):
    return S3GymApp(db_path=demo_db[0], settings=settings.model_copy(update={"default_model": "scripted/chess"}))


async def open_play(pilot, **options) -> PlayScreen:
    pilot.app.open_play(**options)
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, PlayScreen)
    return screen


CHESS = dict(game="chess", mode="explore", seed=0, model="scripted/chess")
TWO_PIECES = "N:(6,6), P:(4,6)"  # 2 of the 12 pieces of chess seed 0 predicted right: reward 2/12


def drawn(widget) -> list[str]:
    """The lines of `widget` as they are drawn (its overflow, ellipsis and wrapping applied)."""
    return [strip.text for strip in widget.render_lines(Region(0, 0, *widget.outer_size))]


# ----- a chess proposal: its keys on the line and in the footer ---------------------------------------


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (200, 50)])
async def test_a_chess_proposal_keeps_its_keys_on_the_line_and_in_the_footer(app, size):
    async with app.run_test(size=size) as pilot:
        screen = await open_play(pilot, **CHESS)
        await pilot.press("p", "n")
        await settle(pilot)
        assert screen.proposal is not None and len(screen.proposal.action) > 100  # all twelve pieces
        bar = screen.query_one("#proposal")
        line = bar.text
        assert len(line) <= bar.region.width
        assert (screen.proposal.action in line) == (size[0] >= 200)  # whole where there is room, else cut
        assert line.rstrip().endswith("a  Accept  e  Edit  v  Veto"), line
        assert f"self-score {screen.proposal.parsed.self_score:g}" in line
        hints = screen.query_one(KeyHints).plain
        for key, label in (("a", "Accept"), ("e", "Edit"), ("v", "Veto")):
            assert f" {key} {label} " in hints, hints
        await pilot.press("a")
        await settle(pilot)
        assert screen.proposal is None and len(screen.steps) == 1
        hints = screen.query_one(KeyHints).plain
        assert " a Accept " not in hints and " v Veto " not in hints  # only while a proposal waits


@pytest.mark.parametrize("width", [30, 45, 60, 80, 120, 200])
@pytest.mark.parametrize("score", [1.0, 0.1666667, -12.5, None])
def test_the_proposal_line_cuts_the_action_never_the_score_or_the_keys(width, score):
    from s3gym_tui.widgets.proposal_bar import proposal_line

    action = "N:(6,6), P:(4,6), R:(10,5), W:(13,3), a:(6,9), c:(7,3), f:(5,6), h:(8,11), l:(7,2)"
    text, spans = proposal_line(action, score, width)
    line = text.plain
    shown = "?" if score is None else f"{score:g}"
    assert f" {shown}  " in line and line.rstrip().endswith("v  Veto")
    assert [choice for *_, choice in spans] == ["accept", "edit", "veto"]
    assert all(line[start:end].strip().split()[-1] in ("Accept", "Edit", "Veto") for start, end, _ in spans)
    if width >= 80:
        assert len(line) <= width
        assert "Model proposes" in line or "Proposes" in line
    if len(line) <= width and action not in line:
        assert "…" in line  # the action gave way, and says so


# ----- the fork dialog: whole labels, tab order, enter forks -----------------------------------------


async def open_fork_dialog(pilot, demo_db) -> "ForkDialog":
    from s3gym_tui.screens.dialogs import ForkDialog

    _, ids = demo_db
    source = next(e.id for e in pilot.app.store.episodes.list(ids["trust-history"]) if e.phase == "explore")
    pilot.app.open_episode(source)
    await pilot.pause()
    await pilot.press("right", "right", "f")
    await settle(pilot)
    dialog = pilot.app.screen
    assert isinstance(dialog, ForkDialog)
    return dialog


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (200, 50)])
async def test_the_fork_dialog_labels_are_whole(app, demo_db, size):
    from textual.widgets import Label

    async with app.run_test(size=size) as pilot:
        dialog = await open_fork_dialog(pilot, demo_db)
        labels = [label for label in dialog.query(Label) if "dialog-title" not in label.classes]
        assert {str(label.render()) for label in labels} == {"Model", "Pathway", "Experience"}
        for label in labels:  # each on one line, as wide as its words
            assert label.region.width >= len(str(label.render())), (str(label.render()), label.region)


async def test_the_fork_dialog_tab_order_reaches_every_control_and_enter_forks(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        dialog = await open_fork_dialog(pilot, demo_db)
        order = [dialog.focused.id]
        for _ in range(6):
            await pilot.press("tab")
            order.append(dialog.focused.id)
        assert order == ["model-select", "model-input", "model-settings", "fork-pathway", "fork-experience",
                         "fork", "cancel"]
        for _ in range(4):  # tab wraps round to the model's fields, then on to the pathway
            await pilot.press("tab")
        assert dialog.focused.id == "fork-pathway"
        await pilot.press("tab")
        assert dialog.focused.id == "fork-experience"
        await pilot.press("enter")  # the form is complete: enter forks (it closed the dialog without)
        await settle(pilot)
        screen = pilot.app.screen
        assert isinstance(screen, PlayScreen) and screen.episode.fork_of is not None
        assert screen.episode.fork_step == 2


async def test_enter_in_the_fork_dialog_does_what_its_control_says(app, demo_db):
    from textual.widgets import Select

    from s3gym_tui.screens.dialogs import ForkDialog

    async with app.run_test(size=(120, 40)) as pilot:
        dialog = await open_fork_dialog(pilot, demo_db)
        dialog.query_one("#fork-experience", Select).focus()
        await pilot.press("space")  # opens the list; enter in it picks an entry, the dialog stays
        await pilot.pause()
        assert dialog.query_one("#fork-experience", Select).expanded
        await pilot.press("down", "enter")
        await pilot.pause()
        assert pilot.app.screen is dialog and dialog.query_one("#fork-experience", Select).value == "none"
        dialog.query_one("#cancel").focus()
        await pilot.press("enter")  # a button presses itself: Cancel cancels
        await pilot.pause()
        assert isinstance(pilot.app.screen, PlayScreen) and pilot.app.screen.readonly
        await pilot.press("f")
        await settle(pilot)
        dialog = pilot.app.screen
        assert isinstance(dialog, ForkDialog)
        field = dialog.query_one("#model-input")
        field.focus()
        await pilot.press(*"scripted/snake", "enter")  # enter in the model field: checked first (not trust)
        await pilot.pause()
        assert pilot.app.screen is dialog
        assert dialog.query_one("#fork-error").display and "✗" in str(dialog.query_one("#fork-error").render())
        field.value = ""  # (typing cleared the list's choice: no model now)
        await pilot.press("enter")
        await pilot.pause()
        assert pilot.app.screen is dialog and "Choose a model" in str(dialog.query_one("#fork-error").render())
        await pilot.press(*"scripted/trust", "enter")  # a complete form: enter forks
        await settle(pilot)
        screen = pilot.app.screen
        assert isinstance(screen, PlayScreen) and screen.episode.fork_of is not None
        assert screen.episode.model == "scripted/trust"


# ----- numbers are never cut ---------------------------------------------------------------------------


async def test_a_chess_reward_and_the_call_figures_are_whole_at_120x40(app):
    from s3gym_tui.widgets.steps_table import StepsTable

    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_play(pilot, **CHESS)
        await pilot.press("t")
        await pilot.pause()
        await pilot.press(*TWO_PIECES, "enter")  # a person's partial prediction
        await settle(pilot)
        await pilot.press("n")  # and a model step (a call with figures)
        await settle(pilot)
        assert [round(s.reward, 6) for s in screen.steps] == [0.166667, 1.0]
        table = screen.query_one(StepsTable)
        row = drawn(table)[3]  # the border, the header, the start, step 0
        assert " 0.166667 " in row and TWO_PIECES in row, row
        agent = screen.query_one("#agent")
        for selector in ("#agent-usage", "#agent-totals"):
            widget = agent.query_one(selector)
            lines = [line.rstrip() for line in drawn(widget)]
            assert not any(line.endswith("…") for line in lines), lines
            assert " · ".join(lines) == widget.text  # every figure whole, a line break between two
            assert widget.region.right <= agent.region.right
        assert "ms" in agent.query_one("#agent-usage").text and "$" in agent.query_one("#agent-totals").text


@pytest.mark.parametrize("size", [(120, 40), (80, 24), (200, 50)])
@pytest.mark.parametrize("game", ["chess", "trust"])
async def test_the_boards_subtitle_keeps_its_figures_whole(app, size, game):
    async with app.run_test(size=size) as pilot:
        screen = await open_play(pilot, game=game, mode="explore", seed=0, model=f"scripted/{game}")
        await pilot.press("r")  # the scripted player runs the episode to its end
        await settle(pilot)
        assert screen.session.done
        board = screen.query_one("#board")
        subtitle = str(board.border_subtitle)
        assert len(subtitle) <= board.region.width - 6, (subtitle, board.region)  # nothing for Textual to cut
        final = f"final score {screen.session.game.score():g}"
        assert final in subtitle and f"step {screen.session.game.steps}/" in subtitle, subtitle


@pytest.mark.parametrize("width", [20, 30, 40, 60, 100])
def test_fit_subtitle_cuts_the_action_then_leaves_figures_out_whole(width):
    from s3gym_tui.widgets.episode_view import fit_subtitle

    figures = [(4, "explore"), (3, "seed 1000000"), (0, "step 10/10"), (1, "final score 0.166667"),
               (2, "after step 9")]
    line = fit_subtitle(figures, "N:(6,6), P:(4,6), R:(10,5)…", width)
    assert len(line) <= width or line == "step 10/10"
    parts = line.split(" · ")
    for part in parts:
        assert part in [text for _, text in figures] or part.startswith("after step 9: N:")
    assert "step 10/10" in parts
    if width >= 40:
        assert "final score 0.166667" in parts
    if width >= 60:
        assert any(part.startswith("after step 9") for part in parts)


def test_a_step_table_widens_its_figure_columns_and_the_action_gives_way():
    from s3gym_tui.models import Step
    from s3gym_tui.widgets.steps_table import StepsTable

    table = StepsTable()
    narrow = dict(table._columns(60))
    step = Step(episode_id="e", index=1234, observation="", prompt="", reply="", action="x", valid=True,
                feedback="", self_score=-0.0833333, reward=0.166667, terminated=False, truncated=False)
    assert table._fit_figures([step])
    wide = {column.key: width for column, width in table._columns(60)}
    assert wide["index"] == 4 and wide["s"] == len("-0.0833333") and wide["r"] == len("0.166667")
    assert sum(wide.values()) == sum(narrow.values())  # the action gave the room
    assert not table._fit_figures([step])  # nothing wider: no repaint of every row


# ----- the command palette finds every screen a key opens ----------------------------------------------


async def palette_hits(pilot, query: str) -> list[str]:
    from textual.command import CommandList

    await pilot.press("ctrl+p")
    await pilot.pause(0.2)
    await pilot.press(*query)
    for _ in range(100):  # the palette searches in the background
        await pilot.pause(0.05)
        prompts = [str(option.prompt).split("\n")[0] for option in pilot.app.screen.query_one(CommandList).options]
        if prompts and "No matches" not in prompts[0] and "Searching" not in prompts[0]:
            break
    return prompts


@pytest.mark.parametrize("field", ["#game-list", "#seed", "#model-input"])
async def test_the_palette_finds_pairs_wherever_the_focus_is(app, field):
    from s3gym_tui.screens.pairs import PairsScreen

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        pilot.app.screen.query_one(field).focus()  # a text field takes the key c for typing
        await pilot.pause()
        assert "Compare pairs" in await palette_hits(pilot, "pairs")
        await pilot.press("enter")
        await settle(pilot)
        assert isinstance(pilot.app.screen, PairsScreen)


async def test_every_screen_a_home_key_opens_is_in_the_palette_while_typing(app):
    from s3gym_tui.screens.home import HomeScreen
    from s3gym_tui.widgets.commands import BindingCommands

    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        home = pilot.app.screen
        home.query_one("#seed").focus()
        await pilot.pause()
        names = {name for name, _help, _run in BindingCommands(home)._commands()}
        for binding in HomeScreen.BINDINGS + S3GymApp.BINDINGS:
            if binding.description:
                assert binding.description in names, binding.description


# ----- Play shows BEL and backspace as control pictures (the gate), never drops them -------------------


async def stored_step_with_controls(path) -> str:
    """A standalone Trust episode whose one step has BEL and backspace in its action (a person's edit),
    its reply and its prompt; returns the episode id."""
    import dataclasses

    from s3gym_tui.engine.llm import CallSettings
    from s3gym_tui.engine.play import new_play_session
    from s3gym_tui.store import Store

    with Store(path) as store:
        session = new_play_session(store, "trust", "explore", 5, CallSettings(model="scripted/trust"))
        proposal = await session.propose()
        messages = proposal.messages + [{"role": "user", "content": "prompt\x07bell and\x08back"}]
        call = dataclasses.replace(proposal.call, reply="reply\x07bell and\x08back\nAnswer: cheat, Score: 1")
        proposal = dataclasses.replace(proposal, messages=messages, call=call)
        session.commit(proposal, action="cheat\x07\x08", actor="human-edit")
        session.finish("stopped")
        return session.episode.id


@pytest.mark.parametrize("size", [(120, 40), (200, 50)])
async def test_play_shows_bel_and_backspace_as_control_pictures(app, demo_db, size):
    from s3gym_tui.widgets.agent_panel import AgentPanel

    episode_id = await stored_step_with_controls(demo_db[0])
    async with app.run_test(size=size) as pilot:
        pilot.app.open_episode(episode_id, at_step=0)
        await settle(pilot)
        screen = pilot.app.screen
        agent = screen.query_one(AgentPanel)
        action = agent.query_one("#agent-action").full.plain
        assert "cheat␇␈" in action, action  # the stored action, as a person typed it
        reply = agent.query_one("#agent-reply").text.plain
        assert "reply␇bell and␈back" in reply, reply
        assert "prompt␇bell and␈back" in agent.prompt_text.plain
        row = screen.query_one("#steps").render_line(2).text  # the header, the start, step 0
        assert "cheat␇␈" in row, row  # (the steps table always showed them: the same gate)


# ----- long search result lines stay in their result's column, inside the box ---------------------------


LONG_REPLY = "zebra," + ",".join(f"token{i:03d}" for i in range(60)) + " and " + "漢字" * 40


@pytest.mark.parametrize("size", [(80, 24), (120, 40), (200, 50)])
async def test_long_search_result_lines_wrap_inside_their_result(app, demo_db, size):
    import sqlite3

    path, ids = demo_db
    with sqlite3.connect(path) as conn:  # a long reply with long words and wide characters
        conn.execute("UPDATE steps SET reply = ? WHERE id = (SELECT MIN(id) FROM steps)", (LONG_REPLY,))
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await pilot.press("slash", *"zebra", "enter")
        await settle(pilot)
        screen = pilot.app.screen
        assert len(screen.hits) == 1
        results = screen.query_one("#search-results")
        lines = [line.rstrip() for line in drawn(results)]
        box = results.region.width
        inner = [line[1:-1].rstrip(" ▁▂▃▄▅▆▇█") for line in lines[1:-1]]  # inside the border, no scrollbar
        reply = [n for n, line in enumerate(inner) if "reply:" in line][0]
        body = [line for line in inner[reply + 1:] if line.strip()]
        assert len(body) >= 2, inner  # the reply wrapped
        for line in body:  # every wrapped line stays under the result's indent, inside the box
            assert line.startswith(" " * 7) and not line.startswith(" " * 8), line
        from rich.cells import cell_len

        assert all(cell_len(line) <= box for line in lines), lines
        step = [line for line in inner if "step " in line][0]
        assert " s " in step and " · r " in step and ("over" in step or "agree" in step), step  # figures first, whole
