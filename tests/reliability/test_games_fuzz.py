"""Games under fuzzing: the `benchmarks/fuzz_games.py` harness with a small budget (the script runs
a million actions), checks that the harness notices a failure, and the parts of the game contract
the engine leans on outside a running episode."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import s3gym_games as games

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
from benchmarks.fuzz_games import ADVERSARIAL, fuzz, mutate, next_action, random_unicode  # noqa: E402

BUDGET = 20_000


def test_twenty_thousand_random_and_adversarial_actions_raise_nothing():
    stats = fuzz(BUDGET, seed=2026)
    assert stats.exceptions == []
    assert stats.actions == BUDGET
    assert set(stats.by_game) == set(games.names())
    assert all(n >= BUDGET // len(games.names()) - 1 for n in stats.by_game.values())
    assert {"sample", "mutated", "adversarial", "unicode"} <= set(stats.by_kind)
    assert stats.deep_checks > 0 and stats.episodes > len(games.names()) * 2


def test_the_harness_reports_a_game_that_raises(monkeypatch):
    from s3gym_games.trust.game import TrustGame

    original = TrustGame._apply

    def fragile(self, action):
        if "\x00" in action or len(action) > 500:
            raise IndexError("boom")
        return original(self, action)

    monkeypatch.setattr(TrustGame, "_apply", fragile)
    stats = fuzz(3_000, seed=1, names=["trust"])
    assert stats.exceptions and all("IndexError: boom" in e[-1] for e in stats.exceptions)


def test_the_mix_contains_what_it_promises():
    import random

    rng = random.Random(0)
    game = games.make("snake", "eval")
    game.reset(1_000_000)
    kinds = {next_action(game, rng)[0] for _ in range(20_000)}
    assert kinds >= {"sample", "mutated", "adversarial", "unicode"}
    text = random_unicode(random.Random(1), 5_000)
    assert any(0xD800 <= ord(c) <= 0xDFFF for c in text) and any(ord(c) < 32 for c in text)
    assert len({mutate("3 90", random.Random(i)) for i in range(200)}) > 50
    assert "" in ADVERSARIAL and any(len(a) >= 500 for a in ADVERSARIAL)


@pytest.mark.parametrize("name", games.names())
@pytest.mark.parametrize("mode", games.MODES)
def test_rules_and_answer_format_before_reset(name, mode):
    """The engine asks a game that is not started for its rules (summary prompts, comparisons)."""
    game = games.make(name, mode)
    assert game.rules().strip() and game.answer_format().strip()
