"""Prompt caching: which models need the stable prefix of a prompt marked, how a call marks it
(litellm's `cache_control_injection_points`), what a provider says it read from (and wrote to) its
cache, and what caching can be expected to save (the lower bound of a plan's cost).

The prompt keeps its stable parts first (s3gym_games.prompt.user_parts): system, Hint Messages, the turns
of the current episode, then the step prompt. OpenAI, DeepSeek, xAI, Gemini 2.5 and servers with a
prefix cache (vLLM, SGLang, llama.cpp) reuse such a prefix by themselves; Claude (Anthropic, Bedrock,
Vertex, OpenRouter...) caches only up to blocks marked with `cache_control`."""

from __future__ import annotations

import math
import os
from dataclasses import dataclass
from typing import Any, Optional

# Providers whose Claude models cache only marked prefixes (litellm turns the marks into each
# provider's form: Anthropic `cache_control`, Bedrock `cachePoint`).
CLAUDE_HOSTS = frozenset({"anthropic", "bedrock", "bedrock_converse", "vertex_ai", "vertex_ai_beta",
                          "openrouter", "azure_ai", "databricks"})
# A prompt shorter than this is not cached (OpenAI: 1,024 tokens; Anthropic: 1,024 to 4,096 by model).
MIN_CACHED_TOKENS = 1024


def _lib():
    """litellm (imported lazily, ~2 s), with the price list shipped in the package (no download)."""
    os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
    from s3gym_tui.providers import configured_litellm

    return configured_litellm()  # quiet (get_llm_provider prints a coloured "Provider List" otherwise)


def needs_marker(model: str) -> bool:
    """True when `model` caches only the prefixes a request marks (Claude on any host)."""
    if "claude" not in model.lower():
        return False
    try:
        provider = _lib().get_llm_provider(model)[1]
    except Exception:  # noqa: BLE001 - an unknown provider: no marks (nothing to break)
        return False
    return provider in CLAUDE_HOSTS


def injection_points(messages: list[dict]) -> list[dict]:
    """Where to mark a split prompt (prompts.build_messages(split=True)): the first user message
    (Hint Messages, or the first turn: the same for the whole episode, and Hint Messages for every
    episode of one experience state) and the message before the last one (the end of everything
    the next call repeats). The last message, the step prompt, changes at every call."""
    points: list[dict] = []
    users = [i for i, m in enumerate(messages) if m.get("role") == "user"]
    if len(users) > 1:
        points.append({"location": "message", "index": users[0]})
    if len(messages) >= 2 and len(messages) - 2 not in [p["index"] for p in points]:
        points.append({"location": "message", "index": len(messages) - 2})
    return points


def cache_kwargs(model: str, messages: list[dict]) -> dict[str, Any]:
    """Extra arguments of a litellm call that mark the stable prefix (none where not needed)."""
    if not needs_marker(model):
        return {}
    return {"cache_control_injection_points": injection_points(messages)}


def _field(obj: Any, name: str) -> Any:
    if obj is None:
        return None
    if isinstance(obj, dict):
        return obj.get(name)
    return getattr(obj, name, None)


def _sane(value: Any, what: str, limit: int, faults: list[str]) -> Optional[int]:
    """A reported token count as an int in 0..limit, or None (and a fault) when it is not one."""
    try:
        number = float(value)
    except (TypeError, ValueError, OverflowError):
        faults.append(f"server sent a non-numeric {what} ({str(value)[:40]!r}); stored as unknown")
        return None
    if not math.isfinite(number) or number < 0 or number > limit:
        faults.append(f"server sent an impossible {what} ({str(value)[:40]}); stored as unknown")
        return None
    return int(number)


def cached_usage(usage: Any, prompt_tokens: int, faults: list[str]) -> tuple[Optional[int], Optional[int]]:
    """(input tokens read from the provider's cache, input tokens written to it) as the usage of a
    litellm response reports them; None where the provider does not say (never 0 for unknown).

    OpenAI and OpenAI-compatible servers: `prompt_tokens_details.cached_tokens`. Anthropic (litellm
    maps it): `cache_read_input_tokens` and `cache_creation_input_tokens`, also found in
    `prompt_tokens_details` as `cached_tokens` / `cache_creation_tokens`. Both are part of
    `prompt_tokens` (litellm adds Anthropic's to its input tokens)."""
    details = _field(usage, "prompt_tokens_details")
    read = _field(details, "cached_tokens")
    if read is None:
        read = _field(usage, "cache_read_input_tokens")
    written = _field(usage, "cache_creation_input_tokens")
    if written is None:
        written = _field(details, "cache_creation_tokens")
    read = None if read is None else _sane(read, "cached token count", prompt_tokens, faults)
    written = None if written is None else _sane(written, "cache write token count", prompt_tokens, faults)
    if read is not None and written is not None and read + written > prompt_tokens:
        faults.append(f"server sent more cached tokens ({read} read, {written} written) than prompt tokens "
                      f"({prompt_tokens}); stored as unknown")
        return None, None
    return read, written


# ----- what caching can be expected to save (plans) ----------------------------------------------

@dataclass(frozen=True)
class CachePrices:
    """USD per input token: uncached, read from the cache, written to it (as litellm lists them)."""

    input: float
    read: float
    write: float


def cache_prices(model: str) -> Optional[CachePrices]:
    """The model's cache prices from litellm's price list; None when it lists no cache-read price
    below its input price (no caching to expect: an unknown or free model)."""
    try:
        info = _lib().get_model_info(model)
    except Exception:  # noqa: BLE001 - unmapped model
        return None
    base, read = info.get("input_cost_per_token"), info.get("cache_read_input_token_cost")
    if base is None or read is None or float(read) >= float(base):
        return None
    write = info.get("cache_creation_input_token_cost")
    return CachePrices(float(base), float(read), float(base if write is None else write))


def episode_cache(steps: int, prefix: int, turn: int, marked: bool,
                  minimum: int = MIN_CACHED_TOKENS) -> tuple[int, int]:
    """(tokens read from the cache, tokens written to it) expected over an episode of `steps` calls
    whose stable prefix is `prefix` tokens (system and Hint Messages) and grows by `turn` tokens a
    call: call k repeats call k-1's prefix and k-1 turns. The first call of an episode is counted
    as uncached (the last episode's calls may have cached its Hint Messages; that is not
    counted). A marked provider (Claude) also writes what it caches: the prefix at the first call,
    a turn at each later one. A prefix shorter than `minimum` is not cached."""
    read = written = 0
    for k in range(steps):
        repeated = prefix + (k - 1) * turn if k else 0  # what call k has in common with call k - 1
        hit = repeated if repeated >= minimum else 0
        read += hit
        stable = prefix + k * turn  # what call k marks (all but its step prompt)
        if marked and stable >= minimum:
            written += stable - hit
    return read, written


def cached_cost(model: str, tokens_in: int, read: int, written: int) -> Optional[float]:
    """USD of `tokens_in` input tokens of which `read` come from the cache and `written` are written
    to it, at litellm's prices; None when it lists no cache price for the model."""
    prices = cache_prices(model)
    if prices is None:
        return None
    plain = max(0, tokens_in - read - written)
    return plain * prices.input + read * prices.read + written * prices.write
