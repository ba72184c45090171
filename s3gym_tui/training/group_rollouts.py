"""GRPO's `rollout_func` (TRL 1.16): the policy's replies for a generation batch, sampled by us
(sampling.py: free or under the answer-line grammar), at either level.

- step level: each prompt is one state (filled by environment.GameEnvironment.reset); one reply each.
- episode level: each prompt is the first state of an episode on an exploration seed (the seed rides
  in the system message's `s3gym_seed` field, which the chat template never renders); the policy
  plays the WHOLE episode there, one reply per turn, each sampled from the engine's own prompt for
  that turn (which re-sends the current episode). The GRPO completion of an episode is the
  concatenation the chat template renders for the conversation [system, user_0, reply_0, user_1,
  reply_1, ...]: the policy's replies with the game's turns between them, the game's text masked out
  of the loss (`env_mask`, TRL's tool mask). Its reward is the episode's outcome: the agent's own
  judged return (the frozen judge's scores summed) by default, the verifier's return as the oracle
  ablation; minus `format_weight` per reply without an action. Known approximation: training
  conditions reply t on the conversation so far, while it was sampled from the engine's single
  prompt for turn t (which holds the same facts); the ratio TRL computes is consistent (both sides
  use the conversation), the sampling distribution differs slightly.

Through vLLM: when the trainer runs with `use_vllm` (`--vllm server|colocate`), the same rollouts
sample through TRL's own vLLM generation (vllm_sampling.VllmSampler: the constrained half under vLLM's
structured outputs with the same regex, the free half cut after the answer line as here) and return
vLLM's logprobs of the sampled tokens (0.0 on the game's masked text, as TRL's tool loop does); the
step level asks for a batch's replies in one call per pattern. Without it, nothing changes.

Every episode is handed to `on_episode` (the pipeline stores it as an exploration episode of the
training's rollout run), and `last` keeps the batch's rollouts for the advantage hook
(grpo_trainer.S3GymGRPOTrainer.token_advantages).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable, Optional, Sequence

import s3gym_games as games
from s3gym_games.reply import parse_reply
from s3gym_games.prompt import SYSTEM_PROMPT, TurnRecord, build_messages
from s3gym_games.reply import NO_ANSWER
from s3gym_tui.engine.visibility import require_exploration_seed
from s3gym_games.trl_env import GRAMMAR_KEY, MODE, GameEnvironment, step_outcome
from s3gym_tui.training.grammar import AnswerLine, answer_line

SEED_KEY = "s3gym_seed"  # the seed of an episode-level prompt (a field of its system message)


@dataclass
class RolloutStep:
    """One turn of a rollout episode, as the store keeps a step."""

    index: int
    observation: str
    prompt: list  # the messages the policy was sampled from (the engine's)
    reply: str
    action: str
    self_score: Optional[float]
    parsed: bool
    constrained: bool
    reward: float  # the verifier's (benchmark side)
    feedback: str
    valid: bool
    terminated: bool
    truncated: bool
    judged: Optional[float] = None  # the frozen judge's score (self reward only)
    tokens: int = 0


@dataclass
class Rollout:
    """One GRPO completion: a reply (step level) or a whole episode (episode level)."""

    game: str
    seed: int
    group_index: int  # k: its place in its group of G
    constrained: bool
    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)  # 1: the policy's token, 0: the game's text
    turn_of_token: list[int] = field(default_factory=list)  # the step a completion token belongs to; -1: game text
    steps: list[RolloutStep] = field(default_factory=list)
    score: Optional[float] = None  # the game's verifier score at the end (episode level)
    reward: Optional[float] = None  # what GRPO is given (episode level; step level: rewards.py)
    source_return: Optional[float] = None  # the reward source's return, before the format term
    cut: Optional[str] = None  # why the episode ended early (the window), None otherwise
    logprobs: Optional[list] = None  # the sampler's logprob per completion token (vLLM only; None otherwise)

    @property
    def unparsed(self) -> int:
        return sum(1 for s in self.steps if not s.parsed)

    def turns(self, length: int) -> list[int]:
        """`turn_of_token` padded with -1 to `length` tokens (the padded completion)."""
        return (self.turn_of_token + [-1] * length)[:length]


def episode_prompt(game: str, seed: int) -> list[dict]:
    """The episode-level dataset prompt: the engine's first prompt, the seed in the system message."""
    env = games.make(games.canonical(game), MODE)
    env.reset(require_exploration_seed(seed))
    messages = build_messages(env, None, [], "")
    messages = [{**m, SEED_KEY: None} for m in messages]
    messages[0][SEED_KEY] = int(seed)
    return messages


def _plain(messages: Sequence[dict]) -> list[dict]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


class GroupRollouts:
    """TRL's rollout_func: call with (prompts, trainer); returns prompt/completion ids, the env mask
    (episode level) and the extra fields the reward function reads."""

    def __init__(self, game: str, level: str, sampler: Any, num_generations: int, sampling: str = "mixed",
                 reward: str = "self", judge: Any = None, format_weight: float = 1.0,
                 step_cap: Optional[int] = None, window: Optional[int] = None,
                 on_episode: Callable[[Rollout], None] = lambda rollout: None) -> None:
        from s3gym_tui.training.sampling import constrained_slot

        if level not in ("step", "episode"):
            raise ValueError(f"unknown level {level!r}: step or episode")
        if reward == "self" and judge is None and level == "episode":
            raise ValueError("the self-judged reward needs a judge")
        self.game = games.canonical(game)
        self.level, self.sampler, self.G = level, sampler, num_generations
        self.sampling, self.reward, self.judge, self.format_weight = sampling, reward, judge, format_weight
        self.step_cap, self.window, self.on_episode = step_cap, window, on_episode
        self._slot = constrained_slot
        self.active: Any = sampler  # what samples this batch: `sampler`, or vLLM's (vllm_sampling.py)
        self._vllm: Any = None
        self.last: list[Rollout] = []
        self.episodes = 0
        self.cut = 0  # episodes ended early because the next turn would not fit the window

    # ----- TRL's entry point ---------------------------------------------------------------------
    def __call__(self, prompts: list, trainer: Any = None) -> dict[str, Any]:
        self.active = self._sampler_for(trainer)
        if hasattr(self.sampler, "forget_prefixes"):
            self.sampler.forget_prefixes()  # the weights moved since the last batch
        slots = self.slots(prompts)
        # each reply's sampling seed follows from its place (update, row, turn), so a resumed training
        # samples what its uninterrupted twin sampled
        step = int(getattr(getattr(trainer, "state", None), "global_step", 0) or 0)
        keys = [(step * 10_000 + i) * 100 for i in range(len(prompts))]
        from s3gym_tui.training import stop

        def between(i: int) -> int:
            """A requested stop is honoured between two rollouts (the update is then not made)."""
            label = f"GRPO update {step + 1}: rollouts ({i} of {len(prompts)} done)"
            stop.set_phase(label)
            stop.check_between(label)
            return i

        if self.level == "episode":
            rollouts = [self.episode(p, k, keys[between(i)]) for i, (p, k) in enumerate(zip(prompts, slots))]
        elif self.active is self.sampler:
            rollouts = [self.reply(p, k, keys[between(i)]) for i, (p, k) in enumerate(zip(prompts, slots))]
        else:
            rollouts = self.replies(prompts, slots)
        stop.set_phase(f"GRPO update {step + 1}: gradients")
        self.last = rollouts
        vllm = self.active is not self.sampler
        out: dict[str, Any] = {
            "prompt_ids": [r.prompt_ids for r in rollouts], "completion_ids": [r.completion_ids for r in rollouts],
            "logprobs": [r.logprobs for r in rollouts] if vllm else None,
            "s3gym_constrained": [r.constrained for r in rollouts]}
        if self.level == "episode":
            out["env_mask"] = [r.env_mask for r in rollouts]
            out["s3gym_reward"] = [float(r.reward) for r in rollouts]
            out["s3gym_verifier_return"] = [sum(s.reward for s in r.steps) for r in rollouts]
            out["s3gym_replies"] = [len(r.steps) for r in rollouts]
            out["s3gym_unparsed"] = [r.unparsed for r in rollouts]
            out["s3gym_source_return"] = [float(r.source_return) for r in rollouts]
        return out

    def slots(self, prompts: list) -> list[int]:
        """Each reply's place k in its group (0..G-1), which decides whether it is sampled under the grammar.

        TRL repeats every prompt G times; with N data-parallel processes a group's copies are split among
        them, each process seeing only its share. The j-th copy of a prompt on rank r takes k = (j * N + r)
        mod G: with one process that is 0..G-1 in order, and with N the ranks' copies interleave, so a
        group keeps its mix (half constrained under `mixed`) however the copies were dealt out."""
        import json

        from s3gym_tui.training.ranks import world

        here = world()
        seen: dict[str, int] = {}
        out = []
        for prompt in prompts:
            key = json.dumps(prompt, sort_keys=True, default=str)
            j = seen.get(key, 0)
            seen[key] = j + 1
            out.append((j * here.size + here.rank) % self.G)
        return out

    def _constrained(self, k: int) -> bool:
        return self._slot(self.sampling, k, self.G)

    def _pattern(self, prompt: list) -> AnswerLine:
        """The answer-line pattern of a step-level prompt's state (its row carries the state's grammar:
        games' grammars depend on the state, so none is known before the state is)."""
        grammar = prompt[0].get(GRAMMAR_KEY) if prompt and isinstance(prompt[0], dict) else None
        if grammar is None:
            raise ValueError("a step-level GRPO prompt without its state's action grammar (environment.prompt_row)")
        return answer_line(grammar)

    def _sampler_for(self, trainer: Any) -> Any:
        """Our transformers sampler, or TRL's vLLM generation when the trainer uses it."""
        if trainer is None or not getattr(trainer, "use_vllm", False):
            return self.sampler
        generation = trainer.vllm_generation
        if self._vllm is None or self._vllm.generation is not generation:
            from s3gym_tui.training.vllm_sampling import VllmSampler

            self._vllm = VllmSampler(self.sampler, generation, getattr(trainer, "vllm_mode", "colocate"))
        return self._vllm

    def _draw(self, ids: list[int], pattern: Optional[str],
              key: Optional[int] = None) -> tuple[list[int], Optional[list]]:
        """One reply (and its logprobs through vLLM, None otherwise); `key` seeds our sampler's draw."""
        if self.active is self.sampler:
            return self.sampler.sample(ids, pattern, key), None
        return self.active.sample_batch([ids], pattern)[0]

    # ----- step level ----------------------------------------------------------------------------
    def reply(self, prompt: list, k: int, key: Optional[int] = None) -> Rollout:
        constrained = self._constrained(k)
        ids = self.sampler.prompt_ids(_plain(prompt))
        reply = self.sampler.sample(ids, self._pattern(prompt) if constrained else None, key)
        return Rollout(self.game, -1, k, constrained, ids, reply, [1] * len(reply), [0] * len(reply))

    def replies(self, prompts: list, places: Optional[list[int]] = None) -> list[Rollout]:
        """Step level through vLLM: the batch's replies, one call per distinct state grammar among its
        constrained replies and one for its free ones. A kind the sampling uses is asked for even when
        this batch has none of it (VllmSampler skips an empty call in colocate mode; a server's call is
        collective). Several processes on one server are refused (options.vllm_problem): TRL's server
        call takes one regex for every rank's prompts, and the grammars differ by state."""
        ids = [self.active.prompt_ids(_plain(p)) for p in prompts]
        places = places if places is not None else self.slots(prompts)
        slots = [self._constrained(k) for k in places]
        calls: list[tuple[Optional[str], list[int]]] = []
        if any(self._constrained(k) for k in range(self.G)):
            grouped: dict[AnswerLine, list[int]] = {}
            for i, prompt in enumerate(prompts):
                if slots[i]:
                    grouped.setdefault(self._pattern(prompt), []).append(i)
            calls += list(grouped.items()) or [(None, [])]
        if any(not self._constrained(k) for k in range(self.G)):
            calls.append((None, [i for i, c in enumerate(slots) if not c]))
        rollouts: list[Optional[Rollout]] = [None] * len(prompts)
        for pattern, mine in calls:
            drawn = self.active.sample_batch([ids[i] for i in mine], pattern)
            for i, (reply, logprobs) in zip(mine, drawn):
                rollouts[i] = Rollout(self.game, -1, places[i], slots[i], ids[i], reply, [1] * len(reply),
                                      [0] * len(reply), logprobs=logprobs)
        assert all(r is not None for r in rollouts), "vLLM returned fewer replies than it was asked for"
        return rollouts  # type: ignore[return-value]

    # ----- episode level -------------------------------------------------------------------------
    def _render(self, messages: list, generation: bool) -> str:
        return self.sampler.tokenizer.apply_chat_template(messages, tokenize=False, add_generation_prompt=generation)

    def _between(self, conversation: list, reply_ids: list[int], user: dict) -> list[int]:
        """The tokens the chat template puts between the last reply's sampled tokens and the next
        reply: the end of the assistant turn (unless the model wrote it) and the next user turn."""
        tok = self.sampler.tokenizer
        before = self._render(conversation, False)
        after = self._render(conversation + [user], True)
        content = conversation[-1]["content"]
        at = before.rfind(content) if content else len(before) - len(before.lstrip())
        end_markup = before[at + len(content):] if content and at >= 0 else ""
        eos = tok.eos_token or ""
        if reply_ids and reply_ids[-1] == tok.eos_token_id and eos and end_markup.startswith(eos):
            end_markup = end_markup[len(eos):]
        text = end_markup + (after[len(before):] if after.startswith(before) else after)
        return list(tok(text, add_special_tokens=False)["input_ids"])

    def _judge(self, seed: int, steps: list[RolloutStep], reply: str) -> float:
        env = GameEnvironment()
        env.reset(game=self.game, seed=seed, actions=[s.action for s in steps],
                  scores=[s.self_score for s in steps])
        return self.judge.score(env, step_outcome(env, reply))

    def episode(self, prompt: list, k: int, key: Optional[int] = None) -> Rollout:
        seed = require_exploration_seed(int(prompt[0][SEED_KEY]))  # engine.visibility: never an evaluation seed
        constrained = self._constrained(k)
        env = games.make(self.game, MODE)
        env.reset(seed)
        cap = min(env.max_steps, self.step_cap or env.max_steps)
        turns: list[TurnRecord] = []
        feedback = ""
        conversation: list[dict] = []
        rollout: Optional[Rollout] = None
        while not env.done and (rollout is None or len(rollout.steps) < cap):
            messages = build_messages(env, None, turns, feedback)
            ids = self.sampler.prompt_ids(messages)
            if rollout is None:
                rollout = Rollout(self.game, seed, k, constrained, ids)
                if self.active is not self.sampler:
                    rollout.logprobs = []
                conversation = list(messages)
            else:
                between = self._between(conversation, rollout.completion_ids, messages[-1])
                total = len(rollout.prompt_ids) + len(rollout.completion_ids) + len(between)
                if self.window and total + self.sampler.max_new_tokens > self.window:
                    rollout.cut = "the next turn would not fit the model's window"
                    self.cut += 1
                    break
                rollout.completion_ids += between
                rollout.env_mask += [0] * len(between)
                rollout.turn_of_token += [-1] * len(between)
                if rollout.logprobs is not None:
                    rollout.logprobs += [0.0] * len(between)  # the game's text, masked (TRL's tool tokens)
                conversation.append(messages[-1])
            turn_key = None if key is None else key + len(rollout.steps)
            pattern = answer_line(env.action_grammar()) if constrained else None  # this state's
            reply_ids, logprobs = self._draw(ids, pattern, turn_key)
            if rollout.logprobs is not None:
                rollout.logprobs += list(logprobs or [None] * len(reply_ids))
            text = self.sampler.text(reply_ids)
            index = len(rollout.steps)
            rollout.completion_ids += reply_ids
            rollout.env_mask += [1] * len(reply_ids)
            rollout.turn_of_token += [index] * len(reply_ids)
            conversation.append({"role": "assistant", "content": text})
            parsed = parse_reply(text)
            action = parsed.action if parsed.action is not None else NO_ANSWER
            judged = self._judge(seed, rollout.steps, text) if self.reward == "self" else None
            observation = env.observation()
            result = env.step(action)
            rollout.steps.append(RolloutStep(
                index, observation, list(messages), text, action, parsed.self_score, parsed.action is not None,
                constrained, float(result.reward), result.feedback, bool(result.valid), bool(result.terminated),
                bool(result.truncated), judged, len(reply_ids)))
            turns.append(TurnRecord(observation, action, parsed.self_score, feedback))
            feedback = result.feedback
        assert rollout is not None, "a game that is over before its first step"
        rollout.score = float(env.score())
        base = (sum(s.reward for s in rollout.steps) if self.reward == "oracle"
                else sum(s.self_score or 0.0 for s in rollout.steps if s.parsed) if self.reward == "stated"
                else sum(float(s.judged or 0.0) for s in rollout.steps))
        rollout.source_return = base
        rollout.reward = base - self.format_weight * rollout.unparsed
        self.episodes += 1
        self.on_episode(rollout)
        return rollout


def episode_reward(log_metric=None, s3gym_reward=None, s3gym_verifier_return=None, s3gym_replies=None,
                   s3gym_unparsed=None, s3gym_constrained=None, s3gym_source_return=None, prompts=None,
                   **_: Any) -> list[float]:
    """The TRL reward function of episode-level GRPO: each episode's outcome, computed by the rollout."""
    if log_metric is not None and s3gym_reward:
        from s3gym_tui.training.rewards import batch_std, zero_spread_share

        log_metric("source_reward_std", batch_std(list(s3gym_source_return)))
        share = zero_spread_share(list(s3gym_source_return), prompts)
        if share is not None:
            log_metric("source_zero_std_share", share)
        replies = sum(s3gym_replies)
        if replies:
            log_metric("parsed_replies", 1.0 - sum(s3gym_unparsed) / replies)
        free = [(n, u) for n, u, c in zip(s3gym_replies, s3gym_unparsed, s3gym_constrained) if not c]
        if free and sum(n for n, _ in free):
            log_metric("parsed_free_replies", 1.0 - sum(u for _, u in free) / sum(n for n, _ in free))
        log_metric("verifier_reward", sum(s3gym_verifier_return) / len(s3gym_verifier_return))
    return [float(r) for r in s3gym_reward]


def system_prompt_row(game: str, seed: int) -> dict[str, Any]:
    """An episode-level dataset row."""
    return {"prompt": episode_prompt(game, seed), "game": games.canonical(game), "seed": int(seed)}


__all__ = ["GroupRollouts", "Rollout", "RolloutStep", "SEED_KEY", "SYSTEM_PROMPT", "episode_prompt",
           "episode_reward", "system_prompt_row"]
