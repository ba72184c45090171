"""The Gymnasium adapter: registered ids per game and mode, Gymnasium's own env checker on all of them,
seeds served by mode (eval mode: evaluation seeds only), and docs/games.md's example run as written."""

from __future__ import annotations

import re
import subprocess
import sys
import warnings
from pathlib import Path

import gymnasium
import pytest
from gymnasium.utils.env_checker import check_env

import s3gym_games as games
from s3gym_games.gym_env import S3GymEnv, env_id, register_envs
from s3gym_games.seeds import EVAL_SEED_BASE, phase_of_seed

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("mode", games.MODES)
@pytest.mark.parametrize("name", games.names())
def test_gymnasiums_env_checker_passes(name, mode):
    env = gymnasium.make(env_id(name, mode))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # the checker reports what it dislikes as warnings: none allowed
        check_env(env.unwrapped)
    env.close()


def test_ids_are_registered_per_game_and_mode():
    ids = register_envs()
    assert len(ids) == 14 and "s3gym/trust-eval-v0" in ids and "s3gym/pvz-explore-v0" in ids
    assert all(i in gymnasium.registry for i in ids)
    env = gymnasium.make("s3gym_games.gym_env:s3gym/chess-eval-v0")  # the module form imports it first
    assert isinstance(env.unwrapped, S3GymEnv) and env.unwrapped.game.name == "chess"


@pytest.mark.parametrize("name", games.names())
def test_eval_mode_serves_evaluation_seeds_only_and_explore_mode_never(name):
    for mode in games.MODES:
        env = gymnasium.make(env_id(name, mode))
        for seed in range(20):
            _, info = env.reset(seed=seed)
            assert phase_of_seed(info["game_seed"]) == mode
        other = "an exploration" if mode == "eval" else "an evaluation"
        with pytest.raises(ValueError, match=f"is {other} seed: {mode} mode plays seeds"):
            env.reset(options={"game_seed": 7 if mode == "eval" else EVAL_SEED_BASE + 7})
        with pytest.raises(ValueError, match="below every seed range"):
            env.reset(options={"game_seed": -1})
        _, info = env.reset(options={"game_seed": EVAL_SEED_BASE + 7 if mode == "eval" else 7})
        assert info["game_seed"] == (EVAL_SEED_BASE + 7 if mode == "eval" else 7)


@pytest.mark.parametrize("name", games.names())
def test_an_episode_replays_as_the_game_and_ends_with_its_score(name):
    env = gymnasium.make(env_id(name, "eval"))
    observation, info = env.reset(seed=3)
    policy, game = games.reference_policy(name), env.unwrapped.game
    assert observation == game.observation() and info["rules"] == game.rules()
    actions, rewards, done = [], [], False
    while not done:
        actions.append(policy.act(game.view()).action)
        observation, reward, terminated, truncated, info = env.step(actions[-1])
        rewards.append(reward)
        assert observation in env.observation_space and not (terminated and truncated)
        done = terminated or truncated
    seed = env.unwrapped.game.seed
    replay = games.game_class(name).replay("eval", seed, actions)
    assert info["score"] == replay.score() == games.verify_trajectory(name, "eval", seed, actions)
    assert info["score"] == pytest.approx(sum(rewards) * games.game_class(name).score_per_reward("eval"))
    assert (terminated, truncated) == (replay.terminated, replay.truncated)


def test_a_smaller_cap_given_to_make_truncates():
    env = gymnasium.make("s3gym/trust-explore-v0", max_episode_steps=3)
    env.reset(seed=1)
    flags = [env.step("collaborate")[2:4] for _ in range(3)]
    assert flags == [(False, False), (False, False), (False, True)]


def test_bad_arguments_are_refused_with_one_line():
    with pytest.raises(ValueError, match="unknown game 'go'"):
        S3GymEnv("go")
    with pytest.raises(ValueError, match="unknown mode 'hard'"):
        S3GymEnv("trust", "hard")
    with pytest.raises(ValueError, match="unknown render mode"):
        S3GymEnv("trust", render_mode="human")


def test_the_documented_example_runs():
    page = (ROOT / "docs" / "games.md").read_text(encoding="utf-8")
    block = re.search(r"<!-- gymnasium example -->\n```python\n(.*?)```", page, re.S)
    assert block, "docs/games.md's Gymnasium example is missing"
    namespace: dict = {}
    exec(compile(block.group(1), "docs/games.md", "exec"), namespace)
    assert namespace["info"]["score"] == namespace["total"]


def test_without_gymnasium_the_import_names_the_extra():
    code = "import sys; sys.modules['gymnasium'] = None\nimport s3gym_games.gym_env"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines()[-1] == ("ImportError: s3gym_games.gym_env needs gymnasium: "
                                                    "pip install 's3gym-games[gym]' (or 's3gym[gym]')")
