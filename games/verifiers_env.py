"""The games as verifiers environments: `load_environment(game, mode)`, the reply contract, the verifier as rubric.

Needs the `verifiers` extra (verifiers 0.3.1, whose `import verifiers as vf` surface holds MultiTurnEnv,
Parser and Rubric; 0.4.0 dropped them). One dataset row is one episode, `info = {game, mode, seed}`:

- explore mode fills the training `dataset` with exploration seeds; eval mode fills only `eval_dataset`,
  with evaluation seeds, so a trainer asking an eval environment for its training dataset gets verifiers'
  own "dataset is not set" error. Every rollout re-checks its seed against the environment's mode
  (s3gym_games.seeds.require_seed_of, the rule of the Gymnasium and TRL adapters): a row carrying an
  evaluation seed into an explore environment (or the reverse) is refused.
- Each turn the model gets the engine's messages for the state (s3gym_games.prompt.build_messages: rules,
  the current episode with the agent's own self-scores, the state), not a growing chat; a reply is read with
  `ReplyParser` (s3gym_games.reply.parse_reply) and its action played, NO_ANSWER when it has none. The
  verifier's rewards never enter a prompt.
- The rubric's reward is the game's verifier score of the episode (`Game.score()`, what
  `s3gym_games.verify_trajectory` recomputes from the actions); `answered` (weight 0) is the share of
  replies with an `Answer:` line. `state["actions"]` and `state["self_scores"]` hold the episode.

    import verifiers as vf
    env = vf.load_environment("s3gym_games.verifiers_env", game="trust", mode="eval", num_examples=4)
    results = env.evaluate_sync(vf.OpenAIChatCompletionsClient(AsyncOpenAI(base_url=...)), model="...")
"""

from __future__ import annotations

from typing import Any, Optional, Sequence

try:
    import verifiers as vf
    from datasets import Dataset
except ImportError as error:  # the optional extra is missing: say which one
    raise ImportError("s3gym_games.verifiers_env needs verifiers: pip install 's3gym-games[verifiers]' "
                      "(or 's3gym[verifiers]')") from error

import s3gym_games as games
from s3gym_games.base import HARNESS_STEP_CAP
from s3gym_games.prompt import SYSTEM_PROMPT, TurnRecord, build_messages
from s3gym_games.reply import NO_ANSWER, ParsedReply, parse_reply
from s3gym_games.seeds import EVAL_SEED_BASE, EXPLORE_SEED_BASE, require_seed_of

FIRST_SEED = {"explore": EXPLORE_SEED_BASE, "eval": EVAL_SEED_BASE}  # default seeds: the mode's first ones


class ReplyParser(vf.Parser):
    """The reply contract `Answer: <ACTION>, Score: <S>` (s3gym_games.reply): `parse` gives the ParsedReply,
    `parse_answer` the action of the last assistant message (None: no parsable answer)."""

    def parse(self, text: str) -> ParsedReply:
        return parse_reply(text)

    def parse_last(self, messages: Any) -> ParsedReply:
        """The last assistant message of a conversation (or a reply's text), parsed."""
        if isinstance(messages, str):
            return parse_reply(messages)
        replies = self.get_assistant_messages(messages)
        content = self._message_field(replies[-1], "content", "") if replies else ""
        return parse_reply(self._content_to_text(content or ""))

    def parse_answer(self, completion: Any) -> Optional[str]:
        return self.parse_last(completion).action


async def verifier_score(state: dict) -> float:
    """The game's verifier score of the episode played (0 for an episode that never started)."""
    game = state.get("game")
    return float(game.score()) if game is not None and game.seed is not None else 0.0


async def answered(state: dict) -> float:
    """The share of replies that had an `Answer:` line (no reply: 0)."""
    parsed = state.get("parsed") or []
    return sum(parsed) / len(parsed) if parsed else 0.0


class GameEnv(vf.MultiTurnEnv):
    """One game in one mode: one episode per dataset row (see the module's docstring)."""

    def __init__(self, game: str, mode: str, seeds: Sequence[int], **kwargs: Any) -> None:
        self.game_name, self.mode = games.canonical(game), mode
        probe = games.make(self.game_name, mode)  # GameError (a ValueError) for an unknown mode
        checked = [require_seed_of(mode, seed) for seed in seeds]  # refused before anything is built
        if not checked:
            raise ValueError("no seeds: give num_examples >= 1 or a non-empty seeds list")
        rows = Dataset.from_list([self._row(probe, seed) for seed in checked])
        parser = ReplyParser()
        rubric = vf.Rubric(funcs=[verifier_score, answered], weights=[1.0, 0.0], parser=parser)
        split = {"dataset": rows} if mode == "explore" else {"eval_dataset": rows}
        super().__init__(**split, parser=parser, rubric=rubric,
                         max_turns=min(probe.max_steps, HARNESS_STEP_CAP), **kwargs)

    def _row(self, game: games.Game, seed: int) -> dict[str, Any]:
        game.reset(seed)
        return {"prompt": build_messages(game, None, [], ""), "answer": "",
                "info": {"game": self.game_name, "mode": self.mode, "seed": seed}}

    async def setup_state(self, state: dict) -> dict:
        info = state.get("info") or {}
        if info.get("game") != self.game_name:
            raise ValueError(f"this environment plays {self.game_name}, not {info.get('game')!r}")
        game = games.make(self.game_name, self.mode)
        game.reset(require_seed_of(self.mode, info.get("seed", -1)))  # the held-out line, at every rollout
        state.update(game=game, turns=[], feedback="", actions=[], self_scores=[], parsed=[])
        return state

    async def add_trajectory_step(self, state: dict, trajectory_step: Any) -> None:
        """Play the reply's action as soon as it arrives (NO_ANSWER when it has none), so the stop conditions
        see the game as it is; a finished game ends the rollout with its final feedback."""
        await super().add_trajectory_step(state, trajectory_step)
        game, reply = state["game"], self.parser.parse_last(trajectory_step["completion"])
        action = reply.action if reply.action is not None else NO_ANSWER
        observation = game.observation()
        result = game.step(action)
        state["turns"].append(TurnRecord(observation, action, reply.self_score, state["feedback"]))
        state["feedback"] = result.feedback
        state["actions"].append(action)
        state["self_scores"].append(reply.self_score)
        state["parsed"].append(reply.action is not None)
        if result.done:
            state["final_env_response"] = [vf.UserMessage(content=f"The episode is over. {result.feedback}".strip())]

    async def get_prompt_messages(self, state: dict) -> list:
        """The engine's messages for the current state: the system contract and env_response's user message."""
        if not state["trajectory"]:
            return state["prompt"]
        step = state["trajectory"][-1]
        return [vf.SystemMessage(content=SYSTEM_PROMPT),
                *await self.env_response([*step["prompt"], *step["completion"]], state)]

    async def env_response(self, messages: list, state: dict, **kwargs: Any) -> list:
        """The next user message: the engine's for the state the last reply led to (rules, the episode so far
        with the agent's own self-scores, the state); the final feedback once the game is over."""
        if state.get("final_env_response") is not None:
            return state["final_env_response"]
        user = build_messages(state["game"], None, state["turns"], state["feedback"])[-1]
        return [vf.UserMessage(content=user["content"])]


def load_environment(game: str = "trust", mode: str = "explore", num_examples: int = 8,
                     seeds: Optional[Sequence[int]] = None, **kwargs: Any) -> GameEnv:
    """The verifiers environment of `game` in `mode`: `seeds` (checked against the mode's range), or the
    mode's first `num_examples` seeds. Other keyword arguments go to verifiers' MultiTurnEnv."""
    if mode not in games.MODES:
        raise ValueError(f"unknown mode {mode!r}: choose one of {', '.join(games.MODES)}")
    chosen = list(seeds) if seeds is not None else range(FIRST_SEED[mode], FIRST_SEED[mode] + int(num_examples))
    return GameEnv(game, mode, chosen, **kwargs)
