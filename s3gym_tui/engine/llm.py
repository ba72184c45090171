"""One model call through litellm.acompletion, with retries, backoff and per-call accounting."""

from __future__ import annotations

import asyncio
import math
import os
import re
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Optional

from s3gym_tui.secrets import REDACTED, has_secret, redact_values  # noqa: F401  (REDACTED re-exported)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


class ModelUnavailable(RuntimeError):
    """The model could not be reached (after retries) or refused the request. One-line message."""


@dataclass(frozen=True)
class CallSettings:
    model: str
    api_base: Optional[str] = None
    api_bases: tuple[str, ...] = ()  # replicas of one model: litellm's Router spreads the calls
    temperature: float = 0.0
    max_tokens: int = 14_000
    seed: Optional[int] = None
    timeout_s: float = 120.0
    max_retries: int = 4
    backoff_base_s: float = 0.5
    backoff_cap_s: float = 30.0


@dataclass(frozen=True)
class CallResult:
    reply: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    cost: Optional[float] = None
    faults: tuple[str, ...] = field(default_factory=tuple)  # transient faults survived by retrying


def _litellm():
    import litellm  # imported lazily: ~2-3 s

    litellm.suppress_debug_info = True
    litellm.drop_params = True
    from s3gym_tui.providers import register

    register()
    return litellm


def _transient_types(litellm) -> tuple[type, ...]:
    return (litellm.RateLimitError, litellm.Timeout, litellm.InternalServerError,
            litellm.APIConnectionError, litellm.ServiceUnavailableError, asyncio.TimeoutError)


def _fault_name(exc: BaseException) -> str:
    name = type(exc).__name__
    return {"RateLimitError": "rate_limit", "Timeout": "timeout", "InternalServerError": "server_error",
            "APIConnectionError": "connection", "ServiceUnavailableError": "unavailable",
            "TimeoutError": "timeout"}.get(name, name)


MAX_TOKEN_COUNT = 10_000_000  # more than any context window: a larger count is a server's garbage


def _retry_after(exc: BaseException) -> Optional[float]:
    """The server's Retry-After in seconds, or None when absent or not a sane number (nan, inf,
    negative, an HTTP date): then the engine's own backoff applies. Capped by the caller. Read
    wherever litellm keeps the response headers (a real provider's are in
    `litellm_response_headers`; `response.headers` may be empty)."""
    places = (getattr(exc, "litellm_response_headers", None), getattr(exc, "headers", None),
              getattr(getattr(exc, "response", None), "headers", None))
    for headers in places:
        if not headers:
            continue
        try:
            value = headers.get("retry-after") or headers.get("Retry-After")
            if value is None:
                continue
            delay = float(value)
        except (TypeError, ValueError, AttributeError):
            return None
        if not math.isfinite(delay) or delay < 0:
            return None
        return delay
    return None


def _count(value: Any, what: str, faults: list[str]) -> int:
    """A token count from the server as a sane int (0 and a fault when negative, absurd, not a number)."""
    try:
        number = float(value or 0)
    except (TypeError, ValueError, OverflowError):
        faults.append(f"server sent a non-numeric {what} ({str(value)[:40]!r}); stored as 0")
        return 0
    if not math.isfinite(number) or number < 0 or number > MAX_TOKEN_COUNT:
        faults.append(f"server sent an impossible {what} ({str(value)[:40]}); stored as 0")
        return 0
    return int(number)


# The shapes of keys and auth headers that providers echo in error messages (often partly
# masked, e.g. "Incorrect API key provided: sk-abc*****wxyz").
_SECRET_SHAPES = (
    re.compile(r"\b(?:sk|pk|rk)-[A-Za-z0-9_\-*.]{6,}"),
    re.compile(r"\bAIza[0-9A-Za-z_\-*]{10,}"),
    re.compile(r"\b(?:gh[pousr]|hf|xox[abpr])_[A-Za-z0-9_\-*]{8,}"),
    re.compile(r"(?i)\b((?:bearer|basic)\s+)[A-Za-z0-9._\-~+/=*]{8,}"),
    re.compile(r"(?i)((?:api[_-]?key|x-api-key|authorization|access[_-]?token|secret)[\"']?\s*[:=]\s*[\"']?)"
               r"[^\s\"',;}]{6,}"),
)


def redact(text: str) -> str:
    """`text` with secrets removed: the values of secret-looking environment variables (API keys)
    and anything shaped like a key or an auth header. Applied to every model error message, so
    a provider that echoes a key cannot carry it into the store, the logs or the UI."""
    text = redact_values(text)
    for shape in _SECRET_SHAPES:
        text = shape.sub(lambda m: (m.group(1) + REDACTED) if m.re.groups else REDACTED, text)
    return text


def one_line(exc: BaseException) -> str:
    """The error as one line of at most 300 characters, secrets redacted."""
    text = redact(" ".join(str(exc).split()))
    return text[:300] if text else type(exc).__name__


_ROUTERS: dict[tuple[str, tuple[str, ...]], Any] = {}


def router_for(litellm, model: str, api_bases: tuple[str, ...]):
    """litellm's Router over the model's replicas (one deployment per api base), made once.
    It spreads calls (simple shuffle), cools down a failing replica and, on a retryable failure,
    re-picks another one; retries and backoff stay with `complete`."""
    key = (model, tuple(api_bases))
    if key not in _ROUTERS:
        _ROUTERS[key] = litellm.Router(
            model_list=[{"model_name": model, "litellm_params": {"model": model, "api_base": base}}
                        for base in api_bases],
            num_retries=0, enable_weighted_failover=True, cooldown_time=5, allowed_fails=2)
    return _ROUTERS[key]


async def _acompletion(litellm, settings: CallSettings, kwargs: dict[str, Any]) -> Any:
    if len(settings.api_bases) > 1:
        return await router_for(litellm, settings.model, settings.api_bases).acompletion(**kwargs)
    return await litellm.acompletion(**kwargs)


@asynccontextmanager
async def _no_limits(_model: str) -> AsyncIterator[None]:
    yield None


async def complete(settings: CallSettings, messages: list[dict], context: Optional[dict] = None) -> CallResult:
    """Call the model; retry transient faults with exponential backoff (honouring retry-after).

    Inside a sweep (engine.limits.use_limits) the call waits for a slot of its model, a rate limit
    pauses all of that model's calls, and a spent budget refuses the call (BudgetSpent)."""
    litellm = _litellm()
    from s3gym_tui.engine.limits import BudgetSpent, current_limits
    from s3gym_tui.providers import is_builtin

    limits = current_limits()
    slot = limits.slot if limits is not None else _no_limits

    kwargs: dict[str, Any] = {
        "model": settings.model, "messages": messages, "temperature": settings.temperature,
        "max_tokens": settings.max_tokens, "timeout": settings.timeout_s, "num_retries": 0,
    }
    if len(settings.api_bases) == 1:
        kwargs["api_base"] = settings.api_bases[0]
    elif settings.api_base and not settings.api_bases:
        kwargs["api_base"] = settings.api_base
    if settings.seed is not None:
        kwargs["seed"] = settings.seed
    if context is not None and is_builtin(settings.model):
        kwargs["extra_body"] = {"s3gym": context}
    transient = _transient_types(litellm)
    faults: list[str] = []
    for attempt in range(settings.max_retries + 1):
        if "extra_body" in kwargs:  # built-in models learn the attempt (the fault schedule uses it)
            kwargs["extra_body"] = {"s3gym": {**context, "attempt": attempt}}
        started = time.perf_counter()
        try:
            async with slot(settings.model):
                started = time.perf_counter()  # the latency excludes waiting for a slot
                # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the reply and drops
                # a cancel (a Ctrl-C, a stopped episode) that arrives as the reply does, and the run
                # went on to its end (seen in CI). A timeout still raises TimeoutError.
                async with asyncio.timeout(settings.timeout_s + 5):
                    response = await _acompletion(litellm, settings, kwargs)
        except BudgetSpent:
            raise
        except transient as exc:
            faults.append(_fault_name(exc))
            if attempt >= settings.max_retries:
                raise ModelUnavailable(f"{settings.model}: {one_line(exc)} (after {attempt + 1} attempts)") from exc
            delay = _retry_after(exc)
            if delay is None:
                delay = min(settings.backoff_cap_s, settings.backoff_base_s * (2 ** attempt))
            delay = max(0.0, min(delay, settings.backoff_cap_s))
            if limits is not None and faults[-1] == "rate_limit":
                limits.gate(settings.model).pause(delay)  # every call of this model backs off
            await asyncio.sleep(delay)
            continue
        except Exception as exc:  # auth errors, unknown model, bad request: not worth retrying
            raise ModelUnavailable(f"{settings.model}: {one_line(exc)}") from exc
        latency = (time.perf_counter() - started) * 1000
        result = _result(litellm, response, latency, tuple(faults))
        if limits is not None:
            limits.record(result.cost)
        return result
    raise ModelUnavailable(f"{settings.model}: no attempt was made")  # pragma: no cover


def _result(litellm, response: Any, latency_ms: float, faults: tuple[str, ...]) -> CallResult:
    try:
        content = response.choices[0].message.content
    except (AttributeError, IndexError, KeyError):
        content = None
    reply = content if isinstance(content, str) else ""
    clean = reply.encode("utf-8", errors="replace").decode("utf-8", errors="replace")
    if clean != reply:  # lone surrogates: not storable, replaced by '?', and noted on the step
        faults = faults + ("invalid UTF-8 in the reply (replaced)",)
    if has_secret(clean):  # a provider echoing a key: it never reaches the agent, store or screen
        clean = redact_values(clean)
        faults = faults + ("a secret in the reply (redacted)",)
    reply = clean
    usage = getattr(response, "usage", None)
    found: list[str] = []
    tokens_in = _count(getattr(usage, "prompt_tokens", 0), "prompt_tokens", found)
    tokens_out = _count(getattr(usage, "completion_tokens", 0), "completion_tokens", found)
    try:
        cost = float(litellm.completion_cost(completion_response=response))
    except Exception:
        cost = None
    if cost is not None and (not math.isfinite(cost) or cost < 0):
        found.append(f"impossible cost ({cost}); stored as unknown")
        cost = None
    return CallResult(reply, tokens_in, tokens_out, latency_ms, cost, faults + tuple(found))
