"""On-policy rollouts for GRPO: the current policy plays exploration episodes (explore mode, the run's
exploration seeds, round robin) through the real games with the engine's own prompts; every state it
reaches becomes one GRPO prompt row (environment.prompt_row), where TRL then samples a group of
replies. The trajectory goes on with the rollout player's own sampled action, so states follow the
policy as it learns (one batch behind: the data loader reads one batch ahead)."""

from __future__ import annotations

import itertools
from typing import Any, Callable, Iterator, Optional, Sequence

import s3gym_games as games
from s3gym_games.reply import parse_reply
from s3gym_games.prompt import TurnRecord, build_messages
from s3gym_games.reply import NO_ANSWER
from s3gym_tui.engine.visibility import require_exploration_seed
from s3gym_games.trl_env import MODE, prompt_row

Policy = Callable[[list, Any], str]  # (messages, game) -> reply text
OnRollout = Callable[[str, int, int], None]  # (game, seed, steps) when a rollout episode ends


class StateStream:
    """An endless stream of states reached by `policy` on `seeds` (never an evaluation seed)."""

    def __init__(self, game: str, seeds: Sequence[int], policy: Policy, step_cap: Optional[int] = None,
                 on_rollout: OnRollout = lambda game, seed, steps: None,
                 fits: Callable[[list], bool] = lambda messages: True) -> None:
        if not seeds:
            raise ValueError("rollouts need exploration seeds (got none)")
        self.game = games.canonical(game)
        self.seeds = [require_exploration_seed(s) for s in seeds]  # engine.visibility's rule
        self.policy = policy
        self.step_cap = step_cap
        self.on_rollout = on_rollout
        self.fits = fits  # False: the prompt would not fit the model's window (the episode ends there)
        self.episodes = 0
        self.states = 0
        self.too_long = 0  # episodes cut short because the next prompt was too long

    def rows(self) -> Iterator[dict]:
        for seed in itertools.cycle(self.seeds):
            yield from self.episode(seed)

    def episode(self, seed: int) -> Iterator[dict]:
        """The states of one rollout episode on `seed`, as prompt rows."""
        env = games.make(self.game, MODE)
        env.reset(seed)
        cap = min(env.max_steps, self.step_cap or env.max_steps)
        actions: list[str] = []
        scores: list[Optional[float]] = []
        turns: list[TurnRecord] = []
        feedback = ""
        while not env.done and len(actions) < cap:
            from s3gym_tui.training import stop

            stop.check_between()  # a requested stop ends the rollout between two states
            messages = build_messages(env, None, turns, feedback)
            if not self.fits(messages):
                self.too_long += 1
                break
            self.states += 1
            yield prompt_row(self.game, seed, actions, scores, env.action_grammar())
            reply = self.policy(messages, env)
            parsed = parse_reply(reply)
            action = parsed.action if parsed.action is not None else NO_ANSWER
            observation = env.observation()
            result = env.step(action)
            turns.append(TurnRecord(observation, action, parsed.self_score, feedback))
            feedback = result.feedback
            actions.append(action)
            scores.append(parsed.self_score)
        self.episodes += 1
        self.on_rollout(self.game, seed, len(actions))
