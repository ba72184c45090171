"""The games as TRL environments (GRPOTrainer's `environment_factory`), always in explore mode: the public
API the training pathway itself uses (s3gym_tui.training.grpo).

Each GRPO prompt is one state an episode reached on an exploration seed: (game, seed, actions so far,
the self-scores the agent gave them), a dataset row made by `prompt_row`. `GameEnvironment.reset(**row)`
replays that state and returns the user message exactly as the engine builds it for an action call
(rules, current episode so far, current state; no hint messages), so the policy is trained on the prompts
it is evaluated on. An evaluation seed is refused (ValueError): training never sees held-out games. The
environment exposes no tools: one reply is one action, as in the protocol; a reward function scores a
reply with `step_outcome(env, reply)`, which steps a copy of the state with the reply's action (the state
itself stays as it is). Use with TRL (the `trl` extra):

    trainer = GRPOTrainer(model=..., train_dataset=Dataset.from_list([prompt_row("trust", 3, [], [])]),
                          environment_factory=GameEnvironment, reward_funcs=[my_reward], ...)
    def my_reward(completions, environments, **_):
        return [step_outcome(env, completion_text(c)).reward for c, env in zip(completions, environments)]

(`.reward` is the verifier's: the project's own runs train on the self-judged score instead, see
s3gym_tui.training.rewards.)

TRL requires a chat template that can render tool calls whenever an environment is used. SmolLM2's
template cannot, so `ensure_tool_template` extends it with the usual tool-call branch; a conversation
without tools renders byte-identically (tested), so prompts do not change.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Optional, Sequence

import s3gym_games as games
from s3gym_games.prompt import SYSTEM_PROMPT, TurnRecord, build_messages
from s3gym_games.reply import NO_ANSWER, parse_reply
from s3gym_games.seeds import require_seed_of

MODE = "explore"
# the state's action grammar (games' `action_grammar()`, which depends on the state: snake's reverse move,
# chess's cells...), a field of a step-level row's system message: what its constrained replies follow
GRAMMAR_KEY = "s3gym_grammar"


def prompt_row(game: str, seed: int, actions: Sequence[str], scores: Sequence[Optional[float]],
               grammar: Optional[str] = None) -> dict[str, Any]:
    """A dataset row for one state: the system prompt (carrying the state's action grammar) and an empty
    user turn the environment fills."""
    return {"prompt": [{"role": "system", "content": SYSTEM_PROMPT, GRAMMAR_KEY: grammar},
                       {"role": "user", "content": "", GRAMMAR_KEY: None}],
            "game": game, "seed": int(seed), "actions": list(actions),
            "scores": [None if s is None else float(s) for s in scores]}


@dataclass(frozen=True)
class StepOutcome:
    """What one reply would do from the state (benchmark side: `reward` is the verifier's)."""

    action: str
    self_score: Optional[float]  # the score the reply stated (None: missing)
    parsed: bool  # the reply had an Answer line
    valid: bool
    feedback: str  # agent-visible
    reward: float  # the verifier's reward (oracle ablation only)
    observation_before: str
    observation_after: str
    done: bool


class GameEnvironment:
    """One state of one game in explore mode (never an evaluation seed). No public methods besides
    `reset`: TRL would expose them to the model as tools."""

    def __init__(self) -> None:
        self._game: Optional[str] = None
        self._seed = 0
        self._actions: list[str] = []
        self._env: Any = None
        self._feedback = ""

    def reset(self, game: str = "", seed: int = 0, actions: Sequence[str] = (),
              scores: Sequence[Optional[float]] = (), **_: Any) -> str:
        self._seed = require_seed_of(MODE, seed)  # never an evaluation seed
        self._game, self._actions = games.canonical(game), [str(a) for a in actions]
        env = games.make(self._game, MODE)
        env.reset(self._seed)
        turns: list[TurnRecord] = []
        feedback = ""
        scores = list(scores) + [None] * (len(self._actions) - len(scores))
        for action, score in zip(self._actions, scores):
            observation = env.observation()
            result = env.step(action)
            turns.append(TurnRecord(observation, action, score, feedback))
            feedback = result.feedback
        self._env, self._feedback = env, feedback
        self._turns = turns
        return self._messages()[-1]["content"]

    def _messages(self) -> list[dict]:
        return build_messages(self._env, None, self._turns, self._feedback)

    @property
    def state(self) -> tuple[str, int, tuple[str, ...]]:
        return self._game or "", self._seed, tuple(self._actions)

    @property
    def game(self) -> Any:
        return self._env

def step_outcome(env: GameEnvironment, reply: str) -> StepOutcome:
    """What a reply would do from the environment's state: its action applied to a copy of the state."""
    parsed = parse_reply(reply)
    action = parsed.action if parsed.action is not None else NO_ANSWER
    name, seed, actions = env.state
    game = games.game_class(name).replay(MODE, seed, list(actions))
    before = game.observation()
    if game.done:
        return StepOutcome(action, parsed.self_score, parsed.action is not None, False, "the episode is over",
                           0.0, before, before, True)
    result = game.step(action)
    return StepOutcome(action, parsed.self_score, parsed.action is not None, result.valid, result.feedback,
                       float(result.reward), before, game.observation(), result.done)


def completion_text(completion: Any) -> str:
    """The assistant text of a TRL completion (conversational: a list of messages; or plain text)."""
    if isinstance(completion, str):
        return completion
    parts = []
    for message in completion or []:
        content = message.get("content") if isinstance(message, dict) else message
        if isinstance(content, list):
            content = "".join(p.get("text", "") for p in content if isinstance(p, dict))
        parts.append(str(content or ""))
    return "".join(parts)


# SmolLM2's ChatML template plus a tool-call branch (TRL refuses environments without one): identical
# output for every conversation without tools or tool calls.
TOOL_TEMPLATE = (
    "{% for message in messages %}"
    "{% if loop.first and messages[0]['role'] != 'system' %}"
    "{{ '<|im_start|>system\\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\\n' }}"
    "{% endif %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' }}"
    "{% if message['content'] is string %}{{ message['content'] }}"
    "{% elif message['content'] %}{% for part in message['content'] %}{{ part['text'] }}{% endfor %}{% endif %}"
    "{% if message.get('tool_calls') %}{% for call in message['tool_calls'] %}"
    "{{ '<tool_call>' + (call['function'] | tojson) + '</tool_call>' }}{% endfor %}{% endif %}"
    "{{ '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}"
)


def ensure_tool_template(tokenizer: Any) -> Any:
    """Give the tokenizer a tool-capable template when it has none that TRL accepts (ChatML only)."""
    from trl.chat_template_utils import supports_tool_calling

    if supports_tool_calling(tokenizer):
        return tokenizer
    if "<|im_start|>" not in str(tokenizer.chat_template or ""):
        raise ValueError("the base model's chat template cannot render tool calls, which TRL's environments "
                         "need; use a base whose template supports tools (or a ChatML one)")
    tokenizer.chat_template = TOOL_TEMPLATE
    return tokenizer
