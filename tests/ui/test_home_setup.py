"""Home: a click chooses and enter plays, incompatible models are refused, the run dialog and its
estimate, found models in the picker, per-model settings, refresh from the store."""

from __future__ import annotations

import pytest
from textual.widgets import DataTable, Input, OptionList, Select

from tests.ui.settle import settle
from s3gym_tui.app import S3GymApp
from s3gym_tui.config import ModelSettings
from s3gym_tui.engine.discovery import FoundModel
from s3gym_tui.models import RunConfig
from s3gym_tui.screens.dialogs import ModelSettingsDialog
from s3gym_tui.screens.home import HomeScreen
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.screens.run_dialog import RunDialog
from s3gym_tui.store import Store
from s3gym_tui.widgets.model_picker import ModelPicker, ModelsFound
from tests.ui.test_home import choose_game, count_episodes


@pytest.fixture
def app(demo_db, settings):
    return S3GymApp(db_path=demo_db[0], settings=settings)




async def test_a_click_chooses_a_game_and_enter_plays_it(app, demo_db):
    before = count_episodes(demo_db[0])
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        game_list = screen.query_one("#game-list", OptionList)
        await pilot.click("#game-list", offset=(5, 5))  # on the Snake line (one line a game at 120x40)
        await pilot.pause()
        assert isinstance(pilot.app.screen, HomeScreen)  # chosen, not started
        assert screen.game == "snake" and game_list.has_focus
        screen.query_one("#model-select", Select).value = "scripted/snake"
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        assert isinstance(pilot.app.screen, PlayScreen) and pilot.app.screen.episode.game == "snake"
    assert count_episodes(demo_db[0]) == before + 1


async def test_a_scripted_model_of_another_game_is_refused_when_chosen(app, demo_db):
    before = count_episodes(demo_db[0])
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        await choose_game(pilot, "snake")
        screen.query_one("#model-select", Select).value = "scripted/pvz"
        await pilot.pause()
        message = str(screen.query_one("#home-message").render())
        assert "scripted/pvz plays pvz only" in message  # said as soon as it is chosen
        await pilot.press("f5")
        await pilot.press("f6")
        await pilot.pause()
        assert isinstance(pilot.app.screen, HomeScreen)  # neither play nor a run started
        await choose_game(pilot, "pvz")  # the right game: the message goes
        assert "plays pvz only" not in str(screen.query_one("#home-message").render())
    assert count_episodes(demo_db[0]) == before


async def test_run_dialog_shows_an_estimate_and_checks_its_fields(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        await choose_game(pilot, "trust")
        screen.query_one("#pathway", Select).value = "history"
        await pilot.pause()
        await pilot.press("f6")
        await settle(pilot)
        dialog = pilot.app.screen
        assert isinstance(dialog, RunDialog)
        for field in ("explore_episodes", "eval_every", "eval_episodes", "history_budget", "step_cap",
                      "max_tokens", "temperature", "api_base"):
            assert dialog.query_one(f"#run-{field}", Input)
        text = str(dialog.query_one("#run-estimate").render())
        assert "at most 630 model calls" in text and "input tokens" in text and "cost:" in text
        dialog.query_one("#run-explore_episodes", Input).value = "6"
        await settle(pilot)
        assert dialog.estimate.calls == 6 * 10 + 3 * 3 * 10
        from s3gym_tui.engine.sweep_plan import plan  # the dialog's figures are the sweep plan's for its run

        assert plan([dialog.estimate.config]).runs == (dialog.estimate,)
        assert "at most 150 model calls" in str(dialog.query_one("#run-estimate").render())
        dialog.query_one("#run-step_cap", Input).value = "99"
        await pilot.pause()
        assert "Step cap" in str(dialog.query_one("#run-error").render())
        await pilot.press("ctrl+s")  # refused while a field is wrong
        await pilot.pause()
        assert pilot.app.screen is dialog
        await pilot.press("escape")
        await pilot.pause()
        assert isinstance(pilot.app.screen, HomeScreen)
    with Store(demo_db[0]) as store:
        assert len(store.runs.list_runs()) == 3  # cancelled: no run created


async def test_run_dialog_starts_from_the_models_own_settings(demo_db, settings):
    own = ModelSettings(api_base="http://127.0.0.1:9/v1", max_tokens=777, timeout_s=42)
    app = S3GymApp(db_path=demo_db[0], settings=settings.with_model_settings("scripted/trust", own))
    async with app.run_test(size=(120, 40)) as pilot:
        await choose_game(pilot, "trust")
        await pilot.press("f6")
        await pilot.pause()
        dialog = pilot.app.screen
        assert dialog.query_one("#run-max_tokens", Input).value == "777"
        assert dialog.query_one("#run-api_base", Input).value == "http://127.0.0.1:9/v1"
        assert dialog.read_config().timeout_s == 42


async def test_found_models_join_the_picker_with_their_api_base(app):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        found = [FoundModel("ollama_chat/llama3.2", "Ollama on 127.0.0.1:11434", "http://127.0.0.1:11434"),
                 FoundModel("anthropic/claude-haiku-4-5", "ANTHROPIC_API_KEY is set")]
        screen.post_message(ModelsFound(found))
        await pilot.pause()
        select = screen.query_one("#model-select", Select)
        values = [v for _, v in select._options if v is not Select.NULL]
        assert "ollama_chat/llama3.2" in values and "anthropic/claude-haiku-4-5" in values
        assert values.index("ollama_chat/llama3.2") > values.index("scripted/trust")  # built-ins first
        assert screen.query_one(ModelPicker).model == "scripted/trust"  # the choice is kept
        select.value = "ollama_chat/llama3.2"
        await pilot.pause()
        assert pilot.app.settings.model_settings("ollama_chat/llama3.2").api_base == "http://127.0.0.1:11434"


async def test_model_settings_dialog_sets_the_session_and_saves(app, tmp_path, monkeypatch):
    config = tmp_path / "config.toml"
    config.write_text('# mine\ntheme = "dark"\n')
    monkeypatch.setenv("S3GYM_CONFIG", str(config))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        screen.query_one("#model-input", Input).value = "hosted_vllm/qwen"
        await pilot.pause()
        await pilot.click("#model-settings")
        await pilot.pause()
        dialog = pilot.app.screen
        assert isinstance(dialog, ModelSettingsDialog)
        dialog.query_one("#ms-api-base", Input).value = "http://127.0.0.1:8000/v1"
        dialog.query_one("#ms-max-tokens", Input).value = "0"
        await pilot.click("#ms-apply")
        await pilot.pause()
        assert pilot.app.screen is dialog and dialog.query_one("#ms-error").display  # 0 refused
        dialog.query_one("#ms-max-tokens", Input).value = "2048"
        dialog.query_one("#ms-timeout", Input).value = "600"
        await pilot.click("#ms-save")
        await pilot.pause()
        own = pilot.app.settings.model_settings("hosted_vllm/qwen")
        assert (own.api_base, own.max_tokens, own.timeout_s) == ("http://127.0.0.1:8000/v1", 2048, 600.0)
    text = config.read_text()
    assert "# mine" in text and '[models."hosted_vllm/qwen"]' in text and "max_tokens = 2048" in text


async def test_home_shows_a_run_made_elsewhere_when_it_comes_back(app, demo_db):
    async with app.run_test(size=(120, 40)) as pilot:
        table = pilot.app.screen.query_one("#runs", DataTable)
        assert table.row_count == 3
        pilot.app.open_play(game="trust", mode="explore", seed=0, model="scripted/trust")
        await pilot.pause()
        with Store(demo_db[0]) as other:  # another connection (another process, say) adds a run
            other.runs.create_run(RunConfig(model="scripted/trust", game="trust"), run_id="made-elsewhere")
        table.move_cursor(row=1)
        await pilot.press("escape")
        await pilot.pause()
        assert table.row_count == 4 and "made-elsewhere" in [str(table.get_row_at(i)[0]) for i in range(4)]


async def test_providers_with_keys_are_looked_up_once_the_picker_is_used(app, monkeypatch):
    for name in [n for n in __import__("os").environ if n.endswith("_API_KEY")]:
        monkeypatch.delenv(name)
    monkeypatch.setenv("ANTHROPIC_API_KEY", "canary-not-a-key")
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        await settle(pilot)
        select = screen.query_one("#model-select", Select)
        assert not any(str(v).startswith("anthropic/") for _, v in select._options)  # not at start
        select.focus()
        await settle(pilot)
        values = [str(v) for _, v in select._options]
        assert any(v.startswith("anthropic/") for v in values)
        assert all("canary" not in str(label) for label, _ in select._options)
