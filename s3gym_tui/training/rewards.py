"""GRPO rewards for one reply at one game state (see s3gym_games.trl_env), from one of three sources:

- self (the default, self-improvement): the agent's own judgement of the step, made after the fact
  by the frozen starting model (the LoRA adapter switched off) from what the agent saw: the rules, the
  state, its action, the game's agent-visible feedback and the next state. Never the verifier's
  reward. A frozen judge cannot be talked up by the policy it trains.
- stated: the self-score the reply itself states (`Score: n`). Recorded as an option for comparison;
  a policy rewarded by its own claim learns to claim more, so it is not the default.
- oracle: the verifier's reward of the step (the recorded oracle ablation).

A format term is taken off every reply without a parsable action (`format_weight`, see sampling.py),
so a parsed reply beats prose in its group whatever the source.

Whatever the source, the verifier's reward of every sampled reply is logged as a metric
(`verifier_reward`, benchmark side only) so the curve shows whether self-judged RL helps.
"""

from __future__ import annotations

from typing import Any, Callable, Optional

from s3gym_games.trl_env import GameEnvironment, StepOutcome, completion_text, step_outcome
from s3gym_tui.training.grammar import score_line

REWARD_CLIP = 100.0

JUDGE_SYSTEM = ("You judge your own play of a text game from what you saw: the rules, the state, your "
                "action, what the game told you and the state after it. Answer with one line: Score: <number>")


def judge_messages(env: GameEnvironment, outcome: StepOutcome) -> list[dict]:
    """The judging prompt: agent-visible facts only (no verifier reward anywhere)."""
    game = env.game
    user = "\n".join([
        "Game rules:", game.rules(), "",
        "State before your action:", outcome.observation_before, "",
        f"Your action: {outcome.action}",
        f"What the game told you: {outcome.feedback}", "",
        "State after your action:", outcome.observation_after, "",
        "What immediate reward did this action earn under the game rules? End with: Score: <number>",
    ])
    return [{"role": "system", "content": JUDGE_SYSTEM}, {"role": "user", "content": user}]


def _clip(value: Optional[float]) -> float:
    if value is None or value != value:
        return 0.0
    return max(-REWARD_CLIP, min(REWARD_CLIP, float(value)))


class FrozenJudge:
    """Scores steps with the policy's base weights (adapter off), greedy and constrained to a number."""

    def __init__(self, model: Any, tokenizer: Any, max_new_tokens: int = 8) -> None:
        self.model, self.tokenizer, self.max_new_tokens = model, tokenizer, max_new_tokens
        self.entry: dict[str, Any] = {"model": model, "tokenizer": tokenizer, "pieces": None}
        self.cache: dict[tuple, float] = {}
        self.calls = 0

    def score(self, env: GameEnvironment, outcome: StepOutcome) -> float:
        key = (env.state, outcome.action)
        if key in self.cache:
            return self.cache[key]
        import contextlib

        import torch

        from s3gym_games.reply import parse_reply
        from s3gym_tui.training.decoding import Generator

        training = self.model.training
        self.model.eval()
        off = self.model.disable_adapter() if hasattr(self.model, "disable_adapter") else contextlib.nullcontext()
        try:
            with torch.no_grad(), off:
                gen = Generator(self.entry, temperature=0.0)
                prompt = gen.prompt_ids(judge_messages(env, outcome))
                text, _ = gen.constrained(prompt, score_line(), self.max_new_tokens)
        finally:
            if training:
                self.model.train()
        self.calls += 1
        value = _clip(parse_reply(f"Answer: x, {text}").self_score)
        self.cache[key] = value
        return value


def zero_spread_share(values: list[float], prompts: Optional[list]) -> Optional[float]:
    """The share of groups (the replies sharing a prompt: TRL repeats each prompt G times) whose `values` are all
    equal: groups the reward source did not tell apart. None without prompts."""
    if not prompts or len(prompts) != len(values):
        return None
    import json

    groups: dict[str, list[float]] = {}
    for prompt, value in zip(prompts, values):
        groups.setdefault(json.dumps(prompt, sort_keys=True, default=str), []).append(value)
    return sum(1 for g in groups.values() if max(g) - min(g) <= 1e-12) / len(groups)


def batch_std(values: list[float]) -> float:
    """Population std of the source's rewards over a batch (0: the source told the replies apart not at all)."""
    mean = sum(values) / len(values)
    return (sum((v - mean) ** 2 for v in values) / len(values)) ** 0.5


def make_reward(source: str, judge: Optional[FrozenJudge] = None, format_weight: float = 0.0
                ) -> Callable[..., list[float]]:
    """The TRL reward function for a source ('self' needs the judge), minus `format_weight` for a
    reply without a parsable action."""
    if source == "self" and judge is None:
        raise ValueError("the self-judged reward needs a judge")
    if source not in ("self", "stated", "oracle"):
        raise ValueError(f"unknown reward {source!r}: self, stated or oracle")

    def reward(prompts=None, completions=None, environments=None, log_metric=None, s3gym_constrained=None,
               **kwargs) -> list[float]:
        values, verifier, parsed, source_values = [], [], [], []
        for completion, env in zip(completions, environments):
            outcome = step_outcome(env, completion_text(completion))
            verifier.append(outcome.reward)
            parsed.append(outcome.parsed)
            if source == "oracle":
                value = _clip(outcome.reward)
            elif source == "stated":
                value = _clip(outcome.self_score) if outcome.parsed else 0.0
            else:
                value = judge.score(env, outcome)
            source_values.append(value)
            values.append(value - (0.0 if outcome.parsed else format_weight))
        if log_metric is not None and verifier:
            log_metric("source_reward_std", batch_std(source_values))
            share = zero_spread_share(source_values, prompts)
            if share is not None:
                log_metric("source_zero_std_share", share)
            log_metric("verifier_reward", sum(verifier) / len(verifier))
            log_metric("parsed_replies", sum(parsed) / len(parsed))
            free = [p for p, c in zip(parsed, s3gym_constrained or [False] * len(parsed)) if not c]
            if free:
                log_metric("parsed_free_replies", sum(free) / len(free))
        return values

    reward.__name__ = f"{source}_reward"
    return reward
