"""The one parametrised suite every game passes: determinism, invalid actions, replay, fuzzing."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rich.console import Console

import s3gym_games as games
from s3gym_games.base import GameError, StepResult

NAMES = games.names()
SEEDS = [0, 1, 7, 1_000_000, 1_000_003]


def _random_play(name: str, mode: str, seed: int, n: int = 80, policy_seed: int = 5) -> list[tuple]:
    game = games.make(name, mode)
    trace = [game.reset(seed)]
    rng = random.Random(policy_seed)
    for _ in range(n):
        if game.done:
            break
        result = game.step(game.sample_action(rng))
        trace.append((result.observation, result.feedback, result.reward, result.terminated, result.truncated))
    trace.append(game.score())
    return trace


def test_registry_lists_seven_games_and_rejects_unknown():
    assert NAMES == ["chess", "minesweeper", "nullify", "tetris", "snake", "pvz", "trust"]
    with pytest.raises(GameError, match="unknown game 'go'"):
        games.make("go")
    with pytest.raises(GameError, match="unknown mode"):
        games.make("tetris", mode="hard")
    assert games.canonical("Plants-vs-Zombies") == "pvz"


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", games.MODES)
def test_same_seed_same_actions_identical(name, mode):
    for seed in SEEDS[:3]:
        assert _random_play(name, mode, seed) == _random_play(name, mode, seed)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", games.MODES)
def test_different_seeds_differ(name, mode):
    """Different seeds give different episodes (Trust's first board is always empty: its opponent is
    hidden, so whole trajectories are compared)."""
    traces = {json.dumps(_random_play(name, mode, seed, n=20)) for seed in range(10)}
    assert len(traces) > 1


_SCRIPT = """
import json, random, sys
import s3gym_games as games
name, mode, seed = sys.argv[1], sys.argv[2], int(sys.argv[3])
g = games.make(name, mode); out = [g.reset(seed)]; rng = random.Random(5)
for _ in range(80):
    if g.done: break
    r = g.step(g.sample_action(rng)); out.append([r.observation, r.feedback, r.reward])
out.append(g.score()); print(json.dumps(out))
"""


@pytest.mark.parametrize("name", NAMES)
def test_identical_across_processes(name):
    """Byte-identical across interpreter processes (different hash seeds)."""
    outs = []
    for hash_seed in ("1", "2"):
        proc = subprocess.run([sys.executable, "-c", _SCRIPT, name, "eval", "1000001"], capture_output=True,
                              text=True, check=True, env={"PYTHONHASHSEED": hash_seed, "PATH": "",
                                                         "PYTHONPATH": os.environ.get("PYTHONPATH", "")})
        outs.append(proc.stdout)
    assert outs[0] == outs[1]
    local = _random_play(name, "eval", 1000001)
    assert json.loads(outs[0])[-1] == local[-1]


@pytest.mark.parametrize("name", NAMES)
def test_configs_have_both_modes_and_respect_the_harness_cap(name):
    cls = games.game_class(name)
    assert set(cls.CONFIGS) == set(games.MODES)
    for mode in games.MODES:
        assert 1 <= games.make(name, mode).max_steps <= 64
        lo, hi = cls.score_range(mode)
        assert lo < hi and cls.score_eps(mode) > 0


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", games.MODES)
def test_interface_pieces(name, mode):
    game = games.make(name, mode)
    with pytest.raises(GameError):
        game.step("anything")
    obs = game.reset(3)
    assert obs == game.observation() and obs.isascii() and obs.strip()
    assert game.rules().strip() and game.answer_format().strip() and game.action_grammar().strip()
    Console(file=open("/dev/null", "w"), width=120).print(game.render())
    assert game.view() is not None
    assert isinstance(game.title, str) and isinstance(game.description, str)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", games.MODES)
def test_step_cap_and_end(name, mode):
    game = games.make(name, mode)
    game.reset(11)
    result = game.step("END")
    assert result.terminated and game.done
    after = game.step("anything")
    assert after.info.get("over") and after.reward == 0
    game.reset(11)
    rng = random.Random(0)
    while not game.done:
        game.step(game.sample_action(rng))
    assert game.steps <= game.max_steps


def _episodes(name: str, mode: str):
    """Finished episodes of random and reference play on a few seeds (both the mode's seed ranges), with
    the score after each step."""
    for seed in (0, 5, 1_000_002):
        for driver in ("random", "reference"):
            game, rng, policy = games.make(name, mode), random.Random(seed), games.reference_policy(name)
            game.reset(seed)
            results, scores = [], []
            while not game.done:
                action = game.sample_action(rng) if driver == "random" else policy.act(game.view()).action
                results.append(game.step(action))
                scores.append(game.score())
            yield game, results, scores


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", games.MODES)
def test_only_a_step_cap_truncates_and_a_natural_end_terminates(name, mode):
    for game, results, _ in _episodes(name, mode):
        assert not any(r.terminated or r.truncated for r in results[:-1])
        last = results[-1]
        assert last.terminated != last.truncated and (game.terminated, game.truncated) == (last.terminated,
                                                                                           last.truncated)
        if last.truncated:  # a cap, never the rules' own length
            assert game.steps == game.max_steps and not (game.fixed_length and game.steps == game.config.max_steps)
        if game.fixed_length and game.steps == game.config.max_steps:
            assert last.terminated  # e.g. trust's tenth round, chess's fifth prediction


def test_the_harness_cap_truncates_even_a_game_of_fixed_length():
    from s3gym_games.trust.game import TrustConfig, TrustGame

    class LongTrust(TrustGame):
        CONFIGS = {m: TrustConfig(max_steps=100, opponent_weights=c.opponent_weights)
                   for m, c in TrustGame.CONFIGS.items()}

    class CappedTrust(TrustGame):
        fixed_length = False  # the same ten steps read as a cap

    for cls, steps, flags in ((LongTrust, 64, (False, True)), (CappedTrust, 10, (False, True)),
                              (TrustGame, 10, (True, False))):
        game = cls("eval")
        game.reset(1_000_001)
        while not game.done:
            result = game.step("collaborate")
        assert (game.steps, (result.terminated, result.truncated)) == (steps, flags), cls.__name__


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", games.MODES)
def test_the_score_follows_from_the_step_rewards_as_stated(name, mode):
    scale = games.game_class(name).score_per_reward(mode)
    for game, results, scores in _episodes(name, mode):
        total = 0.0
        for result, score in zip(results, scores):  # at every step, not only at the end
            total += result.reward
            assert score == pytest.approx(scale * total, abs=1e-9)
    assert scale == (pytest.approx(1 / 5) if name == "chess" else 1.0)  # chess: sum / max steps (games.md)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", games.MODES)
def test_replay_and_verify_recompute_the_score(name, mode):
    game = games.make(name, mode)
    game.reset(1_000_010)
    policy = games.reference_policy(name)
    while not game.done:
        game.step(policy.act(game.view()).action)
    assert games.verify_trajectory(name, mode, 1_000_010, game.actions) == game.score()
    rebuilt = games.game_class(name).replay(mode, 1_000_010, game.actions)
    assert rebuilt.observation() == game.observation()


@pytest.mark.parametrize("name", NAMES)
def test_snapshot_restore_gives_identical_continuations(name):
    game = games.make(name, "explore")
    game.reset(21)
    rng = random.Random(1)
    for _ in range(3):
        if not game.done:
            game.step(game.sample_action(rng))
    snap = game.snapshot()
    tail = [game.sample_action(random.Random(9)) for _ in range(10)]

    def continue_from() -> list:
        out = []
        for action in tail:
            if game.done:
                break
            r = game.step(action)
            out.append((r.observation, r.feedback, r.reward))
        return out + [game.score()]

    first = continue_from()
    game.restore(snap)
    assert continue_from() == first


ADVERSARIAL = ["", " ", "\x00", "\n\n", "END.", "💣", "1 2 3 4 5", "((((", ")", "-1", "999999999999999999999",
               "uncover (3,4)", "flag(0,0)", "A:(1,2)", "0 0", "3 90", "UP", "W 0 0", "collaborate.",
               "\u202e", "a" * 100_000, "\ud800", "Answer: 3 90, Score: 1", "None", "nan", "1e309",
               ";;;;", "X 1 1; W 2 2; F 0 0", "0,1", "uncover (9,9)", "A:(0,0), A:(1,1)"]


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", games.MODES)
def test_adversarial_actions_never_raise(name, mode):
    game = games.make(name, mode)
    game.reset(5)
    for action in ADVERSARIAL:
        if game.done:
            game.reset(5)
        before = game.steps
        result = game.step(action)
        assert isinstance(result, StepResult) and isinstance(result.feedback, str)
        assert game.steps == before + 1
        assert result.observation == game.observation()


@pytest.mark.parametrize("name", NAMES)
@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(actions=st.lists(st.one_of(st.text(max_size=60), st.from_regex(r"[A-Za-z ]{0,8}[0-9 ,();:]{0,12}", fullmatch=True)),
                        max_size=12),
       seed=st.integers(min_value=0, max_value=2_000_000), mode=st.sampled_from(games.MODES))
def test_fuzzed_action_strings_never_raise(name, actions, seed, mode):
    game = games.make(name, mode)
    game.reset(seed)
    for action in actions:
        if game.done:
            break
        result = game.step(action)
        if not result.valid:
            assert result.feedback.strip(), "invalid actions must say what was wrong"
        assert isinstance(result.reward, float)
    assert isinstance(game.score(), float)
