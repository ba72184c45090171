"""Built-in litellm models: the embedded local model, the games' scripted policies, a fault injector,
plus the provider plugins of `s3gym_tui.plugins` (the trained models), which this package registers
by name without importing the packages that define them.

Importing this package is cheap (no litellm, no llama.cpp); `register()` imports litellm and the handlers.
The engine passes per-request facts to built-in models as `extra_body={"s3gym": ctx}` (see `make_context`).
"""

from __future__ import annotations

import os
from typing import Any

import s3gym_games as games
from s3gym_tui import plugins

# litellm fetches its price list from the network at import unless told otherwise: stay offline by default
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

DEFAULT_MODEL = "local/smollm2-135m"
CORE_PROVIDERS: tuple[str, ...] = ("local", "scripted", "fault", "learner")
GAME_PROVIDERS: tuple[str, ...] = ("scripted", "fault", "learner")  # `<provider>/<game>`: one game each
PROVIDERS: tuple[str, ...] = CORE_PROVIDERS + tuple(p.name for p in plugins.provider_plugins()
                                                    if p.name not in CORE_PROVIDERS)
LOCAL_MODELS = {"smollm2-135m": "SmolLM2-135M-Instruct (Q4_1 GGUF, llama.cpp), embedded; the default"}
LOCAL_CONTEXT_WINDOW = 8192  # must match local.N_CTX (kept here so this module needs no llama.cpp import)


def _builtin_models() -> list[tuple[str, str]]:
    models = [(f"local/{name}", text) for name, text in LOCAL_MODELS.items()]
    models += [(f"scripted/{g}", f"the {g} reference policy (deterministic, instant)") for g in games.names()]
    models += [(f"fault/{g}", f"the {g} reference policy with injected faults (for tests)") for g in games.names()]
    models += [(f"learner/{g}", f"a glass-box in-context learner of {g}: acts on its prompt alone (instant)")
               for g in games.names()]
    return models


BUILTIN_MODELS: list[tuple[str, str]] = _builtin_models()


def split_model(model: str) -> tuple[str, str]:
    """('provider', 'name') of a litellm model string ('' provider when there is no slash)."""
    provider, sep, name = str(model).partition("/")
    return (provider, name) if sep else ("", provider)


def is_builtin(model: str) -> bool:
    """True for `local/<known>`, `scripted/<game>`, `fault/<game>`, `learner/<game>` (game aliases accepted) and a
    plugin's models (`trained/<training_id>/<checkpoint>`)."""
    provider, name = split_model(model)
    if provider == "local":
        return name in LOCAL_MODELS
    if provider in GAME_PROVIDERS:
        try:
            games.canonical(name)
        except games.GameError:
            return False
        return True
    plugin = plugins.find(provider) if provider else None
    return plugin is not None and bool(name) and plugin.accepts(name)


def configured_litellm():
    """litellm, imported lazily (~2-3 s), quiet, dropping parameters a provider does not take, with the
    built-in providers registered: the one way the engine reaches litellm."""
    import logging

    import litellm

    litellm.suppress_debug_info = True
    litellm.drop_params = True
    # litellm's own warnings (its logging worker moving tasks to a new event loop, a price map it could
    # not fetch) are not the user's business and would land on the terminal between s3gym's own lines:
    # what matters reaches the user as s3gym's one-line errors and the steps' faults.
    for name in ("LiteLLM", "LiteLLM Router", "LiteLLM Proxy"):
        logger = logging.getLogger(name)
        if logger.level != logging.ERROR:  # setLevel clears every logger's cache: not on each call
            logger.setLevel(logging.ERROR)
    if _registered != _registration(litellm):  # once, and again when the map or the plugins changed
        register()
    return litellm


def _registration(litellm) -> tuple:
    """What register() depends on: the entries of litellm's provider map (copied: a change in place
    shows) and the plugins."""
    return [dict(e) for e in litellm.custom_provider_map or []], tuple(plugins.provider_plugins())


_registered: tuple = ()  # _registration() as register() last left it


def register() -> None:
    """Add our handlers to `litellm.custom_provider_map` (idempotent; other providers' entries are kept)."""
    import litellm

    global _registered

    from s3gym_tui.providers.fault import FaultLLM
    from s3gym_tui.providers.learner.handler import LearnerLLM
    from s3gym_tui.providers.local import HANDLER as local_handler
    from s3gym_tui.providers.scripted import ScriptedLLM

    global _scripted, _fault, _learner, _models_registered
    if _scripted is None:
        _scripted, _fault, _learner = ScriptedLLM(), FaultLLM(), LearnerLLM()
    ours = {"local": local_handler, "scripted": _scripted, "fault": _fault, "learner": _learner}
    for plugin in plugins.provider_plugins():  # e.g. the trained models: only litellm is needed to register
        if plugin.name in ours:
            continue
        try:
            ours[plugin.name] = plugin.load()
        except (ImportError, AttributeError):  # a trimmed install without that package: skip it
            continue
    current = list(litellm.custom_provider_map or [])
    if not all(sum(1 for e in current if e.get("provider") == p and e.get("custom_handler") is h) == 1
               for p, h in ours.items()):
        kept = [e for e in current if e.get("provider") not in ours]
        litellm.custom_provider_map = kept + [{"provider": p, "custom_handler": h} for p, h in ours.items()]
    _registered = _registration(litellm)
    if not _models_registered:
        litellm.utils.custom_llm_setup()  # litellm learns the provider names (else register_model prints errors)
        # zero prices and known windows: litellm.completion_cost() returns 0.0 instead of raising
        # ModelNotMappedError, and get_model_info() knows the local model's context window
        litellm.register_model({model: {
            "max_input_tokens": LOCAL_CONTEXT_WINDOW if model.startswith("local/") else None,
            "max_output_tokens": LOCAL_CONTEXT_WINDOW if model.startswith("local/") else None,
            "input_cost_per_token": 0.0, "output_cost_per_token": 0.0,
            "cache_creation_input_token_cost": 0.0, "cache_read_input_token_cost": 0.0,
            "litellm_provider": split_model(model)[0], "mode": "chat"} for model, _ in BUILTIN_MODELS})
        _models_registered = True


_models_registered = False
_scripted: Any = None
_fault: Any = None
_learner: Any = None


def context_window(model: str) -> int | None:
    """Input tokens the model accepts: local -> its n_ctx; scripted/fault/learner -> None (unlimited);
    others -> litellm's model info when known, else None."""
    provider, name = split_model(model)
    if provider == "local":
        return LOCAL_CONTEXT_WINDOW if name in LOCAL_MODELS else None
    if provider in GAME_PROVIDERS:
        return None
    import litellm

    try:
        info = litellm.get_model_info(model)
    except Exception:  # noqa: BLE001 - litellm raises plain Exception for unknown models
        return None
    value = info.get("max_input_tokens") or info.get("max_tokens")
    return int(value) if value else None


def count_tokens(model: str, text: str) -> int:
    """Tokens of `text` for `model`: the embedded tokenizer for local, 4 chars a token for scripted/fault/learner
    (what their usage reports), litellm's token_counter otherwise."""
    provider, _ = split_model(model)
    if provider == "local":
        from s3gym_tui.providers.local import count_tokens as local_count

        return local_count(text)
    if provider in GAME_PROVIDERS:
        from s3gym_tui.providers._common import estimate_tokens

        return estimate_tokens(text)
    import litellm

    return int(litellm.token_counter(model=model, text=text))


def s3gym_context(optional_params: Any, kwargs: Any = None) -> dict | None:
    """Find the s3gym context in a custom handler's arguments (see `_common.s3gym_context`)."""
    from s3gym_tui.providers._common import s3gym_context as find

    return find(optional_params, kwargs)


def make_context(task: str, game: str, mode: str, seed: int, actions: Any = (), grammar: str | None = None,
                 **extra: Any) -> dict:
    """The dict to send as `extra_body={"s3gym": make_context(...)}` to a built-in model."""
    if task not in ("act", "summary"):
        raise ValueError(f"unknown task {task!r}: choose act or summary")
    ctx: dict[str, Any] = {"task": task, "game": game, "mode": mode, "seed": int(seed), "actions": list(actions)}
    if grammar is not None:
        ctx["grammar"] = grammar
    ctx.update(extra)
    return ctx


__all__ = ["BUILTIN_MODELS", "DEFAULT_MODEL", "GAME_PROVIDERS", "PROVIDERS", "context_window", "count_tokens", "is_builtin",
           "make_context", "register", "s3gym_context", "split_model"]
