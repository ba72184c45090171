"""Home screen: the new-session form, validation, launching play and runs, recent runs, help, theme."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, OptionList, Select

import s3gym_games as games
from s3gym_tui.app import S3GymApp
from s3gym_tui.providers import BUILTIN_MODELS
from s3gym_tui.screens.dialogs import EpisodePickerDialog
from s3gym_tui.screens.help import HelpScreen
from s3gym_tui.screens.home import HomeScreen
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.screens.run_dialog import RunDialog
from s3gym_tui.store import Store
from s3gym_tui.widgets.model_picker import ModelPicker
from tests.ui.settle import settle

pytestmark = pytest.mark.usefixtures("forked_child_runs")  # the app's run processes: tests/conftest.py


@pytest.fixture
def app(demo_db, settings):
    return S3GymApp(db_path=demo_db[0], settings=settings)


def count_episodes(path) -> int:
    with Store(path) as store:
        return len(store.episodes.list())


async def choose_game(pilot, name: str) -> None:
    game_list = pilot.app.screen.query_one("#game-list", OptionList)
    game_list.highlighted = [o.id for o in game_list.options].index(name)
    await pilot.pause()


async def test_home_lists_all_games_models_and_defaults(app):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        assert isinstance(screen, HomeScreen)
        game_list = screen.query_one("#game-list", OptionList)
        assert [o.id for o in game_list.options] == games.names()
        for option in game_list.options:
            if not option.disabled:
                assert games.game_class(option.id).description in str(option.prompt)
        model = screen.query_one(ModelPicker)
        assert model.model == "scripted/trust"  # settings.default_model, preselected
        select = screen.query_one("#model-select", Select)
        assert [value for _, value in select._options if value is not Select.NULL] == [m for m, _ in BUILTIN_MODELS]
        assert screen.query_one("#seed", Input).value == "0"
        assert screen.query_one("#pathway", Select).value == "none"
        assert screen.query_one("#source-run", Select).disabled


async def test_mode_switch_switches_the_default_seed(app):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        screen.query_one("#mode", Select).value = "eval"
        await pilot.pause()
        assert screen.query_one("#seed", Input).value == "1000000"
        screen.query_one("#mode", Select).value = "explore"
        await pilot.pause()
        assert screen.query_one("#seed", Input).value == "0"
        screen.query_one("#seed", Input).value = "17"  # a seed the person typed is kept
        screen.query_one("#mode", Select).value = "eval"
        await pilot.pause()
        assert screen.query_one("#seed", Input).value == "17"


@pytest.mark.parametrize("mode, seed, words", [("eval", "5", "exploration seed"),
                                               ("explore", "1000003", "evaluation seed"),
                                               ("explore", "abc", "whole number")])
async def test_invalid_seed_for_mode_gives_a_message_and_stores_nothing(app, demo_db, mode, seed, words):
    before = count_episodes(demo_db[0])
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        await choose_game(pilot, "trust")
        screen.query_one("#mode", Select).value = mode
        await pilot.pause()
        screen.query_one("#seed", Input).value = seed
        await pilot.press("f5")
        await pilot.pause()
        assert pilot.app.screen is screen  # nothing opened
        message = str(screen.query_one("#home-message").render())
        assert words in message
        assert screen.query_one("#home-message").has_class("error")
    assert count_episodes(demo_db[0]) == before


async def test_play_opens_a_play_screen_with_the_chosen_settings(app):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        await choose_game(pilot, "snake")
        screen.query_one("#model-input", Input).value = "scripted/snake"
        screen.query_one("#mode", Select).value = "eval"
        await pilot.pause()
        await pilot.click("#play")
        await pilot.pause()
        play = pilot.app.screen
        assert isinstance(play, PlayScreen)
        ep = play.episode
        assert (ep.game, ep.mode, ep.seed, ep.model, ep.pathway) == ("snake", "eval", 1_000_000, "scripted/snake", "none")
        await pilot.press("n")
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert len(play.steps) == 1


async def test_history_pathway_lists_runs_of_the_game_and_borrows_them(app, demo_db):
    _, ids = demo_db
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        await choose_game(pilot, "trust")
        screen.query_one("#pathway", Select).value = "history"
        await pilot.pause()
        runs = screen.query_one("#source-run", Select)
        assert not runs.disabled
        offered = {value for _, value in runs._options if value is not Select.NULL}
        assert offered == {ids["trust-history"], ids["trust-summary"]}  # not the snake run
        assert runs.value == ids["trust-history"]  # a run of the same pathway is preferred
        await pilot.press("f5")
        await pilot.pause()
        play = pilot.app.screen
        assert isinstance(play, PlayScreen)
        assert play.episode.pathway == "history" and len(play.episode.history_episode_ids) == 6


async def test_start_protocol_run_starts_the_cli_run_and_opens_it(app, demo_db, monkeypatch):
    """Start in the run dialog: the run is `s3gym run …` in a process of its own (the dialog's every
    choice on its command line), stored with exactly the dialog's config, and Protocol opens on it."""
    opened = []
    monkeypatch.setattr(S3GymApp, "open_protocol", lambda self, run_id: opened.append(run_id))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        await choose_game(pilot, "snake")
        screen.query_one("#model-select", Select).value = "scripted/snake"
        screen.query_one("#pathway", Select).value = "summary"
        await pilot.pause()
        await pilot.press("f6")  # the run dialog first: nothing is created yet
        await pilot.pause()
        dialog = pilot.app.screen
        assert isinstance(dialog, RunDialog) and opened == []
        dialog.query_one("#run-explore_episodes", Input).value = "6"
        dialog.query_one("#run-max_tokens", Input).value = "300"
        dialog.query_one("#run-temperature", Input).value = "0.25"
        await pilot.pause()
        chosen = dialog.read_config()
        await pilot.press("ctrl+s")
        for _ in range(600):
            await pilot.pause(0.05)
            if opened:
                break
        assert len(opened) == 1
        (child,) = pilot.app.child_runs.children
        assert child.argv[3:5] == ["run", "snake"] and child.run_id == opened[0]
        assert child.log.exists() and "s3gym run snake" in child.log.read_text()
        child.process.wait(timeout=120)
        await pilot.pause(0.6)
        table = screen.query_one("#runs", DataTable)
        assert table.row_count == 4
    with Store(demo_db[0]) as store:
        run = store.runs.get_run(opened[0])
    assert run.config == chosen  # everything the dialog set, through the command line
    assert (run.config.game, run.config.model, run.config.pathway, run.status) == \
        ("snake", "scripted/snake", "summary", "finished")
    assert (run.config.explore_episodes, run.config.max_tokens, run.config.eval_every) == (6, 300, 3)


async def test_recent_runs_and_their_keys(app, demo_db, monkeypatch):
    _, ids = demo_db
    calls = []
    monkeypatch.setattr(S3GymApp, "open_protocol", lambda self, run_id: calls.append(("protocol", run_id)))
    monkeypatch.setattr(S3GymApp, "open_summaries", lambda self, run_id: calls.append(("summaries", run_id)))
    monkeypatch.setattr(S3GymApp, "open_report", lambda self, run_ids: calls.append(("report", run_ids)))
    monkeypatch.setattr(S3GymApp, "open_pairs", lambda self: calls.append(("pairs",)))
    monkeypatch.setattr(S3GymApp, "open_training", lambda self, run_id: calls.append(("training", run_id)))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        table = screen.query_one("#runs", DataTable)
        assert table.row_count == 3
        rows = {str(table.get_row_at(i)[0]): [str(c) for c in table.get_row_at(i)] for i in range(3)}  # cells are Text
        assert set(rows) == set(ids.values())
        assert rows[ids["snake-summary"]][1:5] == ["snake", "scripted/snake", "summary", "finished"]
        table.focus()
        table.move_cursor(row=table.get_row_index(ids["trust-history"]))
        await pilot.pause()
        await pilot.press("o", "m", "g", "c", "t", "enter")
        run_id = ids["trust-history"]
        assert calls == [("protocol", run_id), ("summaries", run_id), ("report", [run_id]), ("pairs",),
                         ("training", run_id), ("protocol", run_id)]


async def test_episodes_key_opens_a_stored_episode_read_only(app, demo_db):
    _, ids = demo_db
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        table = screen.query_one("#runs", DataTable)
        table.focus()
        table.move_cursor(row=table.get_row_index(ids["snake-summary"]))
        await pilot.press("e")
        await pilot.pause()
        dialog = pilot.app.screen
        assert isinstance(dialog, EpisodePickerDialog)
        options = dialog.query_one("#episode-list", OptionList)
        assert options.option_count > 3
        await pilot.press("enter")
        await pilot.pause()
        play = pilot.app.screen
        assert isinstance(play, PlayScreen) and play.readonly
        assert play.episode.run_id == ids["snake-summary"]


async def test_help_lists_the_keys_of_every_screen(app):
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("question_mark")
        await pilot.pause()
        screen = pilot.app.screen
        assert isinstance(screen, HelpScreen)
        from s3gym_tui.screens.help import help_text

        text = help_text(pilot.app)
        for binding in PlayScreen.BINDINGS + HomeScreen.BINDINGS:
            if binding.description:
                assert binding.description in text
        assert "Take over" in text and "over-confidence" in text and "Hint Messages" in text
        await settle(pilot)  # the text is made off the UI thread
        shown = screen.query_one("#help-text").text  # the screen shows the same content
        assert "Take over" in shown and "over-confidence" in shown and "Hint Messages" in shown
        await pilot.press("escape")
        assert isinstance(pilot.app.screen, HomeScreen)


async def test_help_shows_remapped_keys(demo_db, settings):
    app = S3GymApp(db_path=demo_db[0], settings=settings.model_copy(update={"keymap": {"step": "j"}}))
    async with app.run_test(size=(120, 40)) as pilot:
        from s3gym_tui.screens.help import help_text

        assert "  j  Step  (step)" in help_text(pilot.app)
        pilot.app.open_play(game="trust", mode="explore", seed=0, model="scripted/trust")
        await pilot.pause()
        await pilot.press("j")  # the remapped key steps
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        assert len(pilot.app.screen.steps) == 1


async def test_theme_toggle(app):
    async with app.run_test(size=(120, 40)) as pilot:
        assert pilot.app.theme == "textual-dark"
        await pilot.press("ctrl+t")
        assert pilot.app.theme == "textual-light"
        await pilot.press("ctrl+t")
        assert pilot.app.theme == "textual-dark"


async def test_home_works_at_80x24(app):
    async with app.run_test(size=(80, 24)) as pilot:
        screen = pilot.app.screen
        for selector in ("#game-list", "#mode", "#seed", "#model", "#pathway", "#play", "#start-run", "#runs"):
            region = screen.query_one(selector).region
            assert region.width > 0 and region.height > 0, selector
            assert region.right <= 80 and region.bottom <= 24, selector
        await choose_game(pilot, "trust")
        await pilot.press("f5")
        await pilot.pause()
        assert isinstance(pilot.app.screen, PlayScreen)


async def test_command_palette_offers_home_commands(app, monkeypatch):
    opened = []
    monkeypatch.setattr(S3GymApp, "open_pairs", lambda self: opened.append("pairs"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.press("ctrl+p")
        await pilot.pause()
        await pilot.press(*"compare pairs")
        for _ in range(20):
            await pilot.pause()
        await pilot.press("enter")
        for _ in range(5):
            await pilot.pause()
        assert opened == ["pairs"]


async def test_help_defines_every_metric(app):
    from s3gym_tui.engine.glossary import METRICS
    from s3gym_tui.screens.help import help_text

    async with app.run_test(size=(120, 40)) as pilot:
        text = help_text(pilot.app)
        for name in ("Avg", "Max", "AUC+", "NABA", "NMAE", "agreement", "over", "under", "corr(A, g)"):
            assert f"  {name}: {METRICS[name]}" in text
        assert "— = not defined" in text


async def test_run_details_show_an_undefined_naba_as_undefined(tmp_path, settings):
    """A run stopped after its x = 0 checkpoint: Home's details say AUC+ and NABA are — and why."""
    from tests.engine.helpers import hand_run

    path = tmp_path / "partial.db"
    with Store(path) as store:
        hand_run(store, "trust-history-partial", [[(2, 1)]], {0: [[(1, 1)]]}, {0: [2.0]}, pathway="history",
                 explore_episodes=3, status="stopped")
        hand_run(store, "trust-summary-full", [[(1, 1)]] * 3, {0: [[(1, 0)]], 3: [[(2, 2)]]},
                 {0: [2.0], 3: [4.0]}, pathway="summary")
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        table = screen.query_one("#runs", DataTable)
        table.focus()
        table.move_cursor(row=table.get_row_index("trust-history-partial"))
        await pilot.pause()
        details = str(screen.query_one("#run-details").content)
        assert "x=0   2.00" in details
        assert "AUC+ — · NABA — (1 of 2 checkpoints scored; AUC+, NABA: one checkpoint)" in details
        table.move_cursor(row=table.get_row_index("trust-summary-full"))
        await pilot.pause()
        assert "AUC+ 3.00 · NABA 1.50 (2 of 2 checkpoints scored)" in str(screen.query_one("#run-details").content)
