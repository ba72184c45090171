"""One model call through litellm.acompletion, with retries, backoff and per-call accounting."""

from __future__ import annotations

import asyncio
import math
import os
import random
import re
import time
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Callable, Optional

from s3gym_tui.engine.call_progress import CallProgress, bind, unbind
from s3gym_tui.engine.model_errors import ModelUnavailable  # noqa: F401  (re-exported: its historical home)
from s3gym_tui.engine.prompt_cache import cache_kwargs, cached_usage
from s3gym_tui.secrets import REDACTED, has_secret, redact_values  # noqa: F401  (REDACTED re-exported)

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


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
    decoding: str = "free"  # "grammar": the action grammar in the server's own form (engine.decoding)
    model_args: tuple[tuple[str, Any], ...] = ()  # provider arguments passed through litellm
    context_tokens: Optional[int] = None  # the context the server stated (engine.servers)
    server_kind: Optional[str] = None  # engine.servers kinds; None: from the provider (or asked once)


@dataclass(frozen=True)
class CallResult:
    reply: str
    tokens_in: int = 0
    tokens_out: int = 0
    latency_ms: float = 0.0
    cost: Optional[float] = None
    faults: tuple[str, ...] = field(default_factory=tuple)  # transient faults survived by retrying
    # the model's own reply when the provider repaired it (`reply` is then the repaired one the game
    # acts on); only the `trained` provider repairs, and only when asked (model .../repair)
    original_reply: Optional[str] = None
    # input tokens the provider read from / wrote to its prompt cache (part of tokens_in; None:
    # the provider did not say), see engine.prompt_cache
    tokens_cached: Optional[int] = None
    tokens_cache_write: Optional[int] = None


def _litellm():
    from s3gym_tui.providers import configured_litellm

    return configured_litellm()


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
_NO_PRICE_AT_ZERO = {"input_cost_per_token": 0.0, "output_cost_per_token": 0.0}


def router_for(litellm, model: str, api_bases: tuple[str, ...]):
    """litellm's Router over the model's replicas (one deployment per api base), made once.
    It spreads calls (simple shuffle), cools down a failing replica and, on a retryable failure,
    re-picks another one; retries and backoff stay with `complete`."""
    key = (model, tuple(api_bases))
    if key not in _ROUTERS:
        # A model litellm has no price for: its replicas priced at $0 through litellm's own per-deployment
        # pricing. Else litellm, finding no rate for the call, walks the Router's whole deployment entry for
        # a rate that was not applied on every call (its zero-cost diagnostic: 60% of a routed call's
        # CPU, docs/benchmarks.md). The calls stay unpriced: `has_price` is asked first (and kept).
        price = {} if has_price(litellm, model) else dict(_NO_PRICE_AT_ZERO)
        _ROUTERS[key] = litellm.Router(
            model_list=[{"model_name": model, "litellm_params": {"model": model, "api_base": base, **price}}
                        for base in api_bases],
            num_retries=0, enable_weighted_failover=True, cooldown_time=5, allowed_fails=2)
    return _ROUTERS[key]


async def _acompletion(litellm, settings: CallSettings, kwargs: dict[str, Any],
                       faults: Optional[list[str]] = None) -> Any:
    if len(settings.api_bases) > 1:
        return await _routed(litellm, settings, kwargs, faults)
    return await litellm.acompletion(**kwargs)


@asynccontextmanager
async def _no_limits(_model: str) -> AsyncIterator[None]:
    yield None


_NOT_STREAMED: set[str] = set()  # models whose streamed call failed once: asked whole from then on


async def _streamed(litellm, kwargs: dict[str, Any], on_tokens: Callable[[int], None],
                    progress: CallProgress) -> Any:
    """The call streamed (litellm's stream=True): `on_tokens(n)` after each piece of the reply (n
    content chunks so far: one token each on OpenAI-compatible servers), then the whole response
    rebuilt by litellm (reply, usage, cost) as a call that was not streamed returns it."""
    stream = await litellm.acompletion(**kwargs, stream=True, stream_options={"include_usage": True})
    chunks: list[Any] = []
    pieces = 0
    async for chunk in stream:
        chunks.append(chunk)
        progress.sign()  # any chunk is a sign of life
        choices = getattr(chunk, "choices", None) or []
        if choices and getattr(getattr(choices[0], "delta", None), "content", None):
            pieces += 1
            progress.writing(pieces, streamed=True)
            on_tokens(pieces)
    return litellm.stream_chunk_builder(chunks, messages=kwargs["messages"])


def _ignored(_count: int) -> None:
    """An on_tokens that nobody listens to (the call's progress is told)."""


@asynccontextmanager
async def silence_limit(progress: CallProgress, limit_s: float) -> AsyncIterator[None]:
    """asyncio.timeout counted from the call's last sign of progress, not from its start: a call
    that reads its prompt or writes tokens (as its provider reports: engine.call_progress) is not
    timed out however long it takes; one silent for `limit_s` raises TimeoutError."""
    loop = asyncio.get_running_loop()

    def deadline() -> float:
        return loop.time() + limit_s - progress.silent_for()

    # asyncio.timeout, not wait_for: on Python 3.11 wait_for returns the reply and drops a cancel (a
    # Ctrl-C, a stopped episode) that arrives as the reply does, and the run went on to its end (seen
    # in CI). The deadline moves on with each sign of progress.
    every = max(0.01, min(0.5, limit_s / 4))
    async with asyncio.timeout_at(deadline()) as scope:
        def follow() -> None:
            nonlocal later
            if not scope.expired():
                scope.reschedule(deadline())
                later = loop.call_later(every, follow)

        later = loop.call_later(every, follow)
        try:
            yield
        finally:
            later.cancel()


async def complete(settings: CallSettings, messages: list[dict], context: Optional[dict] = None,
                   on_tokens: Optional[Callable[[int], None]] = None,
                   progress: Optional[CallProgress] = None) -> CallResult:
    """Call the model; retry transient faults with exponential backoff (honouring retry-after).

    The call times out after `settings.timeout_s` of silence (no sign of progress: see
    engine.call_progress), not of total time. With `progress` or `on_tokens` (a person is
    watching) a provider reached over HTTP is streamed: `on_tokens(n)` and `progress` are told the
    tokens so far (and `progress` the call's retries and why); built-in models, replicas behind a
    Router and a model whose streamed call failed once are called whole (the embedded model
    reports the prompt read and the tokens written itself).

    What a server teaches in an error is learnt once and the call made again without spending a
    retry: its context (max tokens fitted) and the grammar form it takes (engine.decoding).

    Inside a sweep (engine.limits.use_limits) the call waits for a slot of its model, a rate limit
    pauses all of that model's calls, and a spent budget refuses the call (BudgetSpent)."""
    litellm = _litellm()
    from s3gym_tui.engine.limits import BudgetSpent, current_limits
    from s3gym_tui.providers import is_builtin

    limits = current_limits()
    slot = limits.slot if limits is not None else _no_limits
    watched = progress is not None or on_tokens is not None
    progress = progress if progress is not None else CallProgress()

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
    provider = named_provider(litellm, settings.model) if len(settings.api_bases) <= 1 else None
    if provider is not None:
        kwargs["custom_llm_provider"] = provider
    builtin = is_builtin(settings.model)
    form = None if builtin else await _grammar_form(settings, context)
    if context is not None and builtin:
        kwargs["extra_body"] = {"s3gym": context}
    elif not builtin:
        kwargs = await _served_kwargs(settings, messages, context, kwargs, form)
        if _first_base(settings):
            enter_unpriced(litellm, settings.model)
    kwargs.update(cache_kwargs(settings.model, messages))  # marks the stable prefix where needed
    pool = limits.pool.session() if limits is not None and limits.pool and "api_base" in kwargs else None
    if pool is not None:  # the sweep's bounded pool of connections to its servers (engine.pools)
        kwargs["shared_session"] = pool
    transient = _transient_types(litellm)
    faults: list[str] = []
    refitted = False  # one more attempt after fitting to a context the server stated in an error
    forms_tried = {form} if form else set()  # grammar forms the server refused (one more attempt each)
    stream = watched and not builtin and len(settings.api_bases) <= 1
    retries = 0  # transient faults retried (at most settings.max_retries)
    attempt = 0
    token = bind(progress)
    try:
        while True:
            if attempt:
                progress.retrying(faults[-1] if faults else "a failed attempt")
            streaming = stream and settings.model not in _NOT_STREAMED
            if builtin and "extra_body" in kwargs:  # built-in models learn the attempt (the fault schedule uses it)
                kwargs["extra_body"] = {"s3gym": {**context, "attempt": attempt}}
            attempt += 1
            started = time.perf_counter()
            try:
                async with slot(settings.model):
                    started = time.perf_counter()  # the latency excludes waiting for a slot
                    progress.sign()
                    async with silence_limit(progress, settings.timeout_s + 5):
                        if streaming:
                            response = await _streamed(litellm, kwargs, on_tokens or _ignored, progress)
                        else:
                            response = await _acompletion(litellm, settings, kwargs, faults)
            except BudgetSpent:
                raise
            except Exception as exc:
                taught = _taught_form(settings, kwargs, exc, form, forms_tried, context)
                if taught is not None:  # the server refused the grammar's form: the next one, once
                    kwargs, form, note = taught
                    forms_tried.add(form)
                    faults.append(note)
                    continue
                if not isinstance(exc, transient):  # auth errors, unknown model, bad request: not retried
                    if streaming:  # a server that does not stream (or streams badly): asked whole, at once
                        _NOT_STREAMED.add(settings.model)  # (no retry is spent on it)
                        faults.append("streaming refused (asked whole)")
                        continue
                    fitted = None if refitted else _refit_after_overflow(settings, messages, kwargs, exc)
                    if fitted is not None:  # the server stated its context in the error: fitted once, again
                        kwargs, note = fitted
                        faults.append(note)
                        refitted = True
                        continue
                    raise ModelUnavailable(f"{settings.model}: {one_line(exc)}{_forms_note(forms_tried)}") from exc
                kind = _fault_name(exc)
                if type(exc) is TimeoutError:  # the silence limit above, not the provider's own timeout
                    kind = f"timeout: no progress for {settings.timeout_s:g} s"
                if not (faults and faults[-1].startswith(f"{kind} (replica")):  # else the Router's callback
                    faults.append(kind + _replica_note(settings, exc))  # has named it (engine.llm._routed)
                if retries >= settings.max_retries:
                    raise ModelUnavailable(f"{settings.model}: {one_line(exc) if str(exc) else kind} "
                                           f"(after {attempt} attempts)") from exc
                retries += 1
                delay = _retry_after(exc)
                if delay is None:
                    delay = backoff_delay(retries - 1, settings.backoff_base_s, settings.backoff_cap_s)
                delay = max(0.0, min(delay, settings.backoff_cap_s))
                if limits is not None and kind == "rate_limit":
                    limits.gate(settings.model).pause(delay)  # every call of this model backs off
                await asyncio.sleep(delay)
                continue
            latency = (time.perf_counter() - started) * 1000
            faults += _failover_note(settings, faults, response)
            result = _result(litellm, response, latency, tuple(faults), settings.model)
            if limits is not None:
                limits.record(result.cost)
            return result
    finally:
        unbind(token)


def _result(litellm, response: Any, latency_ms: float, faults: tuple[str, ...], model: str = "") -> CallResult:
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
    original = _original_reply(response)
    usage = getattr(response, "usage", None)
    found: list[str] = []
    tokens_in = _count(getattr(usage, "prompt_tokens", 0), "prompt_tokens", found)
    tokens_out = _count(getattr(usage, "completion_tokens", 0), "completion_tokens", found)
    cached, cache_write = cached_usage(usage, tokens_in, found)
    cost = _cost(litellm, response) if not model or has_price(litellm, model) else None
    if cost is not None and (not math.isfinite(cost) or cost < 0):
        found.append(f"impossible cost ({cost}); stored as unknown")
        cost = None
    return CallResult(reply, tokens_in, tokens_out, latency_ms, cost, faults + tuple(found), original_reply=original,
                      tokens_cached=cached, tokens_cache_write=cache_write)


_PRICE_FIELDS = ("input_cost_per_token", "output_cost_per_token", "input_cost_per_character",
                 "output_cost_per_character", "input_cost_per_second", "output_cost_per_second")
_HAS_PRICE: dict[str, bool] = {}


def has_price(litellm, model: str) -> bool:
    """Whether litellm's price map gives the model a price (asked once per model). litellm's Router
    enters the model of its replicas with no price, and then prices its calls at $0: such a call is
    unpriced, not free (the built-in models are entered at $0 on purpose: they are free)."""
    if model not in _HAS_PRICE:
        try:  # the entry as the price map holds it (get_model_info fills a missing price with 0)
            entry = litellm.model_cost.get(litellm.get_model_info(model).get("key") or model) or {}
        except Exception:  # noqa: BLE001 - litellm raises plain Exception for a model it does not know
            entry = {}
        _HAS_PRICE[model] = any(entry.get(name) is not None for name in _PRICE_FIELDS)
    return _HAS_PRICE[model]


_NAMED_PROVIDER: dict[str, Optional[str]] = {}


def named_provider(litellm, model: str) -> Optional[str]:
    """The provider the model's name begins with ('hosted_vllm' for 'hosted_vllm/qwen'), when litellm
    resolves the name to it and to the same model whether told the provider or not (asked once per
    model); None otherwise (no prefix, a name litellm re-routes: azure's non-OpenAI models, cohere's chat).
    Given to litellm.acompletion as `custom_llm_provider`, it skips litellm's resolution of the
    provider from every call's arguments (a validation of all of them: ~3% of its call)."""
    if model not in _NAMED_PROVIDER:
        prefix, _, rest = model.partition("/")
        found = None
        if rest:
            try:
                guessed = litellm.get_llm_provider(model=model)[:2]
                told = litellm.get_llm_provider(model=model, custom_llm_provider=prefix)[:2]
            except Exception:  # noqa: BLE001 - litellm raises plain Exception for a provider it does not know
                guessed = told = None
            found = prefix if guessed == told == (rest, prefix) else None
        _NAMED_PROVIDER[model] = found
    return _NAMED_PROVIDER[model]


_ENTERED: set[str] = set()


def enter_unpriced(litellm, model: str) -> None:
    """Enter a served model litellm has no price for in its model map, once, with no price
    (litellm.register_model, as its Router does for its replicas). Otherwise litellm searches its
    whole price map and its generalisations for the unknown name on every call (pricing the
    response, then a zero-cost diagnostic): a third of its CPU per call against an instant server
    (docs/benchmarks.md). Its calls stay unpriced: `has_price` was asked first and an entry with
    no price is not a price."""
    if model in _ENTERED:
        return
    _ENTERED.add(model)
    provider = model.partition("/")[0] if "/" in model else ""
    if not provider or has_price(litellm, model) or model in litellm.model_cost:
        return
    litellm.register_model({model: {"litellm_provider": provider, "mode": "chat"}})


def _cost(litellm, response: Any) -> Optional[float]:
    """The call's cost from litellm's price map, None when it has no price for the model. litellm
    prices every response as it returns it (`_hidden_params["response_cost"]`, None when unpriced):
    that figure is taken, not computed a second time; a response it did not price (a streamed one,
    rebuilt from its chunks) is priced here, once."""
    hidden = getattr(response, "_hidden_params", None)
    try:
        if isinstance(hidden, dict) and "response_cost" in hidden:
            stamped = hidden["response_cost"]
            return None if stamped is None else float(stamped)
        return float(litellm.completion_cost(completion_response=response))
    except Exception:  # noqa: BLE001 - litellm raises plain Exception for a model it cannot price
        return None


# ----- calm retries ------------------------------------------------------------------------------
def backoff_delay(attempt: int, base_s: float, cap_s: float, rng: random.Random | None = None) -> float:
    """Full jitter: a random delay between 0 and base * 2**attempt (capped), so that calls which
    failed together do not come back together (a fixed exponential brings them back in bursts)."""
    ceiling = min(cap_s, base_s * (2 ** min(attempt, 30)))
    return (rng or random).uniform(0.0, max(0.0, ceiling))


# ----- replicas: which one failed, which one answered -----------------------------------------------
# The Router re-picks another replica itself when one fails (enable_weighted_failover), so the
# call succeeds and the failure never reaches `complete`: litellm's failure callback (a public
# CustomLogger hook) reports it, tagged with the call through the request's metadata.
_REPLICA_FAILURES: dict[str, list[str]] = {}
_CONNECTION_LOST = re.compile(r"cannot connect|connect call failed|connection (?:error|refused|reset)|"
                              r"server disconnected", re.IGNORECASE)
_WATCH: list[Any] = []


def _replica_watch(litellm) -> None:
    """Register (once) the callback that records which replica failed, with the fault kind."""
    if _WATCH:
        return
    from litellm.integrations.custom_logger import CustomLogger

    class ReplicaWatch(CustomLogger):
        def _record(self, kwargs: dict) -> None:
            params = kwargs.get("litellm_params") or {}
            call = (params.get("metadata") or {}).get("s3gym_call")
            if call in _REPLICA_FAILURES:
                exc = kwargs.get("exception")
                kind = _fault_name(exc) if isinstance(exc, BaseException) else "failed"
                if kind == "server_error" and _CONNECTION_LOST.search(str(exc)):
                    kind = "connection"  # litellm maps a refused or dropped connection to a server error
                host = _host(params.get("api_base") or "")
                _REPLICA_FAILURES[call].append(f"{kind} (replica {host})" if host else f"{kind} (replica)")

        async def async_log_failure_event(self, kwargs, response_obj, start_time, end_time):
            self._record(kwargs)

        def log_failure_event(self, kwargs, response_obj, start_time, end_time):
            self._record(kwargs)

    watch = ReplicaWatch()
    _WATCH.append(watch)
    litellm.callbacks = list(litellm.callbacks or []) + [watch]


async def _routed(litellm, settings: CallSettings, kwargs: dict[str, Any], faults: Optional[list[str]]) -> Any:
    """One call through the replicas' Router; the replicas that failed on the way go into `faults`."""
    import uuid

    _replica_watch(litellm)
    call = uuid.uuid4().hex
    _REPLICA_FAILURES[call] = []
    metadata = {**(kwargs.get("metadata") or {}), "s3gym_call": call}
    try:
        return await router_for(litellm, settings.model, settings.api_bases).acompletion(
            **{**kwargs, "metadata": metadata})
    finally:
        await asyncio.sleep(0)  # a failure callback scheduled as a task runs first
        failed = _REPLICA_FAILURES.pop(call, [])
        if faults is not None:
            faults.extend(failed)


def _host(url: Any) -> str:
    from urllib.parse import urlsplit

    try:
        return urlsplit(str(url)).netloc.rsplit("@", 1)[-1] or ""
    except ValueError:
        return ""


def _replica_of(exc: BaseException) -> str:
    """The api base a failed call went to (litellm keeps it on the exception), as host:port."""
    for holder in (exc, getattr(exc, "__cause__", None), getattr(exc, "request", None)):
        if holder is None:
            continue
        for name in ("api_base", "url"):
            try:
                host = _host(getattr(holder, name, None) or "")
            except Exception:  # noqa: BLE001 - an httpx request without a url raises
                host = ""
            if host:
                return host
    match = re.search(r"api_base[=:]\s*['\"]?(https?://[^\s'\",)]+)", str(exc))
    return _host(match.group(1)) if match else ""


def _replica_note(settings: CallSettings, exc: BaseException) -> str:
    """` (replica host:port)` for a fault of a model served by several replicas."""
    if len(settings.api_bases) < 2:
        return ""
    host = _replica_of(exc)
    return f" (replica {host})" if host else " (replica)"


def _failover_note(settings: CallSettings, faults: list[str], response: Any) -> list[str]:
    """`failover to host:port` when a replica failed during this call and another one answered."""
    if len(settings.api_bases) < 2 or not any("(replica" in f for f in faults):
        return []
    hidden = getattr(response, "_hidden_params", None) or {}
    host = _host(hidden.get("api_base") or "") if isinstance(hidden, dict) else ""
    return [f"failover to {host}" if host else "failover to another replica"]


# ----- served models: decoding, model arguments, the server's context ------------------------------
async def _served_kwargs(settings: CallSettings, messages: list[dict], context: Optional[dict],
                         kwargs: dict[str, Any], form: Optional[str]) -> dict[str, Any]:
    """The call's arguments for a served model: the action grammar in `form` (the server's own,
    see _grammar_form), the model arguments, max tokens fitted to the context the server stated
    (or taught), kept to a bounded default while it is unknown."""
    from s3gym_tui.engine import decoding
    from s3gym_tui.engine.servers import reply_cap

    out = decoding.merge_params(kwargs, dict(settings.model_args))
    if form is not None:
        out = decoding.merge_params(out, decoding.form_params(form, (context or {}).get("grammar")))
    context_tokens = settings.context_tokens or await asyncio.to_thread(_described_context, settings)
    if context_tokens:
        out["max_tokens"] = _fitted_max_tokens(settings.model, messages, context_tokens, out["max_tokens"])
    elif _first_base(settings):  # a server that has not stated nor taught its context: a bounded reply
        out["max_tokens"] = reply_cap(int(out["max_tokens"]), None)
    return out


async def _grammar_form(settings: CallSettings, context: Optional[dict]) -> Optional[str]:
    """The form the action grammar goes in (engine.decoding) for this call: None unless decoding
    is 'grammar' and the call is an action; the form the server taught, else its kind's."""
    from s3gym_tui.engine import decoding
    from s3gym_tui.engine.servers import known

    if settings.decoding != "grammar" or context is None or context.get("task") != "act":
        return None
    info = known(settings.model, _first_base(settings))
    if info is not None and info.grammar_form:
        return info.grammar_form
    kind = settings.server_kind or await asyncio.to_thread(_server_kind, settings)
    return decoding.form_of(kind)


def _taught_form(settings: CallSettings, kwargs: dict[str, Any], exc: BaseException, form: Optional[str],
                 tried: set[str], context: Optional[dict]) -> Optional[tuple[dict[str, Any], str, str]]:
    """(kwargs, form, fault note) for one more attempt when the server refused the grammar's form
    (its error names the field it came in): the next form not tried, remembered for the server's
    later calls (engine.servers.learn_grammar_form); None otherwise."""
    from s3gym_tui.engine import decoding
    from s3gym_tui.engine.servers import known, learn_grammar_form

    text = str(exc)
    if form is None or _fault_name(exc) in ("timeout", "rate_limit", "connection") or len(text) > 20_000:
        return None
    if not decoding.refused(form, text):
        return None
    following = decoding.next_form(tried)
    if following is None:
        return None
    info = learn_grammar_form(settings.model, _first_base(settings), following)
    kind = settings.server_kind or (known(settings.model, _first_base(settings)) or info).kind
    out = {k: v for k, v in kwargs.items() if k != "response_format"}
    if isinstance(out.get("extra_body"), dict):
        out["extra_body"] = {k: v for k, v in out["extra_body"].items() if k not in decoding.FORM_NAMES}
    out = decoding.merge_params(out, decoding.form_params(following, (context or {}).get("grammar")))
    return (out, following, f"the server refused the grammar as {decoding.grammar_form(kind, form)}: "
                            f"sent as {decoding.grammar_form(kind, following)} from now on")


def _forms_note(tried: set[str]) -> str:
    """` (grammar forms the server refused: ...)` when more than one was tried, else ''."""
    if len(tried) < 2:
        return ""
    from s3gym_tui.engine.decoding import FALLBACK_ORDER

    return f" (it refused the grammar in every form: {', '.join(f for f in FALLBACK_ORDER if f in tried)})"


def _first_base(settings: CallSettings) -> Optional[str]:
    return settings.api_bases[0] if settings.api_bases else settings.api_base


def _server_kind(settings: CallSettings) -> str:
    """The kind of the model's server when the run did not record it: asked once, then cached."""
    from s3gym_tui.engine.servers import describe

    return describe(settings.model, _first_base(settings)).kind


def _described_context(settings: CallSettings) -> Optional[int]:
    """The context the model's server states (asked once per process, then cached; a context
    learnt from an error replaces it): a call made outside a run (hand play) is fitted too."""
    from s3gym_tui.engine.servers import describe

    return describe(settings.model, _first_base(settings)).context


def _prompt_tokens(model: str, messages: list[dict]) -> int:
    """litellm's count of the prompt for the model (about four characters a token when it cannot)."""
    text = [str(m.get("content") or "") for m in messages]
    try:
        return int(_litellm().token_counter(model=model, text="\n".join(text))) + 8 * len(messages)
    except Exception:  # noqa: BLE001 - a tokenizer litellm would have to download
        return sum(len(t) for t in text) // 4 + 8 * len(messages)


def _fitted_max_tokens(model: str, messages: list[dict], context_tokens: int, max_tokens: int) -> int:
    """Max tokens so that prompt and reply fit the context (a tenth of margin: the server's own
    tokenizer may count more); unchanged when the prompt alone fills it (the server then says so)."""
    chars = sum(len(str(m.get("content") or "")) for m in messages)
    if chars // 2 + 16 * len(messages) + max_tokens + 16 < context_tokens:
        return max_tokens  # fits even at two characters a token: not worth counting
    room = context_tokens - int(_prompt_tokens(model, messages) * 1.1) - 16
    return min(max_tokens, room) if room >= 16 else max_tokens


def _refit_after_overflow(settings: CallSettings, messages: list[dict], kwargs: dict[str, Any],
                          exc: BaseException) -> Optional[tuple[dict[str, Any], str]]:
    """(kwargs, fault note) for one more attempt when the server refused the call for its context
    and stated its size (the first call teaches it: later calls fit up front), else None."""
    from s3gym_tui.engine.servers import context_in_error, learn_context

    if len(str(exc)) > 20_000:
        return None
    stated = context_in_error(str(exc))
    if not stated:
        return None
    learn_context(settings.model, _first_base(settings), stated, "stated in an error")
    fitted = _fitted_max_tokens(settings.model, messages, stated, int(kwargs.get("max_tokens") or 0))
    if fitted >= int(kwargs.get("max_tokens") or 0):
        return None  # the prompt alone does not fit: nothing to fit
    return ({**kwargs, "max_tokens": fitted},
            f"the server's context is {stated:,} tokens: max tokens {kwargs.get('max_tokens'):,} -> {fitted:,}")


def _original_reply(response: Any) -> Optional[str]:
    """The model's own reply a built-in provider replaced by a repaired one (its s3gym facts say
    `repaired`), made storable and free of secrets like the reply; None when nothing was repaired."""
    from s3gym_tui.providers._common import CONTEXT_KEY

    hidden = getattr(response, "_hidden_params", None)
    facts = hidden.get(CONTEXT_KEY) if isinstance(hidden, dict) else None
    if not isinstance(facts, dict) or not facts.get("repaired"):
        return None
    text = str(facts.get("free_reply") or "")
    text = text.encode("utf-8", errors="replace").decode("utf-8", errors="replace")
    return redact_values(text) if has_secret(text) else text
