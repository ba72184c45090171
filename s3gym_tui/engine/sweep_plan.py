"""What a sweep will cost before it starts: runs, model calls, tokens and dollars (where litellm
knows the model's price). Upper bounds at the step caps, the history budget and the output cap,
plus a typical figure for replies of a usual length."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional, Sequence

import s3gym_games as games
from s3gym_tui.engine.experience import effective_budget
from s3gym_tui.engine.prompt_cache import cache_prices, cached_cost, episode_cache, needs_marker
from s3gym_games.prompt import (SYSTEM_PROMPT, TurnRecord, build_messages, build_summary_messages,
                                      render_turns)
from s3gym_tui.engine.tokens import count_tokens
from s3gym_tui.models import RunConfig

TYPICAL_REPLY_TOKENS = 200  # a short reasoning and the answer line
SUMMARY_TOKENS = 400  # the three-part summary shown as Hint Messages


@dataclass(frozen=True)
class RunEstimate:
    config: RunConfig
    calls: int  # at most: every episode runs to its step cap
    tokens_in: int  # at most: step caps, the history budget filled as fast as the caps allow
    tokens_out: int  # at most: every reply at the output cap
    tokens_out_typical: int  # every reply TYPICAL_REPLY_TOKENS long
    tokens_in_cached: int = 0  # of tokens_in, read from the expected prompt cache (engine.prompt_cache)
    tokens_in_cache_written: int = 0  # of tokens_in, written to it (providers that charge for it)


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


@lru_cache(maxsize=256)
def _texts(game_name: str, mode: str, seed: int) -> tuple[int, tuple[str, ...], str]:
    """(step cap, the first prompt's parts, one remembered turn) of a game: made once per (game,
    mode, seed), however many runs and models of a sweep share them (the reference move that fills
    the turn can take a while, e.g. Trust's look-ahead)."""
    game = games.make(game_name, mode)
    game.reset(seed)
    move = games.reference_policy(game_name).act(game.view())
    parts = tuple(str(m["content"]) for m in build_messages(game, None, [], ""))
    turn = render_turns([TurnRecord(game.observation(), move.action, 1.0, "Feedback of the last action.")])
    return game.max_steps, parts, turn


def _shape(model: str, game_name: str, mode: str, seed: int) -> tuple[int, int, int]:
    """(step cap, tokens of the first prompt, tokens one remembered turn adds) for a game; each
    distinct text is counted once per model (engine.tokens caches the counts)."""
    cap, parts, turn = _texts(game_name, mode, seed)
    return cap, sum(count_tokens(model, part) for part in parts), count_tokens(model, turn)


def _episode_in(steps: int, base: int, turn: int, hint: int) -> int:
    """Input tokens of an episode of `steps` calls: each prompt repeats the hint, the rules and the
    episode so far."""
    return steps * (base + hint) + turn * steps * (steps - 1) // 2


def estimate_run(config: RunConfig) -> RunEstimate:
    cap_x, base_x, turn_x = _shape(config.model, config.game, "explore", config.explore_seed(0))
    cap_e, base_e, turn_e = _shape(config.model, config.game, "eval", config.eval_seed(0))
    cap_x, cap_e = min(cap_x, config.step_cap), min(cap_e, config.step_cap)
    budget = effective_budget(config.model, config.history_budget, config.max_tokens, config.context_tokens)
    episode_history = cap_x * turn_x  # one previous exploration episode as Hint Messages

    def hint(x: int) -> int:
        if config.pathway == "history":
            return min(budget, x * episode_history)
        if config.pathway == "summary":
            return SUMMARY_TOKENS if x > 0 else 0
        return 0

    system = count_tokens(config.model, SYSTEM_PROMPT)
    marked = needs_marker(config.model)
    calls = tokens_in = cached = written = 0
    for i in range(config.explore_episodes):
        calls += cap_x
        tokens_in += _episode_in(cap_x, base_x, turn_x, hint(i))
        read, write = episode_cache(cap_x, system + hint(i), turn_x, marked)
        cached, written = cached + read, written + write
    for x in config.checkpoints():
        calls += config.eval_episodes * cap_e
        tokens_in += config.eval_episodes * _episode_in(cap_e, base_e, turn_e, hint(x))
        read, write = episode_cache(cap_e, system + hint(x), turn_e, marked)
        cached, written = cached + config.eval_episodes * read, written + config.eval_episodes * write
    if config.pathway == "summary" and config.explore_episodes:
        rules = sum(count_tokens(config.model, part) for part in _summary_parts(config.game))
        for x in range(1, config.explore_episodes + 1):  # a summary for every state after the first
            calls += 1
            tokens_in += rules + SUMMARY_TOKENS + min(budget, x * episode_history)
    return RunEstimate(config, calls, tokens_in, calls * config.max_tokens,
                       calls * min(TYPICAL_REPLY_TOKENS, config.max_tokens), cached, written)


@lru_cache(maxsize=64)
def _summary_parts(game_name: str) -> tuple[str, ...]:
    """The parts of a summary request's prompt for a game (before any history), made once."""
    return tuple(str(m["content"]) for m in build_summary_messages(games.make(game_name, "explore"), None, ""))


def price(model: str, tokens_in: int, tokens_out: int) -> Optional[float]:
    """Dollars for these tokens at litellm's price of the model; None when it knows none."""
    from s3gym_tui.engine.llm import _litellm, has_price

    litellm = _litellm()
    if not has_price(litellm, model):  # as a call is priced (engine.llm): no price, not $0
        return None
    try:
        prompt, completion = litellm.cost_per_token(model=model, prompt_tokens=int(tokens_in),
                                                    completion_tokens=int(tokens_out))
    except Exception:  # noqa: BLE001 - litellm raises plain exceptions for unmapped models
        return None
    if prompt is None or completion is None:
        return None
    return float(prompt) + float(completion)


def price_cached(model: str, tokens_in: int, cached: int, written: int, tokens_out: int) -> Optional[float]:
    """Dollars with `cached` of the input tokens read from the prompt cache and `written` written to
    it; the uncached price where litellm lists no cache price; None when it knows no price."""
    full = price(model, tokens_in, tokens_out)
    if full is None:
        return None
    with_cache = cached_cost(model, tokens_in, cached, written)
    without = cached_cost(model, tokens_in, 0, 0)
    if with_cache is None or without is None:
        return full
    return full - without + with_cache


def plan(configs: Sequence[RunConfig]) -> SweepPlan:
    estimates = tuple(estimate_run(c) for c in configs)
    grouped: dict[str, list[RunEstimate]] = {}
    for estimate in estimates:
        grouped.setdefault(estimate.config.model, []).append(estimate)
    models = []
    for model, group in grouped.items():
        t_in = sum(e.tokens_in for e in group)
        t_out = sum(e.tokens_out for e in group)
        t_typ = sum(e.tokens_out_typical for e in group)
        t_cached = sum(e.tokens_in_cached for e in group)
        t_written = sum(e.tokens_in_cache_written for e in group)
        models.append(ModelEstimate(model, len(group), sum(e.calls for e in group), t_in, t_out, t_typ,
                                    price(model, t_in, t_out), price(model, t_in, t_typ),
                                    t_cached if cache_prices(model) else 0,
                                    price_cached(model, t_in, t_cached, t_written, t_typ)))
    return SweepPlan(estimates, tuple(models))
