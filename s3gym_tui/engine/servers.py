"""What a model server says about itself: its kind (llama.cpp, llama-cpp-python, vLLM, SGLang,
Ollama, LM Studio, a hosted API) and its context size, read from the server (llama.cpp `/props`,
llama-cpp-python's `/openapi.json` title, vLLM and SGLang `/v1/models` `max_model_len`, Ollama
`/api/show`, LM Studio `/api/v0/models`) or from litellm's model info for hosted models
(engine.fitting fits a run to it); and what it teaches in its errors (its context, the grammar form
it takes).

Blocking (network, litellm): call it off the UI thread. Answers are cached per (model, api base)."""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass
from typing import Any, Optional
from urllib.parse import urlsplit

from s3gym_tui.secrets import strip_url_credentials

PROBE_TIMEOUT_S = 1.5
# a reply's cap while a model server (an api base) has not stated its context nor taught it in an
# error: a server's smallest usual context (llama.cpp's 2,048 by default) still holds a short prompt
# and this (a hosted model litellm does not know keeps its max tokens: its API states its limits)
UNKNOWN_CONTEXT_MAX_TOKENS = 1024

# litellm provider prefix -> server kind (None: ask the server)
KIND_OF_PROVIDER = {"llamafile": "llama.cpp", "hosted_vllm": "vllm", "vllm": "vllm", "ollama": "ollama",
                    "ollama_chat": "ollama", "lm_studio": "lmstudio"}
KIND_NAMES = {"llama.cpp": "llama.cpp server", "llama-cpp-python": "llama-cpp-python server", "vllm": "vLLM",
              "vllm-legacy": "vLLM", "sglang": "SGLang", "ollama": "Ollama", "lmstudio": "LM Studio",
              "openai-compatible": "OpenAI-compatible server", "hosted": "hosted API", "builtin": "built-in model"}


@dataclass(frozen=True)
class ServerInfo:
    """A server's own description. `context` None: it did not say (nothing is fitted)."""

    kind: str  # see KIND_NAMES
    context: Optional[int] = None
    source: str = ""  # where the context came from, e.g. "/props n_ctx"
    where: str = ""  # host:port, or the provider for a hosted model
    grammar_form: Optional[str] = None  # the form it takes a grammar in, learnt from its refusal of another
    # why the server could not be asked ("refused the connection": nothing listens there); such an
    # answer is not cached (the server may be starting)
    unreachable: str = ""

    @property
    def name(self) -> str:
        return KIND_NAMES.get(self.kind, self.kind)

    def said(self) -> str:
        """`llama.cpp server on 127.0.0.1:8080 states a context of 2,048 tokens (/props n_ctx)`."""
        where = f" on {self.where}" if self.where and self.kind != "hosted" else ""
        if self.unreachable:
            return f"the server{where} {self.unreachable}: context unknown"
        if self.context is None:
            return f"{self.name}{where} states no context size: context unknown"
        verb = "has" if self.kind == "hosted" else "states"
        return f"{self.name}{where} {verb} a context of {self.context:,} tokens ({self.source})"


def reply_cap(max_tokens: int, context: Optional[int]) -> int:
    """Max tokens a reply may take: `max_tokens`, kept to UNKNOWN_CONTEXT_MAX_TOKENS while the
    context is unknown (a server that states none would be asked for more than it holds)."""
    return max_tokens if context else min(max_tokens, UNKNOWN_CONTEXT_MAX_TOKENS)


def provider_of(model: str) -> str:
    provider, sep, _ = str(model).partition("/")
    return provider if sep else ""


def served_name(model: str) -> str:
    """The model's name as its server lists it (the litellm provider prefix removed)."""
    _, sep, name = str(model).partition("/")
    return name if sep else str(model)


def kind_guess(model: str, api_base: Optional[str]) -> str:
    """The server kind from the litellm provider alone (no request). Built-in models are not
    served: callers tell them apart first (engine.fitting, engine.llm), so this module imports
    nothing of the engine that calls it."""
    kind = KIND_OF_PROVIDER.get(provider_of(model))
    if kind:
        return kind
    return "openai-compatible" if api_base else "hosted"


def _root(api_base: str) -> str:
    base = api_base.rstrip("/")
    return base[:-3] if base.endswith("/v1") else base


def _positive(value: Any) -> Optional[int]:
    try:
        number = int(value)
    except (TypeError, ValueError):
        return None
    return number if 0 < number < 100_000_000 else None


def _get(client, url: str) -> Any:
    response = client.get(url)
    response.raise_for_status()
    return response.json()


def _llama_props(client, root: str) -> Optional[ServerInfo]:
    data = _get(client, f"{root}/props")
    if not isinstance(data, dict):
        return None
    settings = data.get("default_generation_settings")
    n_ctx = _positive(settings.get("n_ctx")) if isinstance(settings, dict) else None
    if n_ctx:
        return ServerInfo("llama.cpp", n_ctx, "/props default_generation_settings.n_ctx")
    n_ctx = _positive(data.get("n_ctx"))
    return ServerInfo("llama.cpp", n_ctx, "/props n_ctx" if n_ctx else "")


def _llama_cpp_python(client, root: str) -> Optional[ServerInfo]:
    """llama-cpp-python's own server (`python -m llama_cpp.server`): no /props, its FastAPI schema is
    titled "llama.cpp Python API"; it states no context."""
    data = _get(client, f"{root}/openapi.json")
    title = str((data.get("info") or {}).get("title", "")) if isinstance(data, dict) else ""
    return ServerInfo("llama-cpp-python") if "llama.cpp python api" in title.lower() else None


def _entry(data: Any, name: str) -> Optional[dict]:
    entries = data.get("data") if isinstance(data, dict) else None
    if not isinstance(entries, list):
        return None
    entries = [e for e in entries if isinstance(e, dict)]
    return next((e for e in entries if e.get("id") == name), entries[0] if len(entries) == 1 else None)


def _version_kind(client, root: str) -> str:
    """vLLM before 0.12 takes `guided_grammar`; 0.12 and later only `structured_outputs`."""
    try:
        version = str(_get(client, f"{root}/version").get("version", ""))
    except Exception:  # noqa: BLE001 - no /version: assume a current vLLM
        return "vllm"
    match = re.match(r"(\d+)\.(\d+)", version)
    return "vllm-legacy" if match and (int(match[1]), int(match[2])) < (0, 12) else "vllm"


def _openai_models(client, root: str, name: str) -> Optional[ServerInfo]:
    entry = _entry(_get(client, f"{root}/v1/models"), name)
    if entry is None:
        return None
    owner = str(entry.get("owned_by", "")).lower()
    context = _positive(entry.get("max_model_len"))
    if "sglang" in owner:
        return ServerInfo("sglang", context, "/v1/models max_model_len" if context else "")
    if context or "vllm" in owner:
        return ServerInfo(_version_kind(client, root), context, "/v1/models max_model_len" if context else "")
    meta = entry.get("meta")
    if isinstance(meta, dict) and _positive(meta.get("n_ctx_train")):  # llama.cpp without /props
        return ServerInfo("llama.cpp", _positive(meta.get("n_ctx_train")), "/v1/models meta.n_ctx_train")
    return None


def _ollama_show(client, root: str, name: str, sure: bool = False) -> Optional[ServerInfo]:
    if not sure:  # only a GET to a server not known to be Ollama (its /api/version says so)
        version = _get(client, f"{root}/api/version")
        if not isinstance(version, dict) or "version" not in version:
            return None
    response = client.post(f"{root}/api/show", json={"model": name})
    response.raise_for_status()
    data = response.json()
    if not isinstance(data, dict):
        return None
    params = str(data.get("parameters") or "")
    match = re.search(r"^\s*num_ctx\s+(\d+)", params, re.MULTILINE)
    if match and _positive(match[1]):
        return ServerInfo("ollama", int(match[1]), "/api/show num_ctx")
    info = data.get("model_info")
    if isinstance(info, dict):
        for key, value in info.items():
            if str(key).endswith(".context_length") and _positive(value):
                return ServerInfo("ollama", int(value), f"/api/show {key}")
    return ServerInfo("ollama")


def _lmstudio_models(client, root: str, name: str) -> Optional[ServerInfo]:
    entry = _entry(_get(client, f"{root}/api/v0/models"), name)
    if entry is None:
        return None
    for key in ("loaded_context_length", "max_context_length"):
        if _positive(entry.get(key)):
            return ServerInfo("lmstudio", int(entry[key]), f"/api/v0/models {key}")
    return ServerInfo("lmstudio")


def _ask_server(model: str, api_base: str, timeout_s: float) -> ServerInfo:
    import httpx

    root = _root(api_base)
    name = served_name(model)
    guess = kind_guess(model, api_base)
    probes = {"llama.cpp": lambda c: _llama_props(c, root),
              "llama-cpp-python": lambda c: _llama_cpp_python(c, root),
              "vllm": lambda c: _openai_models(c, root, name),
              "ollama": lambda c: _ollama_show(c, root, name, sure=guess == "ollama"),
              "lmstudio": lambda c: _lmstudio_models(c, root, name)}
    order = [guess] + [k for k in probes if k != guess] if guess in probes else list(probes)
    where = urlsplit(api_base).netloc.rsplit("@", 1)[-1] or strip_url_credentials(api_base) or ""
    with httpx.Client(timeout=timeout_s, trust_env=False) as client:
        for kind in order:
            try:
                info = probes[kind](client)
            except httpx.ConnectError as exc:  # nothing listens there: every other probe would fail too
                why = "refused the connection" if "refused" in str(exc).lower() else "could not be reached"
                return ServerInfo(guess, None, "", where, unreachable=why)
            except Exception:  # noqa: BLE001 - not this kind of server (404, not JSON, a timeout)
                continue
            if info is not None:
                return ServerInfo(info.kind, info.context, info.source, where)
    # said nothing: trust the provider where the server kind has no other sign (llama_cpp.server has
    # no /props); a vLLM always lists max_model_len, so one that does not is a generic server
    return ServerInfo(guess if guess in ("llama.cpp", "ollama", "lmstudio") else "openai-compatible", None, "",
                      where)


def _ask_litellm(model: str) -> ServerInfo:
    import litellm  # its bundled price and window list (LITELLM_LOCAL_MODEL_COST_MAP keeps it offline)

    try:
        info = litellm.get_model_info(model)
    except Exception:  # noqa: BLE001 - an unmapped model: nothing is known
        return ServerInfo("hosted", None, "", provider_of(model))
    context = _positive(info.get("max_input_tokens") or info.get("max_tokens"))
    return ServerInfo("hosted", context, "litellm's model info" if context else "", provider_of(model))


_CACHE: dict[tuple[str, str], ServerInfo] = {}
_LOCK = threading.Lock()
_ASKING: dict[tuple[str, str], threading.Lock] = {}  # per (model, api base): held while it is asked


def describe(model: str, api_base: Optional[str] = None, timeout_s: float = PROBE_TIMEOUT_S,
             fresh: bool = False) -> ServerInfo:
    """What the model's server says about itself (cached; `fresh` asks again; a server that refused
    the connection is asked again next time: it may be starting). For a served or hosted model:
    built-in models have no server (engine.fitting tells them apart)."""
    key = (model, api_base or "")
    with _LOCK:
        asking = _ASKING.setdefault(key, threading.Lock())
    with asking:  # one question at a time per server: the runs of a sweep start together and wait
        if not fresh:  # for the first answer instead of all asking at once
            with _LOCK:
                if key in _CACHE:
                    return _CACHE[key]
        if api_base:
            info = _ask_server(model, api_base, timeout_s)
        else:
            info = _ask_litellm(model)
        if not info.unreachable:
            with _LOCK:
                _CACHE[key] = info
    return info


def learn_context(model: str, api_base: Optional[str], context: int, source: str) -> ServerInfo:
    """Remember a context a server stated in an error (the first call that overflowed it)."""
    return _learn(model, api_base, context=int(context), source=source)


def learn_grammar_form(model: str, api_base: Optional[str], form: str) -> ServerInfo:
    """Remember the grammar form to send a server that refused another one (engine.decoding)."""
    return _learn(model, api_base, grammar_form=form)


def _learn(model: str, api_base: Optional[str], **taught: Any) -> ServerInfo:
    from dataclasses import replace

    key = (model, api_base or "")
    with _LOCK:
        info = replace(_CACHE.get(key) or ServerInfo(kind_guess(model, api_base)), **taught)
        _CACHE[key] = info
    return info


def known(model: str, api_base: Optional[str] = None) -> Optional[ServerInfo]:
    with _LOCK:
        return _CACHE.get((model, api_base or ""))


# ----- a context stated in an error -----------------------------------------------------------------
_STATED = re.compile(
    r"(?:maximum context length is|context window of|context (?:size|length) (?:is|of)|n_ctx[\"']?\s*[:=]\s*"
    r"|context_length[\"']?\s*[:=]\s*)\s*(\d[\d,]{1,12})", re.IGNORECASE)


def context_in_error(text: str) -> Optional[int]:
    """The context size a server states in an error (vLLM 'maximum context length is 2048 tokens',
    llama.cpp 'context window of 2048', `n_ctx: 2048`), or None."""
    match = _STATED.search(text or "")
    return _positive(match[1].replace(",", "")) if match else None
