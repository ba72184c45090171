"""The agent's budget: model calls, tokens, dollars, wall time. Every decision is charged, a bad one too."""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any, Mapping, Optional

from s3gym_tui.models import INT64_MAX

KEYS = ("calls", "tokens", "dollars", "seconds")


@dataclass(frozen=True)
class Budget:
    calls: Optional[int] = 1000  # model calls: the agent's turns and every call of the episodes it plays
    tokens: Optional[int] = 2_000_000
    dollars: Optional[float] = None  # None: no limit (a call whose price is unknown costs nothing known)
    seconds: Optional[float] = 1800.0  # wall time of the agent's work (hidden evaluation excluded)
    decisions: Optional[int] = 30  # tool calls, bad ones included

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Budget":
        return cls(**{k: data[k] for k in asdict(cls()) if k in data})

    @classmethod
    def parse(cls, text: str) -> "Budget":
        """`calls=40,tokens=100000,dollars=0.5,seconds=600,decisions=20` (any subset; `none` lifts one)."""
        fields: dict[str, Any] = {}
        for part in filter(None, (p.strip() for p in text.split(","))):
            key, sep, value = part.partition("=")
            key = key.strip()
            if not sep or key not in asdict(cls()):
                raise ValueError(f"budget part {part!r}: use KEY=VALUE with KEY one of "
                                 f"{', '.join(asdict(cls()))}")
            value = value.strip().lower()
            if value in ("none", "inf", ""):
                fields[key] = None
                continue
            try:
                number = float(value)
            except ValueError:
                raise ValueError(f"budget {key}={value!r} is not a number") from None
            if not math.isfinite(number) or number > INT64_MAX:  # (1e400 is inf; `none` lifts a limit)
                raise ValueError(f"budget {key}={value!r} is out of range (at most {INT64_MAX:,}; none lifts it)")
            if number < 0:
                raise ValueError(f"budget {key} must not be negative")
            fields[key] = number if key in ("dollars", "seconds") else int(number)
        return cls(**fields)


@dataclass
class Usage:
    calls: int = 0
    tokens: int = 0
    dollars: float = 0.0
    unpriced_calls: int = 0  # calls whose price is unknown: `dollars` is then a lower bound
    seconds: float = 0.0
    decisions: int = 0

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> "Usage":
        return cls(**{k: data[k] for k in asdict(cls()) if k in data})

    def charge(self, calls: int, tokens: int, cost: Optional[float], seconds: float) -> None:
        self.calls += calls
        self.tokens += tokens
        if cost is None:
            self.unpriced_calls += calls
        else:
            self.dollars += cost
        self.seconds += seconds
        self.decisions += 1

    def spent(self, budget: Budget) -> Optional[str]:
        """What is spent (a one-line reason), None while every limit holds."""
        for key in ("calls", "tokens", "dollars", "seconds", "decisions"):
            limit = getattr(budget, key)
            if limit is not None and getattr(self, key) >= limit:
                return f"{key} budget spent ({getattr(self, key):g} of {limit:g})"
        return None

    def left(self, budget: Budget) -> dict[str, Optional[float]]:
        return {k: (None if getattr(budget, k) is None else max(0, getattr(budget, k) - getattr(self, k)))
                for k in ("calls", "tokens", "dollars", "seconds", "decisions")}
