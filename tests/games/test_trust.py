"""Trust Evolution: payoffs, each hidden opponent, mode sampling, reference policy level."""

from __future__ import annotations

import collections
import random
import statistics

import pytest

import s3gym_games as games
from s3gym_games.base import Move, Policy, play
from s3gym_games.trust.game import CHEAT as X, COLLABORATE as C, OPPONENTS, TrustGame, opponent_move

RNG = random.Random(0)


def responses(strategy: str, agent: list[str]) -> list[str]:
    """The opponent's move in each round, given the agent's moves."""
    mine: list[str] = []
    for i in range(len(agent)):
        mine.append(opponent_move(strategy, agent[:i], mine, RNG))
    return mine


def test_payoff_matrix():
    game = TrustGame("eval")
    game.reset(0)
    game.opponent = "always-collaborate"
    assert game.step("collaborate").reward == 2
    assert game.step("cheat").reward == 3
    game.opponent = "always-cheat"
    assert game.step("collaborate").reward == -1
    assert game.step("CHEAT.").reward == 0
    assert game.score() == 4


@pytest.mark.parametrize("strategy,agent,expected", [
    ("copycat", [C, X, C, X], [C, C, X, C]),
    ("always-collaborate", [X, X], [C, C]),
    ("always-cheat", [C, C], [X, X]),
    ("grudger", [C, X, C, C], [C, C, X, X]),
    ("detective", [C, C, C, C, C, C], [C, X, C, C, X, X]),       # never cheated back: exploit
    ("detective", [C, X, C, C, X, C], [C, X, C, C, C, X]),       # cheated back: copycat from round 5
    ("copykitten", [X, C, X, X, C, C], [C, C, C, C, X, C]),      # cheats only after two cheats in a row
    ("simpleton", [C, X, X, C, C], [C, C, X, C, C]),             # win-stay, lose-shift
])
def test_opponent_strategies(strategy, agent, expected):
    assert responses(strategy, agent) == expected


def test_random_opponent_uses_the_episode_rng_only():
    a, b = TrustGame("eval"), TrustGame("eval")
    a.reset(5), b.reset(5)
    a.opponent = b.opponent = "random"
    random.seed(123)
    moves_a = [a.step("collaborate").info["opponent_move"] for _ in range(10)]
    random.seed(999)
    moves_b = [b.step("collaborate").info["opponent_move"] for _ in range(10)]
    assert moves_a == moves_b and set(moves_a) == {C, X}


def test_invalid_action_costs_the_step_and_plays_no_round():
    game = TrustGame("eval")
    game.reset(3)
    result = game.step("betray")
    assert not result.valid and "collaborate or cheat" in result.feedback
    assert game.steps == 1 and game.agent_moves == [] and result.reward == 0
    assert "Round: 1 of 10" in result.observation


def test_modes_sample_opponents_as_specified():
    def counts(mode):
        return collections.Counter(games.make("trust", mode).reset(s) and _opp(mode, s) for s in range(4000))

    def _opp(mode, seed):
        g = games.make("trust", mode)
        g.reset(seed)
        return g.opponent

    explore, evaluation = counts("explore"), counts("eval")
    assert set(explore) == set(OPPONENTS) == set(evaluation)
    easy = ("always-collaborate", "always-cheat", "copycat")
    assert all(explore[o] > 2 * explore["grudger"] for o in easy)  # weights 3 vs 1
    assert max(evaluation.values()) < 1.3 * min(evaluation.values())  # uniform


def test_observation_shows_history_not_payoffs():
    game = TrustGame("explore")
    game.reset(1)
    game.step("cheat")
    obs = game.observation()
    assert "1: cheat /" in obs and "payoff" not in obs.lower()


class AlwaysCollaborate(Policy):
    def act(self, view):
        return Move("collaborate", 2.0)


class RandomPolicy(Policy):
    def __init__(self):
        self.rng = random.Random(0)

    def act(self, view):
        return Move(self.rng.choice([C, X]), 0.0)


@pytest.mark.parametrize("mode,base", [("eval", 1_000_000), ("explore", 0)])
def test_reference_policy_beats_always_collaborate(mode, base):
    seeds = range(base, base + 50)
    ref = statistics.mean(play(games.make("trust", mode), games.reference_policy("trust"), s).score() for s in seeds)
    coop = statistics.mean(play(games.make("trust", mode), AlwaysCollaborate(), s).score() for s in seeds)
    rand = statistics.mean(play(games.make("trust", mode), RandomPolicy(), s).score() for s in seeds)
    print(f"\ntrust {mode}: reference {ref:.2f}, always-collaborate {coop:.2f}, random {rand:.2f}")
    assert ref > coop + 2


def test_reference_policy_exploits_detective_and_never_loses_to_always_cheat_for_long():
    game = TrustGame("eval")
    game.reset(0)
    game.opponent = "always-cheat"
    policy = games.reference_policy("trust")
    while not game.done:
        game.step(policy.act(game.view()).action)
    assert game.score() >= -1  # at most one sucker payoff
