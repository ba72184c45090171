"""Rule tests for Nullify (games/nullify)."""

from __future__ import annotations

import random
import re
from fractions import Fraction

import pytest

from s3gym_games import make, reference_policy
from s3gym_games.nullify.game import (MAX_DENOMINATOR, MAX_NUMERATOR, NullifyGame, apply_op, combine,
                                format_unit, has_legal_move, num, parse_unit)

EVAL_SEEDS = range(1_000_000, 1_000_050)
EXPLORE_SEEDS = range(0, 50)


def board(*texts: str, mode: str = "explore") -> NullifyGame:
    """A game whose board is set directly from unit texts."""
    game = NullifyGame(mode)
    game.reset(0)
    game.units = [parse_unit(t) for t in texts]
    return game


def shown(game: NullifyGame) -> list[str]:
    return [format_unit(u) for u in game.units]


# ----- units and arithmetic -----------------------------------------------------------------

def test_unit_format_and_parse_round_trip():
    for text in ("+7", "-3", "+5/2", "-1/12", "0", "*3", "*-10", "/4", "/-1", "sqrt", "square",
                 "reciprocal", "floor", "ceil"):
        assert format_unit(parse_unit(text)) == text
    assert format_unit(num(Fraction(10, 4))) == "+5/2"
    for bad in ("*0", "/0", "*11", "/-11", "1/0", "sqrt2", "x"):
        with pytest.raises(ValueError):
            parse_unit(bad)


def test_arithmetic_is_exact_fractions():
    game = board("+1/3", "+1/3", "+1/3", "-1")
    game.step("0 1")
    assert shown(game) == ["+1/3", "-1", "+2/3"]
    assert all(isinstance(u[1], Fraction) for u in game.units)
    game.step("0 2")
    assert shown(game) == ["-1", "+1"]
    result = game.step("0 1")
    assert result.reward == 1.0 and result.terminated and game.score() == 1.0
    # 1/10 three times is exactly 3/10 (no float drift)
    game = board("+1/10", "+1/10", "+1/10", "-3/10")
    game.step("0 1")
    assert shown(game) == ["+1/10", "-3/10", "+1/5"]
    game.step("0 2")
    assert shown(game) == ["-3/10", "+3/10"]


@pytest.mark.parametrize("number, op, expected", [
    ("+3", "*4", "+12"), ("-5/2", "*-2", "+5"), ("+7", "/2", "+7/2"), ("+6", "/-3", "-2"),
    ("+9/4", "sqrt", "+3/2"), ("+16", "sqrt", "+4"), ("0", "sqrt", "0"),
    ("-3/2", "square", "+9/4"), ("-2/3", "reciprocal", "-3/2"), ("+5", "reciprocal", "+1/5"),
    ("-7/2", "floor", "-4"), ("+7/2", "floor", "+3"), ("-7/2", "ceil", "-3"), ("+7/2", "ceil", "+4"),
    ("+4", "floor", "+4"), ("-4", "ceil", "-4"),
])
def test_each_operator(number, op, expected):
    for order in ("0 1", "1 0"):  # number+operator in either order
        game = board("+100", number, op)
        game.step("1 2" if order == "0 1" else "2 1")
        assert shown(game) == ["+100", expected]


@pytest.mark.parametrize("number, op, reason", [
    ("-4", "sqrt", "negative"), ("+2", "sqrt", "not an exact rational"),
    ("+8/9", "sqrt", "not an exact rational"), ("0", "reciprocal", "reciprocal of 0"),
])
def test_invalid_operator_applications(number, op, reason):
    game = board(number, op, "+1")
    before = list(game.units)
    result = game.step("0 1")
    assert not result.valid and reason in result.feedback
    assert game.units == before and game.steps == 1 and result.reward == 0.0


def test_division_by_zero_is_invalid():
    assert isinstance(apply_op(("/", 0), Fraction(3)), str)  # never generated or parseable


def test_operator_plus_operator_is_invalid():
    game = board("*2", "sqrt", "+1", "-1")
    result = game.step("0 1")
    assert not result.valid and "two operators" in result.feedback
    assert shown(game) == ["*2", "sqrt", "+1", "-1"]


def test_renumbering_and_result_appended_last():
    game = board("+1", "+2", "*3", "-4", "+5")
    result = game.step("3 1")
    assert result.valid
    assert shown(game) == ["+1", "*3", "+5", "-2"]
    assert game.observation() == "0: +1\n1: *3\n2: +5\n3: -2"
    game.step("3 1")  # operator after the number index-wise does not matter
    assert shown(game) == ["+1", "+5", "-6"]


def test_zero_sum_removes_both_and_creates_nothing():
    game = board("+5/2", "*2", "-5/2", "+1", "-1")
    result = game.step("2 0")
    assert result.valid and "cancelled" in result.feedback
    assert shown(game) == ["*2", "+1", "-1"]
    assert not result.terminated and result.reward == 0.0


def test_dead_end_terminates_with_score_zero():
    game = board("+1", "+1", "sqrt")  # 1 + 1 = 2, and sqrt(2) is not rational
    result = game.step("0 1")
    assert result.valid and result.terminated and result.reward == 0.0
    assert "No legal combination" in result.feedback and game.score() == 0.0
    game = board("+3", "-3", "*2")  # cancelling leaves a lone operator
    assert game.step("0 1").terminated and game.score() == 0.0
    assert has_legal_move([num(2), ("sqrt", 0), ("reciprocal", 0)])  # reciprocal fits
    assert not has_legal_move([num(-2), ("sqrt", 0)])
    assert not has_legal_move([("sqrt", 0), ("*", 2)])
    assert has_legal_move([num(1), num(2)])


def test_combine_function_contract():
    assert combine(num(2), num(-2)) == (True, None, "")
    assert combine(("*", 3), num(2)) == (True, num(6), "")
    ok, _, error = combine(("*", 3), ("floor", 0))
    assert not ok and error


# ----- actions -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["0 1", "0,1", "0, 1", "(0, 1)", "(0,1)", "[0 1]", "combine 0 1",
                                  "Combine(0, 1)", "0 and 1", "  0   1  ", "0 1.", "0+1"])
def test_action_spellings(text):
    game = board("+1", "-1", "+2", "-2")
    result = game.step(text)
    assert result.valid, result.feedback
    assert shown(game) == ["+2", "-2"]


@pytest.mark.parametrize("text", ["", "0", "0 1 2", "a b", "0 0", "0 9", "-1 0", "0.5 1",
                                  "\u0660 \u0661", "0 1 please", "x" * 10_000, "0\x001", "１ ２"])
def test_invalid_actions_cost_the_step_in_both_modes(text):
    for mode in ("explore", "eval"):
        game = board("+1", "-1", "+2", "-2", mode=mode)
        result = game.step(text)
        assert not result.valid and result.reward == 0.0 and not result.terminated
        assert result.feedback.startswith("Invalid") and len(result.feedback) < 200
        assert result.feedback.isascii()
        assert game.steps == 1 and len(game.units) == 4


def test_out_of_range_feedback_names_legal_indices():
    game = board("+1", "-1", "+2")
    result = game.step("0 7")
    assert "no unit 7" in result.feedback and "0-2" in result.feedback


def test_step_cap_is_50():
    game = board("+1", "+1", "+1", "-3")
    for _ in range(49):
        assert not game.step("0 0").done
    assert game.step("0 0").truncated
    assert game.score() == 0.0


# ----- generation ---------------------------------------------------------------------------------

def _numbers(game):
    return [Fraction(u[1]) for u in game.units if u[0] == "num"]


@pytest.mark.parametrize("mode, lo, hi", [("explore", 3, 7), ("eval", 5, 10)])
def test_generated_instances_are_solvable_and_readable(mode, lo, hi):
    seen_k = set()
    for seed in range(300):
        game = make("nullify", mode)
        game.reset(seed)
        assert lo <= game.construction_steps <= hi
        seen_k.add(game.construction_steps)
        assert len(game.solution) == game.construction_steps
        assert has_legal_move(game.units)
        for x in _numbers(game):
            assert x != 0 and abs(x.numerator) <= MAX_NUMERATOR and x.denominator <= MAX_DENOMINATOR
        replay = NullifyGame.replay(mode, seed, list(game.solution))
        assert replay.score() == 1.0 and replay.rewards[-1] == 1.0 and replay.terminated
    assert seen_k == set(range(lo, hi + 1))


def test_generation_is_deterministic_and_varied():
    a, b = make("nullify", "eval"), make("nullify", "eval")
    assert a.reset(1_000_123) == b.reset(1_000_123)
    boards = {make("nullify", "eval").reset(s) for s in range(50)}
    assert len(boards) == 50


def test_observation_layout():
    game = make("nullify", "eval")
    obs = game.reset(1_000_000)
    lines = obs.split("\n")
    assert all(re.fullmatch(r"\d+: (\+\d+(/\d+)?|-\d+(/\d+)?|0|[*/]-?\d+|sqrt|square|reciprocal|"
                            r"floor|ceil)", line) for line in lines)
    assert [int(line.split(":")[0]) for line in lines] == list(range(len(lines)))
    assert obs.isascii()
    assert game.view().units == tuple(game.units)


def test_grammar_and_sample_action():
    game = make("nullify", "explore")
    game.reset(3)
    grammar = game.action_grammar()
    n = len(game.units)
    assert f'"{n - 1}"' in grammar and f'"{n}"' not in grammar
    rng = random.Random(0)
    actions = [game.sample_action(rng) for _ in range(100)]
    assert sum(bool(re.fullmatch(r"\d+ \d+", a)) for a in actions) == 100


def test_snapshot_restore_round_trip():
    game = make("nullify", "eval")
    game.reset(1_000_007)
    policy = reference_policy("nullify")
    game.step(policy.act(game.view()).action)
    game.step("0 0")
    snap = game.snapshot()
    tail = []
    while not game.done:
        tail.append(game.step(policy.act(game.view()).action))
    game.restore(snap)
    again = []
    while not game.done:
        again.append(game.step(policy.act(game.view()).action))
    assert [(r.observation, r.feedback, r.reward) for r in tail] == \
        [(r.observation, r.feedback, r.reward) for r in again]


# ----- reference policy ---------------------------------------------------------------------------

def _run(mode, seeds, chooser):
    scores = []
    for seed in seeds:
        game = make("nullify", mode)
        game.reset(seed)
        while not game.done:
            game.step(chooser(game))
        scores.append(game.score())
    return scores


@pytest.mark.parametrize("mode, seeds", [("eval", EVAL_SEEDS), ("explore", EXPLORE_SEEDS)])
def test_reference_policy_solves_every_seed(mode, seeds):
    policy = reference_policy("nullify")
    checks = []

    def chooser(game):
        move = policy.act(game.view())
        checks.append((move, game))
        return move.action

    ref = _run(mode, seeds, chooser)
    rng = random.Random(7)
    rand = _run(mode, seeds, lambda g: g.sample_action(rng))
    print(f"\nnullify {mode}: reference mean score {sum(ref) / len(ref):.2f}, "
          f"random mean score {sum(rand) / len(rand):.2f} over {len(ref)} seeds")
    assert sum(ref) == len(ref)


def test_reference_self_score_matches_reward():
    policy = reference_policy("nullify")
    for seed in EVAL_SEEDS[:20]:
        game = make("nullify", "eval")
        game.reset(seed)
        while not game.done:
            move = policy.act(game.view())
            assert game.step(move.action).reward == move.expected_reward


def test_reference_policy_from_a_perturbed_state_never_crashes():
    policy = reference_policy("nullify")
    rng = random.Random(1)
    for seed in range(30):
        game = make("nullify", "eval")
        game.reset(1_000_000 + seed)
        game.step(game.sample_action(rng))
        while not game.done:
            move = policy.act(game.view())
            assert move.expected_reward in (0.0, 1.0)
            game.step(move.action)
