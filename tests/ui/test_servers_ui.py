"""Model servers in the app: the picker looks again when opened and lists a GGUF path by a short
name (the full id on focus); the run dialog fits max tokens and the history budget to the context
the server states and says so; decoding and model arguments per model."""

from __future__ import annotations

import pytest
from textual.widgets import Input, Select

from s3gym_tui.app import S3GymApp
from s3gym_tui.config import ModelSettings
from s3gym_tui.engine import discovery, servers
from s3gym_tui.engine.discovery import FoundModel
from s3gym_tui.screens.dialogs import ModelSettingsDialog
from s3gym_tui.screens.run_dialog import RunDialog
from s3gym_tui.store import Store
from s3gym_tui.widgets.model_picker import ModelPicker, short_name
from tests.fake_openai import FakeOpenAI
from tests.ui.settle import settle
from tests.ui.test_home import choose_game

pytestmark = pytest.mark.usefixtures("forked_child_runs")  # the app's run processes: tests/conftest.py

GGUF = "llamafile//home/me/models/SmolLM2-135M-Instruct.Q4_1.gguf"


@pytest.fixture
def app(demo_db, settings):
    return S3GymApp(db_path=demo_db[0], settings=settings)


@pytest.fixture(autouse=True)
def _fresh_descriptions():
    servers._CACHE.clear()
    yield
    servers._CACHE.clear()


def test_short_names():
    assert short_name(GGUF) == "llamafile/SmolLM2-135M-Instruct.Q4_1"
    assert short_name("openai/gpt-4.1") == "openai/gpt-4.1"
    long = "hosted_vllm/org/" + "x" * 80 + "-tail"
    shown = short_name(long)
    assert len(shown) == 44 and "…" in shown and shown.startswith("hosted_vllm/") and shown.endswith("-tail")


async def test_the_picker_looks_again_when_opened_and_lists_a_gguf_by_its_short_name(app, monkeypatch):
    calls = []

    def scan(named=()):  # no server at start; one is started while the app is open
        calls.append(1)
        return discovery.Scan([] if len(calls) == 1 else [FoundModel(GGUF, "llama.cpp server on 127.0.0.1:8080",
                                                                     "http://127.0.0.1:8080/v1")])

    monkeypatch.setattr(discovery, "scan", scan)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        await settle(pilot)
        select = screen.query_one("#model-select", Select)
        assert GGUF not in [v for _, v in select._options] and len(calls) == 1
        select.focus()
        await settle(pilot)
        assert len(calls) == 2
        labels = {v: str(label) for label, v in select._options}
        assert labels[GGUF].startswith("llamafile/SmolLM2-135M-Instruct.Q4_1  · llama.cpp server")
        assert "/home/me/models" not in labels[GGUF]
        select.value = GGUF
        await settle(pilot)
        assert screen.query_one(ModelPicker).model == GGUF  # the full id is what is used
        assert f"Model: {GGUF}" in str(screen.query_one("#home-message").render())
        assert str(select.tooltip) == GGUF


async def test_the_run_dialog_fits_the_run_to_the_servers_context_and_says_so(demo_db, settings, monkeypatch,
                                                                             tmp_path):
    opened = []
    monkeypatch.setattr(S3GymApp, "open_protocol", lambda self, run_id: opened.append(run_id))
    with FakeOpenAI(kind="llama.cpp", context=2048, reply="Answer: collaborate, Score: 1") as fake:
        # a secret model argument reaches the run's process through the config file it reads itself
        # (engine.detached.run_argv refuses to put it on a command line, and to start without it)
        config = tmp_path / "s3gym.toml"
        config.write_text('[models."llamafile/fake".model_args]\napi_key = "sk-notonthecommandline1"\n')
        monkeypatch.setenv("S3GYM_CONFIG", str(config))
        own = ModelSettings(api_base=fake.base, model_args={"min_p": 0.05, "api_key": "sk-notonthecommandline1"})
        app = S3GymApp(db_path=demo_db[0], settings=settings.with_model_settings("llamafile/fake", own))
        async with app.run_test(size=(120, 40)) as pilot:
            screen = pilot.app.screen
            await choose_game(pilot, "trust")
            screen.query_one("#pathway", Select).value = "history"
            screen.query_one("#model-input", Input).value = "llamafile/fake"
            await pilot.pause()
            await pilot.press("f6")
            await settle(pilot)
            dialog = pilot.app.screen
            assert isinstance(dialog, RunDialog)
            note = str(dialog.query_one("#run-server").render())
            assert "llama.cpp server on 127.0.0.1" in note and "2,048 tokens" in note
            assert "max tokens 14,000 -> 512" in note
            assert dialog.query_one("#run-max_tokens", Input).value == "512"
            assert int(dialog.query_one("#run-history_budget", Input).value) < 2048
            dialog.query_one("#run-decoding", Select).value = "grammar"
            dialog.query_one("#run-explore_episodes", Input).value = "1"
            dialog.query_one("#run-eval_episodes", Input).value = "0"
            await settle(pilot)
            await pilot.press("ctrl+s")  # the run is `s3gym run …` in a process of its own
            for _ in range(600):
                await pilot.pause(0.05)
                if opened:
                    break
            (child,) = pilot.app.child_runs.children
            child.process.wait(timeout=300)
        with Store(demo_db[0]) as store:
            run = store.runs.get_run(opened[0])
    assert (run.config.decoding, run.config.max_tokens, run.config.context_tokens, run.config.server_kind) == \
        ("grammar", 512, 2048, "llama.cpp")
    assert run.config.model_args == {"min_p": 0.05} and "sk-notonthecommandline1" not in " ".join(child.argv)
    assert all("grammar" in r["body"] and r["body"]["min_p"] == 0.05 for r in fake.requests)


async def test_model_settings_take_decoding_and_model_args_and_never_show_a_secret(app):
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        screen.query_one("#model-input", Input).value = "hosted_vllm/qwen"
        await pilot.pause()
        await pilot.click("#model-settings")
        await pilot.pause()
        dialog = pilot.app.screen
        assert isinstance(dialog, ModelSettingsDialog)
        dialog.query_one("#ms-decoding", Select).value = "grammar"
        dialog.query_one("#ms-model-args", Input).value = "top_k=40; api_key=sk-notshown12345678; stop=[\"\\n\"]"
        await pilot.click("#ms-apply")
        await pilot.pause()
        own = pilot.app.settings.model_settings("hosted_vllm/qwen")
        assert own.decoding == "grammar"
        assert own.model_args == {"top_k": 40, "api_key": "sk-notshown12345678", "stop": ["\n"]}
        await pilot.click("#model-settings")
        await pilot.pause()
        again = pilot.app.screen
        shown = again.query_one("#ms-model-args", Input).value
        assert "top_k=40" in shown and "sk-notshown" not in shown and "api_key" not in shown
        again.query_one("#ms-model-args", Input).value = "top_k=; x"
        await pilot.click("#ms-apply")
        await pilot.pause()
        assert pilot.app.screen is again and "KEY=VALUE" in str(again.query_one("#ms-error").render())
        again.query_one("#ms-model-args", Input).value = "top_k=8"
        await pilot.pause(0.4)  # a button ignores a second press while it still shows the first
        await pilot.click("#ms-apply")
        await pilot.pause()
        assert pilot.app.screen is not again
        own = pilot.app.settings.model_settings("hosted_vllm/qwen")
        assert own.model_args == {"api_key": "sk-notshown12345678", "top_k": 8}  # the secret was kept


async def test_a_malformed_api_base_in_the_run_dialog_starts_no_process(app, monkeypatch):
    """The run dialog starts `s3gym run` as a process: an api base that is not a server's URL is
    refused in one line before that (issue 36), and nothing is stored."""
    from s3gym_tui.screens import run_control

    started = []
    monkeypatch.setattr(run_control, "start_new_run", lambda app, config: started.append(config))
    async with app.run_test(size=(120, 40)) as pilot:
        screen = pilot.app.screen
        runs_before = len(app.store.runs.list_runs())
        await choose_game(pilot, "trust")
        screen.query_one("#model-input", Input).value = "hosted_vllm/fake"
        await pilot.pause()
        await pilot.press("f6")
        for _ in range(40):
            await pilot.pause(0.05)
            if isinstance(pilot.app.screen, RunDialog):
                break
        dialog = pilot.app.screen
        assert isinstance(dialog, RunDialog)
        dialog.query_one("#run-api_base", Input).value = "::::"
        await pilot.pause()
        await pilot.press("ctrl+s")
        for _ in range(40):
            await pilot.pause(0.05)
            if pilot.app.screen is screen:
                break
        message = str(screen.query_one("#home-message").render())
        assert "api base '::::' is not a server's URL" in message and "\n" not in message.strip()
        assert started == [] and len(app.store.runs.list_runs()) == runs_before
