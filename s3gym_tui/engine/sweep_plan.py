"""What a sweep will cost before it starts: runs, model calls, tokens and dollars (where litellm
knows the model's price). Upper bounds at the step caps, the history budget and the output cap,
plus a typical figure for replies of a usual length."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from s3gym_tui.engine.estimate import RunEstimate, estimate_run, price, price_cached
from s3gym_tui.engine.prompt_cache import cache_prices
from s3gym_tui.models import RunConfig


@dataclass(frozen=True)
class ModelEstimate:
    model: str
    runs: int
    calls: int
    tokens_in: int
    tokens_out: int
    tokens_out_typical: int
    cost_max: Optional[float]  # None: litellm knows no price for the model
    cost_typical: Optional[float]
    tokens_in_cached: int = 0
    # typical replies and the expected prompt cache: the lower bound beside cost_typical (no cache);
    # equal to it where litellm lists no cache price
    cost_typical_cached: Optional[float] = None


@dataclass(frozen=True)
class SweepPlan:
    runs: tuple[RunEstimate, ...]
    models: tuple[ModelEstimate, ...]

    @property
    def calls(self) -> int:
        return sum(m.calls for m in self.models)

    @property
    def tokens_in(self) -> int:
        return sum(m.tokens_in for m in self.models)

    @property
    def tokens_out(self) -> int:
        return sum(m.tokens_out for m in self.models)

    @property
    def unpriced(self) -> list[str]:
        return [m.model for m in self.models if m.cost_max is None]

    @property
    def cost_max(self) -> float:
        return sum(m.cost_max or 0.0 for m in self.models)

    @property
    def cost_typical(self) -> float:
        return sum(m.cost_typical or 0.0 for m in self.models)

    @property
    def cost_typical_cached(self) -> float:
        return sum(m.cost_typical_cached or 0.0 for m in self.models)


def plan(configs: Sequence[RunConfig]) -> SweepPlan:
    """Every run's estimate (engine.estimate, the one estimator) and their sums per model, priced once."""
    estimates = tuple(estimate_run(c) for c in configs)
    grouped: dict[str, list[RunEstimate]] = {}
    for estimate in estimates:
        grouped.setdefault(estimate.config.model, []).append(estimate)
    models = []
    for model, group in grouped.items():
        t_in = sum(e.input_tokens for e in group)
        t_out = sum(e.output_tokens_max for e in group)
        t_typ = sum(e.output_tokens_typical for e in group)
        t_cached = sum(e.input_tokens_cached for e in group)
        t_written = sum(e.input_tokens_cache_written for e in group)
        models.append(ModelEstimate(model, len(group), sum(e.calls for e in group), t_in, t_out, t_typ,
                                    price(model, t_in, t_out), price(model, t_in, t_typ),
                                    t_cached if cache_prices(model) else 0,
                                    price_cached(model, t_in, t_cached, t_written, t_typ)))
    return SweepPlan(estimates, tuple(models))
