"""What a protocol run will ask of the model before it starts: calls, tokens and (where litellm knows
the price) cost. Shared by the app's run dialog and the CLI's `run`."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

import s3gym_games as games
from s3gym_tui.engine.experience import effective_budget
from s3gym_tui.engine.prompt_cache import cache_prices, cached_cost, episode_cache, needs_marker
from s3gym_games.prompt import SYSTEM_PROMPT, build_messages, build_summary_messages, render_turns
from s3gym_tui.engine.tokens import count_tokens
from s3gym_tui.models import RunConfig

SUMMARY_TOKENS = 400  # a written summary (three short sections), as hint and in the next summary call
ANSWER_TOKENS = 16  # "LLM: Answer: <action>, Score: <s>" in a history line


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


def _tokens(model: str, messages: list[dict]) -> int:
    return count_tokens(model, "\n".join(str(m.get("content", "")) for m in messages)) + 4 * len(messages)


def _episode_input(model: str, mode: str, game: str, seed: int, cap: int,
                   hint_tokens: int) -> tuple[int, int, tuple[int, int]]:
    """(input tokens of one episode's calls, tokens of its history block, (tokens read from and
    written to the expected prompt cache)) for a game in a mode."""
    g = games.make(game, mode)
    g.reset(seed)
    cap = min(cap, g.max_steps)
    base = _tokens(model, build_messages(g, None, [], ""))
    turn = count_tokens(model, render_turns([])) + count_tokens(model, "Env: " + g.observation()) + ANSWER_TOKENS
    # call k sees the base prompt, k earlier turns of this episode and the hint
    total = cap * (base + hint_tokens) + turn * cap * (cap - 1) // 2
    cache = episode_cache(cap, count_tokens(model, SYSTEM_PROMPT) + hint_tokens, turn, needs_marker(model))
    return total, cap * turn, cache


def estimate_run(config: RunConfig, explore_done: frozenset[int] = frozenset(),
                 checkpoints_done: frozenset[int] = frozenset()) -> RunEstimate:
    """The estimate for `config` (counting tokens with the model's tokenizer where litellm knows it);
    with `explore_done` (indices of finished exploration episodes) and `checkpoints_done` (scored x),
    the estimate of what is left of a run (an episode under way counts whole: an upper bound)."""
    c = config
    left = bool(explore_done or checkpoints_done)
    cls = games.game_class(c.game)
    explore_steps = min(c.step_cap, min(int(cls.CONFIGS["explore"].max_steps), 64))
    eval_steps = min(c.step_cap, min(int(cls.CONFIGS["eval"].max_steps), 64))
    budget = effective_budget(c.model, c.history_budget, c.max_tokens, c.context_tokens)
    _, block, _ = _episode_input(c.model, "explore", c.game, c.explore_seed(0), explore_steps, 0)

    def hint(x: int) -> int:
        if c.pathway == "history":
            return min(budget, x * block)
        if c.pathway == "summary":
            return SUMMARY_TOKENS if x else 0
        return 0

    input_tokens = cached = written = 0
    explore = [i for i in range(c.explore_episodes) if i not in explore_done]
    for i in explore:
        tokens, _, (read, write) = _episode_input(c.model, "explore", c.game, c.explore_seed(i % 3), explore_steps,
                                                  hint(i))
        input_tokens, cached, written = input_tokens + tokens, cached + read, written + write
    checkpoints = [x for x in c.checkpoints() if x not in checkpoints_done]
    for x in checkpoints:
        tokens, _, (read, write) = _episode_input(c.model, "eval", c.game, c.eval_seed(0), eval_steps, hint(x))
        input_tokens += tokens * c.eval_episodes
        cached, written = cached + read * c.eval_episodes, written + write * c.eval_episodes
    # the summary of state x is written as exploration episode x starts (the last one for the last checkpoint)
    summary_xs = [x for x in range(1, c.explore_episodes + 1)
                  if x not in explore_done and not (x == c.explore_episodes and x in checkpoints_done)] \
        if c.pathway == "summary" else []
    summary_calls = len(summary_xs)
    if summary_calls:
        rules = _tokens(c.model, build_summary_messages(games.make(c.game, "explore"), None, ""))
        input_tokens += sum(rules + SUMMARY_TOKENS + min(budget, x * block) for x in summary_xs)
    explore_calls = len(explore) * explore_steps
    eval_calls = len(checkpoints) * c.eval_episodes * eval_steps
    output_max = (explore_calls + eval_calls + summary_calls) * c.max_tokens
    input_cost, output_cost = _prices(c.model, input_tokens, output_max)
    if cache_prices(c.model) is None:  # no (priced) caching to expect: both bounds are the same
        cached = written = 0
    cost_cached = cached_cost(c.model, input_tokens, cached, written) if input_cost is not None else None
    return RunEstimate(c, explore_steps, eval_steps, explore_calls, eval_calls, summary_calls, input_tokens,
                       output_max, input_cost, output_cost, len(explore) if left else None,
                       len(checkpoints) if left else None, cached, written, cost_cached)


def _prices(model: str, input_tokens: int, output_tokens: int) -> tuple[Optional[float], Optional[float]]:
    """(input cost, output cost) in USD from litellm's price list, or (None, None) when unknown."""
    try:
        from s3gym_tui.engine.llm import _litellm

        litellm = _litellm()
        prompt_cost, completion_cost = litellm.cost_per_token(model=model, prompt_tokens=input_tokens,
                                                              completion_tokens=output_tokens)
    except Exception:  # noqa: BLE001 - unknown model: no price
        return None, None
    return float(prompt_cost), float(completion_cost)
