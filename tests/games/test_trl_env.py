"""The TRL environment as a public API of the package: reset(**row) gives the engine's prompt for a state,
no other public method (TRL would offer it to the model as a tool), exploration seeds only, and
step_outcome scores a reply on a copy of the state."""

from __future__ import annotations

import inspect

import pytest

import s3gym_games as games
from s3gym_games.prompt import TurnRecord, build_messages
from s3gym_games.seeds import EVAL_SEED_BASE
from s3gym_games.trl_env import GameEnvironment, completion_text, prompt_row, step_outcome


def test_reset_gives_the_engines_prompt_for_the_state_and_nothing_else_is_a_tool():
    row = prompt_row("trust", 3, ["collaborate", "cheat"], [2.0, None])
    env = GameEnvironment()
    text = env.reset(**{k: v for k, v in row.items() if k != "prompt"})
    game = games.make("trust", "explore")
    game.reset(3)
    turns = []
    feedback = ""
    for action, score in (("collaborate", 2.0), ("cheat", None)):
        observation = game.observation()
        result = game.step(action)
        turns.append(TurnRecord(observation, action, score, feedback))
        feedback = result.feedback
    assert text == build_messages(game, None, turns, feedback)[-1]["content"]
    methods = {n for n, m in inspect.getmembers(GameEnvironment, inspect.isfunction) if not n.startswith("_")}
    assert methods == {"reset"}


def test_an_evaluation_seed_is_refused():
    with pytest.raises(ValueError, match="is an evaluation seed: explore mode plays seeds 0..999,999"):
        GameEnvironment().reset(game="trust", seed=EVAL_SEED_BASE + 1)


def test_the_docstrings_reward_function_scores_replies_on_a_copy():
    envs = [GameEnvironment(), GameEnvironment()]
    for env in envs:
        env.reset(game="trust", seed=4)
    completions = [[{"role": "assistant", "content": "Answer: collaborate, Score: 2"}], "no answer"]
    outcomes = [step_outcome(env, completion_text(c)) for c, env in zip(completions, envs)]
    replay = games.game_class("trust").replay("explore", 4, ["collaborate"])
    assert outcomes[0].reward == replay.rewards[0] and outcomes[0].self_score == 2.0 and outcomes[0].valid
    assert not outcomes[1].parsed and not outcomes[1].valid and outcomes[1].reward == 0.0
    assert envs[0].state == ("trust", 4, ())  # the state itself did not move
