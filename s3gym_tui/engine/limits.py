"""Shared limits for the model calls of many concurrent runs (a sweep): at most N calls in flight
per model, a rate limit seen by one call pauses every call of that model (backoff), and a spending
budget that refuses new calls once spent. Active only inside `use_limits(...)`; outside it (one
run, the app) calls go straight through.

This limits calls; it does not schedule them across servers (several api bases of a model are
spread by litellm's Router, see engine.llm).
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from contextlib import asynccontextmanager, contextmanager
from contextvars import ContextVar
from dataclasses import dataclass, field
from typing import Any, AsyncIterator, Iterator, Optional

from s3gym_tui.engine.model_errors import ModelUnavailable

MAX_PAUSE_S = 300.0  # a rate-limit pause longer than this is capped
MAX_STAGGER_S = 10.0  # calls released by a pause wake over at most this many seconds


class BudgetSpent(ModelUnavailable):
    """The spending budget is used up: no new model call is made (runs stop cleanly, resumable)."""


@dataclass
class ModelGate:
    """In-flight limit and shared backoff of one model's calls."""

    limit: int
    semaphore: asyncio.Semaphore = field(init=False)
    paused_until: float = 0.0
    in_flight: int = 0
    peak: int = 0
    calls: int = 0
    pauses: int = 0

    def __post_init__(self) -> None:
        self.semaphore = asyncio.Semaphore(self.limit)

    pause_s: float = 0.0  # the length of the latest pause: the window its waiting calls wake over

    async def wait_ready(self) -> None:
        """Wait out a pause. The calls that waited wake at spread times (each a random moment in a
        window as long as the pause, at most MAX_STAGGER_S), not all at once: 96 calls released
        together would hit the server together and bring the rate limit straight back."""
        while (delay := self.paused_until - time.monotonic()) > 0:
            await asyncio.sleep(delay + random.uniform(0.0, min(self.pause_s, MAX_STAGGER_S)))

    def pause(self, seconds: Optional[float]) -> None:
        """Hold back every call of this model for `seconds` (a server's retry-after)."""
        if seconds is None or not math.isfinite(seconds) or seconds <= 0:
            return
        self.pauses += 1
        self.pause_s = min(seconds, MAX_PAUSE_S)
        self.paused_until = max(self.paused_until, time.monotonic() + self.pause_s)


@dataclass
class CallLimits:
    """The limits of one sweep session: per-model gates, the budget and what was spent."""

    concurrency: int = 4  # calls in flight per model
    budget_usd: Optional[float] = None
    spent_usd: float = 0.0  # stored spend at the start plus every call made since
    unpriced_calls: int = 0  # calls whose cost litellm does not know (not counted in spent)
    gates: dict[str, ModelGate] = field(default_factory=dict)
    pool: Optional[Any] = None  # engine.pools.ConnectionPool: the sweep's connections to its servers

    def gate(self, model: str) -> ModelGate:
        if model not in self.gates:
            self.gates[model] = ModelGate(self.concurrency)
        return self.gates[model]

    @property
    def budget_left(self) -> Optional[float]:
        return None if self.budget_usd is None else self.budget_usd - self.spent_usd

    def check_budget(self, model: str) -> None:
        if self.budget_usd is not None and self.spent_usd >= self.budget_usd:
            raise BudgetSpent(f"{model}: the sweep's budget of ${self.budget_usd:.2f} is spent "
                              f"(${self.spent_usd:.4f}); no new model calls")

    def record(self, cost: Optional[float]) -> None:
        if cost is None or not math.isfinite(cost) or cost < 0:
            self.unpriced_calls += 1
        else:
            self.spent_usd += cost

    @asynccontextmanager
    async def slot(self, model: str) -> AsyncIterator[ModelGate]:
        """Wait for the model's pause to end and a free slot; the budget is checked on entry."""
        gate = self.gate(model)
        self.check_budget(model)
        await gate.wait_ready()
        async with gate.semaphore:
            await gate.wait_ready()  # a pause may have started while this call queued
            self.check_budget(model)
            gate.in_flight += 1
            gate.peak = max(gate.peak, gate.in_flight)
            gate.calls += 1
            try:
                yield gate
            finally:
                gate.in_flight -= 1


_LIMITS: ContextVar[Optional[CallLimits]] = ContextVar("s3gym_call_limits", default=None)


def current_limits() -> Optional[CallLimits]:
    return _LIMITS.get()


@contextmanager
def use_limits(limits: CallLimits) -> Iterator[CallLimits]:
    """Apply `limits` to every model call made in this context (tasks created in it inherit it)."""
    token = _LIMITS.set(limits)
    try:
        yield limits
    finally:
        _LIMITS.reset(token)
