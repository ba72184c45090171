"""Models one can pick without typing: local OpenAI-compatible servers on 127.0.0.1 and the
providers whose API keys are set. Blocking (network, litellm import): call it off the UI thread."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Iterable, Mapping, Optional, Sequence

# (server, port, litellm provider prefix, api base path): what each serves at /v1/models
LOCAL_SERVERS: tuple[tuple[str, int, str, str], ...] = (
    ("Ollama", 11434, "ollama_chat", ""),
    ("llama.cpp server", 8080, "llamafile", "/v1"),
    ("vLLM", 8000, "hosted_vllm", "/v1"),
    ("LM Studio", 1234, "lm_studio", "/v1"),
)
LOCAL_TIMEOUT_S = 0.4
PER_PROVIDER = 25  # models listed for a provider whose key is set


@dataclass(frozen=True)
class FoundModel:
    """A model string litellm understands, the api base it needs (local servers), where it came from."""

    model: str
    source: str  # e.g. "Ollama on 127.0.0.1:11434" or "OPENAI_API_KEY is set"
    api_base: Optional[str] = None
    context: Optional[int] = None  # the context the server states (engine.servers), when it said


def local_models(servers: Sequence[tuple[str, int, str, str]] = LOCAL_SERVERS, host: str = "127.0.0.1",
                 timeout_s: float = LOCAL_TIMEOUT_S) -> list[FoundModel]:
    """The models each local server lists at /v1/models (a server that does not answer in
    `timeout_s` is skipped). Only loopback is asked."""
    import httpx

    found: list[FoundModel] = []
    with httpx.Client(timeout=timeout_s, trust_env=False) as client:
        for name, port, provider, path in servers:
            root = f"http://{host}:{port}"
            try:
                response = client.get(f"{root}/v1/models")
                response.raise_for_status()
                data = response.json().get("data", [])
            except (httpx.HTTPError, ValueError, AttributeError):
                continue
            props = _props_context(client, root) if provider == "llamafile" else None
            for entry in data if isinstance(data, list) else []:
                model_id = entry.get("id") if isinstance(entry, dict) else None
                if isinstance(model_id, str) and model_id.strip():
                    context = props or _entry_context(entry)
                    source = f"{name} on {host}:{port}" + (f" · context {context:,}" if context else "")
                    found.append(FoundModel(f"{provider}/{model_id.strip()}", source, root + path, context))
    return found


def _entry_context(entry: dict) -> Optional[int]:
    """The context a /v1/models entry states (vLLM, SGLang: max_model_len; LM Studio: max_context_length)."""
    for key in ("max_model_len", "max_context_length"):
        value = entry.get(key)
        if isinstance(value, int) and 0 < value < 100_000_000:
            return value
    return None


def _props_context(client, root: str) -> Optional[int]:
    """llama.cpp's /props n_ctx (None when it has no /props: llama_cpp.server)."""
    from s3gym_tui.engine.servers import _llama_props

    try:
        info = _llama_props(client, root)
    except Exception:  # noqa: BLE001 - a convenience
        return None
    return info.context if info is not None else None


def key_names(provider: str) -> tuple[str, ...]:
    """The environment variables litellm reads a provider's key from (PROVIDER_API_KEY)."""
    return tuple(dict.fromkeys((f"{provider.replace('_', '').upper()}_API_KEY", f"{provider.upper()}_API_KEY")))


def any_key_set(environ: Optional[Mapping[str, str]] = None) -> bool:
    """True when some PROVIDER_API_KEY variable is set (cheap: litellm is not imported)."""
    env = os.environ if environ is None else environ
    return any(name.endswith("_API_KEY") and value for name, value in env.items())


def keyed_models(environ: Optional[Mapping[str, str]] = None, per_provider: int = PER_PROVIDER) -> list[FoundModel]:
    """Chat models (litellm's bundled list) of the providers whose API key variable is set, by
    litellm's own naming rule. No request is made, and a key's value is never read."""
    from s3gym_tui.engine.llm import _litellm

    litellm = _litellm()
    env = os.environ if environ is None else environ
    found: list[FoundModel] = []
    for provider in [str(getattr(p, "value", p)) for p in litellm.provider_list]:
        key = next((name for name in key_names(provider) if env.get(name)), None)
        if key is None:
            continue
        prefix = f"{provider}/"
        models = []
        for name in litellm.utils.bundled_provider_models(provider):
            info = litellm.model_cost.get(name) or litellm.model_cost.get(prefix + name) or {}
            if info.get("mode", "chat") != "chat":
                continue
            models.append(name if name.startswith(prefix) else prefix + name)
        for model in sorted(set(models))[:per_provider]:
            found.append(FoundModel(model, f"{key} is set"))
    return found


def discover(environ: Optional[Mapping[str, str]] = None,
             servers: Sequence[tuple[str, int, str, str]] = LOCAL_SERVERS) -> list[FoundModel]:
    """Local servers first, then keyed providers; each model once."""
    seen: set[str] = set()
    out: list[FoundModel] = []
    for found in _chain(local_models(servers), _safe_keyed(environ)):
        if found.model not in seen:
            seen.add(found.model)
            out.append(found)
    return out


def _safe_keyed(environ: Optional[Mapping[str, str]]) -> list[FoundModel]:
    try:
        return keyed_models(environ)
    except Exception:  # noqa: BLE001 - a litellm hiccup must not hide the local servers
        return []


def _chain(*groups: Iterable[FoundModel]) -> Iterable[FoundModel]:
    for group in groups:
        yield from group
