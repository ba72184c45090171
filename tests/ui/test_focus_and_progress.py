"""Focus and pointer: hotkeys never land in an input the person did not focus on purpose, returning to
Home focuses a list, a click chooses and a double click (or enter) opens, one model field. Long calls:
the status bar shows the call's elapsed time, advancing, the tokens so far of a streamed reply and the
model's typical step time."""

from __future__ import annotations

import os
import time

import pytest
from textual.widgets import Input, OptionList, Select

from s3gym_tui.app import S3GymApp
from s3gym_tui.config import ModelSettings
from s3gym_tui.screens.home import HomeScreen
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.screens.protocol import ProtocolScreen
from s3gym_tui.widgets.model_picker import ModelPicker
from s3gym_tui.widgets.status_bar import StatusBar
from s3gym_tui.widgets.table import DataTable

from tests.fake_openai import FakeOpenAI
from tests.ui.settle import until


@pytest.fixture
def app(demo_db, settings):
    return S3GymApp(db_path=demo_db[0], settings=settings)


async def test_after_play_from_the_model_input_g_does_not_type_into_it(app, monkeypatch):
    reports = []
    monkeypatch.setattr(S3GymApp, "open_report", lambda self, run_ids: reports.append(run_ids))
    async with app.run_test(size=(120, 40)) as pilot:
        home = app.screen
        game_list = home.query_one("#game-list", OptionList)
        game_list.highlighted = [o.id for o in game_list.options].index("trust")
        model_input = home.query_one("#model-input", Input)
        model_input.focus()
        await pilot.press(*"scripted/trust")
        await pilot.press("f5")  # Play, started while the model input had the focus
        await until(pilot, lambda: isinstance(app.screen, PlayScreen))
        await pilot.pause()
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is home)
        await pilot.pause()
        assert app.focused is home.query_one("#game-list", OptionList)
        await pilot.press("g")  # Home's key (Report), not a letter in the model field
        await pilot.pause()
        assert model_input.value == "scripted/trust" and len(reports) == 1


async def test_returning_to_home_focuses_a_list(app, demo_db):
    _, ids = demo_db
    async with app.run_test(size=(120, 40)) as pilot:
        home = app.screen
        home.query_one("#seed", Input).focus()
        await pilot.pause()
        app.open_protocol(ids["trust-summary"])
        await until(pilot, lambda: isinstance(app.screen, ProtocolScreen))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is home)
        await pilot.pause()
        assert app.focused is home.query_one("#game-list", OptionList)
        table = home.query_one("#runs", DataTable)
        table.focus()  # a list the person was on stays focused
        app.open_protocol(ids["trust-summary"])
        await until(pilot, lambda: isinstance(app.screen, ProtocolScreen))
        await pilot.press("escape")
        await until(pilot, lambda: app.screen is home)
        await pilot.pause()
        assert app.focused is table


async def test_a_click_chooses_a_run_and_a_double_click_opens_it(app, demo_db, monkeypatch):
    opened = []
    monkeypatch.setattr(S3GymApp, "open_protocol", lambda self, run_id: opened.append(run_id))
    async with app.run_test(size=(120, 40)) as pilot:
        home = app.screen
        table = home.query_one("#runs", DataTable)
        second = table.coordinate_to_cell_key((1, 0))[0].value
        await pilot.click("#runs", offset=(3, 2))  # row 1 (the header is row 0 of the widget)
        await pilot.pause()
        assert table.cursor_row == 1 and opened == []
        await pilot.pause(0.6)  # a separate click later, on the highlighted row: still only chosen
        await pilot.click("#runs", offset=(3, 2))
        await pilot.pause()
        assert opened == []
        await pilot.pause(0.6)
        await pilot.click("#runs", offset=(3, 2), times=2)
        await pilot.pause()
        assert opened == [second]
        table.focus()
        await pilot.press("enter")
        await pilot.pause()
        assert opened == [second, second]


async def test_a_click_chooses_a_game_and_a_double_click_plays_it(app):
    async with app.run_test(size=(120, 40)) as pilot:
        home = app.screen
        games_list = home.query_one("#game-list", OptionList)
        await pilot.click("#game-list", offset=(4, 2))
        await pilot.pause()
        chosen = games_list.highlighted
        assert isinstance(app.screen, HomeScreen) and chosen is not None
        game = games_list.get_option_at_index(chosen).id
        home.query_one(ModelPicker).set_model(f"scripted/{game}")  # a model that can play it
        await pilot.pause(0.6)
        await pilot.click("#game-list", offset=(4, 2))
        await pilot.pause()
        assert isinstance(app.screen, HomeScreen)
        await pilot.pause(0.6)
        await pilot.click("#game-list", offset=(4, 2), times=2)
        await until(pilot, lambda: isinstance(app.screen, PlayScreen))
        assert app.screen.episode.game == game


async def test_one_model_field(app):
    async with app.run_test(size=(120, 40)) as pilot:
        picker = app.screen.query_one(ModelPicker)
        select = picker.query_one("#model-select", Select)
        typed = picker.query_one("#model-input", Input)
        select.value = "scripted/snake"
        await pilot.pause()
        assert (picker.model, typed.value) == ("scripted/snake", "")
        typed.focus()
        await pilot.press(*"openai/gpt-4.1")
        await pilot.pause()
        assert picker.model == "openai/gpt-4.1" and select.value is Select.NULL  # not two models shown
        select.value = "scripted/trust"
        await pilot.pause()
        assert (picker.model, typed.value) == ("scripted/trust", "")


async def test_a_long_call_shows_its_elapsed_time_and_the_typical_step(tmp_path, settings):
    server = FakeOpenAI(delay_s=2.5).start()
    os.environ.setdefault("OPENAI_API_KEY", "sk-test-not-a-real-key-000")
    try:
        app = S3GymApp(db_path=tmp_path / "slow.db", settings=settings.with_model_settings(
            "openai/fake", ModelSettings(api_base=server.base_url)))
        async with app.run_test(size=(160, 40)) as pilot:
            await until(pilot, lambda: isinstance(app.screen, HomeScreen))
            await pilot.pause()
            app.open_play(game="trust", mode="explore", seed=0, model="openai/fake")
            play = await until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen)
            await pilot.pause()
            bar = play.query_one(StatusBar)
            line = lambda: str(play.query_one("#status-line").content)  # noqa: E731
            await pilot.press("n")
            await until(pilot, lambda: "is thinking… 1 s" in line(), what="1 s elapsed")
            assert "typical step" not in line()  # no stored step of this model yet: not made up
            assert "c or esc cancels" in line()
            await until(pilot, lambda: "is thinking… 2 s" in line(), what="the clock to advance")
            assert bar.elapsed_s is not None and bar.elapsed_s >= 2
            await until(pilot, lambda: len(play.steps) == 1, what="the step")
            assert "is thinking" not in line() and bar.elapsed_s is None
            latency = play.steps[0].latency_ms
            server.behave(delay_s=0.0, chunk_delay_s=0.8)  # the second reply comes a word at a time
            await pilot.press("n")
            await until(pilot, lambda: "is thinking… 1 s" in line(), what="the second call")
            assert f"typical step {latency / 1000:.1f} s (median of 1 stored step on trust)" in line()
            await until(pilot, lambda: "tokens so far (streamed)" in line(), what="the tokens so far")
            await pilot.press("c")  # cancel stays one key
            await until(pilot, lambda: "is thinking" not in line(), what="the cancel")
            assert len(play.steps) == 1
    finally:
        server.stop()
