"""The provider registry: model list, registration, context windows, the context channel, import cost."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from litellm import CustomLLM

import s3gym_games as games
from s3gym_tui import providers
from s3gym_tui.providers import (BUILTIN_MODELS, DEFAULT_MODEL, context_window, is_builtin, make_context,
                                 s3gym_context)

ROOT = Path(__file__).resolve().parents[2]


def test_builtin_models_list_every_game_and_the_default_first():
    names = [m for m, _ in BUILTIN_MODELS]
    assert names[0] == DEFAULT_MODEL == "local/smollm2-135m"
    assert names[1:] == ([f"scripted/{g}" for g in games.names()] + [f"fault/{g}" for g in games.names()]
                         + [f"learner/{g}" for g in games.names()])
    assert all(text and "\n" not in text for _, text in BUILTIN_MODELS)
    assert all(is_builtin(m) for m in names)


@pytest.mark.parametrize("model, expected", [
    ("local/smollm2-135m", True), ("scripted/trust", True), ("fault/trust", True), ("learner/chess", True),
    ("learner/go", False), ("learner", False),
    ("scripted/plants-vs-zombies", True), ("local/llama-70b", False), ("scripted/go", False),
    ("openai/gpt-4.1", False), ("trained/run-1", False), ("trained/run-1/2", True), ("smollm2-135m", False),
    ("", False),
])
def test_is_builtin(model, expected):
    assert is_builtin(model) is expected


def test_register_is_idempotent_and_keeps_other_providers(litellm_mod, monkeypatch):
    class Elsewhere(CustomLLM):
        pass

    other = {"provider": "elsewhere", "custom_handler": Elsewhere()}
    monkeypatch.setattr(litellm_mod, "custom_provider_map", [other] + list(litellm_mod.custom_provider_map))
    providers.register()
    providers.register()
    entries = litellm_mod.custom_provider_map
    assert entries[0] is other
    assert sorted(e["provider"] for e in entries) == ["elsewhere", "fault", "learner", "local", "scripted", "trained"]


def test_register_replaces_a_foreign_handler_for_our_provider_names(litellm_mod, monkeypatch):
    class Impostor(CustomLLM):
        pass

    monkeypatch.setattr(litellm_mod, "custom_provider_map",
                        [{"provider": "scripted", "custom_handler": Impostor()}])
    providers.register()
    handlers = {e["provider"]: e["custom_handler"] for e in litellm_mod.custom_provider_map}
    assert type(handlers["scripted"]).__name__ == "ScriptedLLM"
    assert len(litellm_mod.custom_provider_map) == len(providers.PROVIDERS) == 5


def test_context_windows(litellm_mod):
    from s3gym_tui.providers import local

    assert context_window("local/smollm2-135m") == local.N_CTX == providers.LOCAL_CONTEXT_WINDOW == 8192
    assert context_window("scripted/trust") is None
    assert context_window("fault/snake") is None
    window = context_window("openai/gpt-4.1")  # from litellm's bundled (offline) model map
    assert isinstance(window, int) and window > 100_000
    assert context_window("nosuchprovider/nosuchmodel") is None
    assert context_window("local/other") is None


def test_builtin_models_cost_nothing(litellm_mod):
    response = litellm_mod.completion(model="scripted/trust", messages=[{"role": "user", "content": "go"}],
                                      extra_body={"s3gym": make_context("act", "trust", "explore", 0)})
    assert litellm_mod.completion_cost(completion_response=response) == 0.0


def test_s3gym_context_finds_both_shapes():
    ctx = {"task": "act", "game": "trust"}
    assert s3gym_context({"extra_body": {"s3gym": ctx}}, {}) == ctx
    assert s3gym_context({"s3gym": ctx}, {}) == ctx
    assert s3gym_context({}, {"litellm_params": {"metadata": {"s3gym": ctx}}}) == ctx
    assert s3gym_context({"extra_body": {"other": 1}, "temperature": 0}, {}) is None
    assert s3gym_context(None, None) is None


async def test_context_channel_reaches_a_custom_handler(litellm_mod, monkeypatch):
    """How litellm 1.110.2 delivers extra_body to a CustomLLM: optional_params["extra_body"], untouched,
    also with drop_params=True (the engine's setting), next to seed/temperature/max_tokens."""
    seen = {}

    class Spy(CustomLLM):
        def _record(self, kwargs):
            seen.update(kwargs)
            response = kwargs["model_response"]
            response.choices[0].message.content = "ok"
            return response

        async def acompletion(self, *args, **kwargs):
            return self._record(kwargs)

        def completion(self, *args, **kwargs):
            return self._record(kwargs)

    monkeypatch.setattr(litellm_mod, "custom_provider_map",
                        list(litellm_mod.custom_provider_map) + [{"provider": "s3gymspy", "custom_handler": Spy()}])
    monkeypatch.setattr(litellm_mod, "drop_params", True)
    ctx = make_context("act", "trust", "eval", 1_000_003, ["cheat"], grammar='"collaborate" | "cheat"')
    await litellm_mod.acompletion(model="s3gymspy/x", messages=[{"role": "user", "content": "hi"}],
                                  extra_body={"s3gym": ctx}, seed=7, temperature=0.0, max_tokens=50, num_retries=0)
    assert seen["optional_params"]["extra_body"] == {"s3gym": ctx}
    assert seen["optional_params"]["seed"] == 7 and seen["optional_params"]["max_tokens"] == 50
    assert s3gym_context(seen["optional_params"], seen) == ctx
    seen.clear()
    litellm_mod.completion(model="s3gymspy/x", messages=[{"role": "user", "content": "hi"}],
                           extra_body={"s3gym": ctx})
    assert s3gym_context(seen["optional_params"], seen) == ctx


def test_make_context_rejects_unknown_tasks():
    with pytest.raises(ValueError):
        make_context("play", "trust", "explore", 0)


def test_package_import_is_cheap_and_textual_free():
    code = ("import sys; import s3gym_tui.providers as p; "
            "assert 'litellm' not in sys.modules and 'textual' not in sys.modules and 'llama_cpp' not in sys.modules; "
            "p.register(); assert 'textual' not in sys.modules and 'llama_cpp' not in sys.modules; print('ok')")
    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
    assert "Provider List" not in out.stdout + out.stderr  # register() makes litellm print nothing


def test_the_engine_registers_again_only_when_the_map_or_the_plugins_changed(litellm_mod, monkeypatch):
    """configured_litellm (once per model call) skips register() while nothing it depends on changed,
    and registers again after a change to the map (a new list, or one changed in place) or the plugins."""
    from s3gym_tui import plugins

    class Impostor(CustomLLM):
        pass

    calls = []
    real = providers.register
    monkeypatch.setattr(providers, "register", lambda: calls.append(1) or real())
    providers.configured_litellm()
    calls.clear()
    providers.configured_litellm()
    assert calls == []
    scripted = next(e for e in litellm_mod.custom_provider_map if e["provider"] == "scripted")
    monkeypatch.setitem(scripted, "custom_handler", Impostor())  # in place: same list, same length
    providers.configured_litellm()
    assert calls == [1]
    assert not any(isinstance(e["custom_handler"], Impostor) for e in litellm_mod.custom_provider_map)
    monkeypatch.setitem(plugins._PLUGINS, "echo", plugins.ProviderPlugin("echo", "no_such_module:HANDLER", r"\w+"))
    providers.configured_litellm()
    assert calls == [1, 1]
