"""Models one can pick without typing: OpenAI-compatible servers on this machine (the usual ports)
and the ones a person names (the config's `servers`, $S3GYM_SERVERS), and the providers whose API
keys are set. A server that does not list its models is said, not dropped (`Scan.silent`).
Blocking (network, litellm import): call it off the UI thread."""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Iterable, Mapping, Optional, Sequence
from urllib.parse import urlsplit

# (server, port, litellm provider prefix, api base path): what each serves at /v1/models
LOCAL_SERVERS: tuple[tuple[str, int, str, str], ...] = (
    ("Ollama", 11434, "ollama_chat", ""),
    ("llama.cpp server", 8080, "llamafile", "/v1"),
    ("vLLM", 8000, "hosted_vllm", "/v1"),
    ("LM Studio", 1234, "lm_studio", "/v1"),
)
# Every server is asked at once (one thread each): a busy one (a llama.cpp server answers nothing
# while it generates) has this long to list its models before it is said to be not answering.
LOCAL_TIMEOUT_S = 1.5
PER_PROVIDER = 25  # models listed for a provider whose key is set
NAMED = "named server"
# the litellm provider for a named server, by the kind it says it is (engine.servers); others: hosted_vllm
# (litellm's OpenAI-compatible provider that needs no key)
PROVIDER_OF_KIND = {"llama.cpp": "llamafile", "llama-cpp-python": "llamafile", "ollama": "ollama_chat",
                    "lmstudio": "lm_studio"}


@dataclass(frozen=True)
class FoundModel:
    """A model string litellm understands, the api base it needs (local servers), where it came from."""

    model: str
    source: str  # e.g. "Ollama on 127.0.0.1:11434" or "OPENAI_API_KEY is set"
    api_base: Optional[str] = None
    context: Optional[int] = None  # the context the server states (engine.servers), when it said


@dataclass(frozen=True)
class SilentServer:
    """A server looked for that listed no models, and why (said to the person, not dropped)."""

    where: str  # host:port
    name: str  # "llama.cpp server", or NAMED for one the person named
    why: str  # "not answering within 1.5 s (busy?)", "nothing listening", "answered HTTP 404 ..."

    def said(self) -> str:
        return f"{self.name} on {self.where}: {self.why}"


@dataclass(frozen=True)
class Scan:
    """What looking for servers found: their models, and the servers that listed none."""

    found: list[FoundModel] = field(default_factory=list)
    silent: list[SilentServer] = field(default_factory=list)


def parse_server(text: str) -> tuple[str, str]:
    """(root URL, api base path) of a named server: `8765` (this machine), `host:port` or a URL
    (`http://gpu1:8000/v1`; path default /v1). Raises ValueError (one line) for anything else."""
    value = str(text).strip()
    if value.isdigit():
        value = f"127.0.0.1:{value}"
    url = value if "://" in value else f"http://{value}"
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        parts, port = None, None
    if parts is None or parts.scheme not in ("http", "https") or not parts.hostname or port == 0:
        raise ValueError(f"server {text!r} is not a port, host:port or http(s) URL (e.g. 8765, gpu1:8000, "
                         f"http://gpu1:8000/v1)")
    return f"{parts.scheme}://{parts.netloc.rsplit('@', 1)[-1]}", parts.path.rstrip("/") or "/v1"


def scan(named: Sequence[str] = (), servers: Sequence[tuple[str, int, str, str]] = LOCAL_SERVERS,
         host: str = "127.0.0.1", timeout_s: float = LOCAL_TIMEOUT_S) -> Scan:
    """The models each server lists at /v1/models: the usual local ports (`servers` on `host`) and
    the `named` ones (parse_server), all asked at once, each given `timeout_s`. A usual port where
    nothing listens is skipped quietly; every other server that lists nothing is in `silent`."""
    spots = [(name, f"http://{host}:{port}", provider, path, False) for name, port, provider, path in servers]
    for text in named:
        root, path = parse_server(text)
        if root not in {spot[1] for spot in spots}:
            spots.append((NAMED, root, "", path, True))
    if not spots:
        return Scan()
    with ThreadPoolExecutor(max_workers=len(spots)) as pool:
        results = list(pool.map(lambda spot: _ask(*spot, timeout_s=timeout_s), spots))
    out = Scan()
    for found, silent in results:
        out.found.extend(found)
        if silent is not None:
            out.silent.append(silent)
    return out


def _ask(name: str, root: str, provider: str, path: str, named: bool,
         timeout_s: float) -> tuple[list[FoundModel], Optional[SilentServer]]:
    """One server's models, or why it listed none. On a usual port only a server that does not
    answer in time is said (busy?): nothing listening, or another program's answer, is no model
    server; a named server is always said."""
    import httpx

    where = urlsplit(root).netloc

    def silent(why: str) -> tuple[list[FoundModel], Optional[SilentServer]]:
        return [], SilentServer(where, name, why) if named or why.startswith("not answering") else None

    with httpx.Client(timeout=timeout_s, trust_env=False) as client:
        try:
            response = client.get(f"{root}{path if named else '/v1'}/models")
            response.raise_for_status()
            data = response.json().get("data", [])
        except httpx.ConnectError:
            return silent("nothing listening")
        except httpx.TimeoutException:
            return silent(f"not answering within {timeout_s:g} s (busy?)")
        except httpx.HTTPStatusError as exc:
            return silent(f"answered HTTP {exc.response.status_code}, not a model list")
        except (httpx.HTTPError, ValueError, AttributeError):
            return silent("answered, but not with a model list")
        ids = [e["id"].strip() for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)
               and e["id"].strip()] if isinstance(data, list) else []
        if not ids:
            return silent("lists no models")
        if named:
            name, provider, path = _named_kind(root, path, ids[0])
        props = _props_context(client, root) if provider == "llamafile" else None
    entries = {e.get("id", "").strip(): e for e in data if isinstance(e, dict) and isinstance(e.get("id"), str)}
    found = []
    for model_id in ids:
        context = props or _entry_context(entries.get(model_id, {}))
        source = f"{name} on {where}" + (f" · context {context:,}" if context else "")
        found.append(FoundModel(f"{provider}/{model_id}", source, root + path, context))
    return found, None


def _named_kind(root: str, path: str, model_id: str) -> tuple[str, str, str]:
    """(name, litellm provider, api base path) of a named server, from what it says it is."""
    from s3gym_tui.engine.servers import describe

    info = describe(f"hosted_vllm/{model_id}", root + path)
    provider = PROVIDER_OF_KIND.get(info.kind, "hosted_vllm")
    return info.name, provider, "" if provider == "ollama_chat" else path


def local_models(servers: Sequence[tuple[str, int, str, str]] = LOCAL_SERVERS, host: str = "127.0.0.1",
                 timeout_s: float = LOCAL_TIMEOUT_S) -> list[FoundModel]:
    """The models the usual local servers list (scan's `found`; a server that does not answer is skipped)."""
    return scan((), servers, host, timeout_s).found


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
             servers: Sequence[tuple[str, int, str, str]] = LOCAL_SERVERS,
             named: Sequence[str] = ()) -> list[FoundModel]:
    """Servers first (the usual local ones and the `named` ones), then keyed providers; each model once."""
    seen: set[str] = set()
    out: list[FoundModel] = []
    for found in _chain(scan(named, servers).found, _safe_keyed(environ)):
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
