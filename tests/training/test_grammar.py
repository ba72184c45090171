"""The games' GBNF action rules compiled to regexes: exact for every game and state the reference
policies visit, so the trained model's replies are checked and repaired against the real grammar."""

from __future__ import annotations

import re

import pytest

import s3gym_games as games
from s3gym_tui.training.grammar import (FALLBACK_ACTION_PATTERN, GrammarError, action_is_wellformed,
                                        action_pattern, answer_line_pattern, gbnf_to_regex)


@pytest.mark.parametrize("game", games.names())
def test_every_state_of_a_reference_episode_compiles_and_accepts_the_reference_move(game):
    for seed in (0, 1):
        env = games.make(game, "explore")
        env.reset(seed)
        policy = games.reference_policy(game)
        while not env.done:
            grammar = env.action_grammar()
            pattern, exact = action_pattern(grammar)
            assert exact, grammar
            move = policy.act(env.view())
            assert re.fullmatch(pattern, move.action), (game, seed, move.action, grammar[:200])
            assert action_is_wellformed(move.action, grammar)
            assert re.fullmatch(answer_line_pattern(grammar), f"Answer: {move.action}, Score: 1")
            env.step(move.action)


@pytest.mark.parametrize("body, yes, no", [
    ('"collaborate" | "cheat"', ["collaborate", "cheat"], ["coll", "cheatt", ""]),
    ('("0" | "1") " " ("0" | "1")', ["0 1", "1 1"], ["0  1", "2 0", "01"]),
    ('"a" ("," " "? "b")*', ["a", "a,b", "a, b,b"], ["a,", "b"]),
    ('[0-9]{1,2} [^\\n,]?', ["7", "42x", "123"], ["1234", "4,"]),
    ('"q\\"t" "\\\\"', ['q"t\\'], ["qt"]),
])
def test_gbnf_subset(body, yes, no):
    pattern = gbnf_to_regex(body)
    assert all(re.fullmatch(pattern, text) for text in yes)
    assert not any(re.fullmatch(pattern, text) for text in no)


@pytest.mark.parametrize("body", ['move ::= "x"', 'piece', '"open', '("a"', '"a")', '[abc'])
def test_unsupported_or_broken_grammars_fall_back_to_a_bounded_free_action(body):
    with pytest.raises(GrammarError):
        gbnf_to_regex(body)
    assert action_pattern(body) == (FALLBACK_ACTION_PATTERN, False)


def test_wellformed_uses_the_games_cleanup_allows_end_and_rejects_the_rest():
    grammar = '"collaborate" | "cheat"'
    assert action_is_wellformed(" Collaborate. ", grammar)
    assert action_is_wellformed("END", grammar)
    assert not action_is_wellformed("betray", grammar)
    assert action_is_wellformed("anything", None) and not action_is_wellformed("  ", None)
    assert re.fullmatch(answer_line_pattern(None), "Answer: go north, Score: -3.5")
    assert not re.fullmatch(answer_line_pattern(grammar), "Answer: cheat, Score: 123")
