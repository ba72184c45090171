"""What a protocol run will ask of the model before it starts: calls, tokens and (where litellm knows
the price) cost. The one estimator: the app's run dialog, the CLI's `run --estimate`, resuming and
sweep plans (engine.sweep_plan sums it per model)."""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Optional

import s3gym_games as games
from s3gym_tui.engine.experience import effective_budget
from s3gym_tui.engine.prompt_cache import cache_prices, cached_cost, episode_cache, needs_marker
from s3gym_games.prompt import SYSTEM_PROMPT, TurnRecord, build_messages, build_summary_messages, render_turns
from s3gym_tui.engine.pathways import SUMMARY_TOKENS, pathway
from s3gym_tui.engine.tokens import count_tokens
from s3gym_tui.models import RunConfig

TYPICAL_REPLY_TOKENS = 200  # a short reasoning and the answer line


@dataclass(frozen=True)
class RunEstimate:
    """Upper bounds where the run decides (every episode runs to its step cap), estimates where the
    model does (the prompt grows with the episode and the history; replies stop at max tokens)."""

    config: RunConfig
    explore_steps: int  # step cap of an exploration episode
    eval_steps: int  # step cap of an evaluation episode
    explore_calls: int
    eval_calls: int
    summary_calls: int
    input_tokens: int
    output_tokens_max: int
    input_cost: Optional[float]  # USD, None when litellm does not know the model's price
    output_cost_max: Optional[float]
    explore_left: Optional[int] = None  # for what is left of a run: exploration episodes not finished
    checkpoints_left: Optional[int] = None  # and checkpoints not scored (None: the whole run)
    # the expected prompt cache (engine.prompt_cache.episode_cache): input tokens read from it and
    # written to it, and the input cost with it (None: litellm lists no cache price for the model)
    input_tokens_cached: int = 0
    input_tokens_cache_written: int = 0
    input_cost_cached: Optional[float] = None
    output_tokens_typical: int = 0  # every reply TYPICAL_REPLY_TOKENS long (at most max tokens)

    @property
    def calls(self) -> int:
        return self.explore_calls + self.eval_calls + self.summary_calls

    @property
    def context_unknown(self) -> bool:
        """A served model (an api base) whose server has stated no context."""
        c = self.config
        return c.context_tokens is None and bool(c.api_base or c.api_bases)

    @property
    def price_known(self) -> bool:
        return self.input_cost is not None and self.output_cost_max is not None

    def lines(self) -> list[str]:
        """The estimate as short lines of text (the app and the CLI print the same)."""
        c = self.config
        checkpoints = len(c.checkpoints()) if self.checkpoints_left is None else self.checkpoints_left
        explore = c.explore_episodes if self.explore_left is None else self.explore_left
        out = [
            f"at most {self.calls:,} model calls: {self.explore_calls:,} exploration "
            f"({explore} episodes x {self.explore_steps} steps), {self.eval_calls:,} evaluation "
            f"({checkpoints} checkpoints x {c.eval_episodes} episodes x {self.eval_steps} steps)"
            + (f", {self.summary_calls} summaries" if self.summary_calls else ""),
            f"about {self.input_tokens:,} input tokens; at most {self.output_tokens_max:,} output tokens "
            f"({c.max_tokens:,} max tokens a reply{'; context unknown' if self.context_unknown else ''}; "
            f"replies are usually much shorter)",
        ]
        if self.price_known:
            out.append(f"cost: about ${self.input_cost:,.2f} for input, at most ${self.output_cost_max:,.2f} "
                       f"for output (litellm's price list)")
            if self.input_cost_cached is not None and self.input_tokens:
                share = self.input_tokens_cached / self.input_tokens
                out.append(f"input with the expected prompt cache: about ${self.input_cost_cached:,.2f} "
                           f"({share:.0%} of input tokens cached; ${self.input_cost:,.2f} with no cache)")
        else:
            out.append(f"cost: litellm does not know the price of {c.model}")
        return out


@lru_cache(maxsize=256)
def _texts(game_name: str, mode: str, seed: int) -> tuple[int, tuple[str, ...], str]:
    """(step cap, the first prompt's parts, one remembered turn) of a game: made once per (game, mode,
    seed), however many runs and models share them (the reference move that fills the turn can take a
    while, e.g. Trust's look-ahead)."""
    game = games.make(game_name, mode)
    game.reset(seed)
    move = games.reference_policy(game_name).act(game.view())
    parts = tuple(str(m["content"]) for m in build_messages(game, None, [], ""))
    turn = render_turns([TurnRecord(game.observation(), move.action, 1.0, "Feedback of the last action.")])
    return game.max_steps, parts, turn


@lru_cache(maxsize=64)
def _summary_parts(game_name: str) -> tuple[str, ...]:
    """The parts of a summary request's prompt for a game (before any history), made once."""
    return tuple(str(m["content"]) for m in build_summary_messages(games.make(game_name, "explore"), None, ""))


def _shape(model: str, game_name: str, mode: str, seed: int) -> tuple[int, int, int]:
    """(step cap, tokens of the first prompt, tokens one remembered turn adds); each distinct text is
    counted once per model (engine.tokens caches the counts)."""
    cap, parts, turn = _texts(game_name, mode, seed)
    return cap, sum(count_tokens(model, part) + 4 for part in parts), count_tokens(model, turn)


def _episode_in(steps: int, base: int, turn: int, hint: int) -> int:
    """Input tokens of an episode of `steps` calls: each prompt repeats the hint, the rules and the
    episode so far (call k sees k earlier turns)."""
    return steps * (base + hint) + turn * steps * (steps - 1) // 2


def estimate_run(config: RunConfig, explore_done: frozenset[int] = frozenset(),
                 checkpoints_done: frozenset[int] = frozenset()) -> RunEstimate:
    """The estimate for `config` (counting tokens with the model's tokenizer where litellm knows it);
    with `explore_done` (indices of finished exploration episodes) and `checkpoints_done` (scored x),
    the estimate of what is left of a run (an episode under way counts whole: an upper bound). The one
    estimator: the run dialog, `s3gym run --estimate`, resuming and sweep plans all use it."""
    c = config
    way = pathway(c.pathway)
    left = bool(explore_done or checkpoints_done)
    cls = games.game_class(c.game)
    explore_steps = min(c.step_cap, min(int(cls.CONFIGS["explore"].max_steps), 64))
    eval_steps = min(c.step_cap, min(int(cls.CONFIGS["eval"].max_steps), 64))
    budget = effective_budget(c.model, c.history_budget, c.max_tokens, c.context_tokens)
    system = count_tokens(c.model, SYSTEM_PROMPT)
    marked = needs_marker(c.model)
    _, _, turn0 = _shape(c.model, c.game, "explore", c.explore_seed(0))
    episode_history = explore_steps * turn0  # one earlier exploration episode as Hint Messages

    def hint(x: int) -> int:
        return way.hint_tokens(x, budget, episode_history)

    input_tokens = cached = written = 0
    explore = [i for i in range(c.explore_episodes) if i not in explore_done]
    for i in explore:
        _, base, turn = _shape(c.model, c.game, "explore", c.explore_seed(i % 3))
        input_tokens += _episode_in(explore_steps, base, turn, hint(i))
        read, write = episode_cache(explore_steps, system + hint(i), turn, marked)
        cached, written = cached + read, written + write
    checkpoints = [x for x in c.checkpoints() if x not in checkpoints_done]
    _, base_e, turn_e = _shape(c.model, c.game, "eval", c.eval_seed(0))
    for x in checkpoints:
        input_tokens += c.eval_episodes * _episode_in(eval_steps, base_e, turn_e, hint(x))
        read, write = episode_cache(eval_steps, system + hint(x), turn_e, marked)
        cached, written = cached + read * c.eval_episodes, written + write * c.eval_episodes
    # the summary of state x is written as exploration episode x starts (the last one for the last checkpoint)
    summary_xs = [x for x in way.summary_states(c.explore_episodes)
                  if x not in explore_done and not (x == c.explore_episodes and x in checkpoints_done)]
    if summary_xs:
        rules = sum(count_tokens(c.model, part) + 4 for part in _summary_parts(c.game))
        input_tokens += sum(rules + SUMMARY_TOKENS + min(budget, x * episode_history) for x in summary_xs)
    explore_calls = len(explore) * explore_steps
    eval_calls = len(checkpoints) * c.eval_episodes * eval_steps
    calls = explore_calls + eval_calls + len(summary_xs)
    output_max = calls * c.max_tokens
    input_cost, output_cost = _prices(c.model, input_tokens, output_max)
    if cache_prices(c.model) is None:  # no (priced) caching to expect: both bounds are the same
        cached = written = 0
    cost_cached = cached_cost(c.model, input_tokens, cached, written) if input_cost is not None else None
    return RunEstimate(c, explore_steps, eval_steps, explore_calls, eval_calls, len(summary_xs), input_tokens,
                       output_max, input_cost, output_cost, len(explore) if left else None,
                       len(checkpoints) if left else None, cached, written, cost_cached,
                       calls * min(TYPICAL_REPLY_TOKENS, c.max_tokens))


def _prices(model: str, input_tokens: int, output_tokens: int) -> tuple[Optional[float], Optional[float]]:
    """(input cost, output cost) in USD from litellm's price list, or (None, None) when it knows none
    (as a call is priced, engine.llm: no price, not $0)."""
    from s3gym_tui.engine.llm import _litellm, has_price

    litellm = _litellm()
    if not has_price(litellm, model):
        return None, None
    try:
        prompt_cost, completion_cost = litellm.cost_per_token(model=model, prompt_tokens=int(input_tokens),
                                                              completion_tokens=int(output_tokens))
    except Exception:  # noqa: BLE001 - litellm raises plain exceptions for unmapped models
        return None, None
    if prompt_cost is None or completion_cost is None:
        return None, None
    return float(prompt_cost), float(completion_cost)


def price(model: str, tokens_in: int, tokens_out: int) -> Optional[float]:
    """Dollars for these tokens at litellm's price of the model; None when it knows none."""
    prompt, completion = _prices(model, tokens_in, tokens_out)
    return None if prompt is None or completion is None else prompt + completion


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
