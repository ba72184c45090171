"""Constrained sampling for transformers (training/constrain.py): the games' own GBNF compiled by llguidance
keeps every grammar-allowed token (so a hot sampler draws different legal actions), the regex scan is the
fallback; and the no-signal verdict reads the reward source's own spread, not the format term's."""

from __future__ import annotations

import pytest

import s3gym_games as games
from s3gym_tui.training.learning_signal import no_signal_reason
from s3gym_tui.training.rewards import zero_spread_share


def _entry(tiny_base):
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer

    torch.manual_seed(0)
    return {"model": AutoModelForCausalLM.from_pretrained(tiny_base).eval(),
            "tokenizer": AutoTokenizer.from_pretrained(tiny_base)}


@pytest.mark.parametrize("game", ["trust", "snake", "tetris", "nullify", "pvz", "minesweeper", "chess"])
def test_llguidance_compiles_every_games_gbnf(tiny_base, game):
    pytest.importorskip("llguidance")
    pytest.importorskip("transformers")
    from s3gym_tui.training.constrain import ENGINE, GrammarConstraint, make_constraint
    from s3gym_tui.training.grammar import answer_line

    env = games.make(game, "explore")
    env.reset(3)
    entry = {"model": None, "tokenizer": _entry(tiny_base)["tokenizer"]}
    processor, used = make_constraint(entry, answer_line(env.action_grammar()), 0, entry["tokenizer"].eos_token_id)
    assert used == ENGINE and isinstance(processor, GrammarConstraint) and entry["engines"] == {ENGINE: 1}


def test_constrained_replies_parse_and_a_hot_sampler_draws_every_legal_action(tiny_base):
    pytest.importorskip("llguidance")
    from s3gym_games.reply import parse_reply
    from s3gym_games.prompt import build_messages
    from s3gym_tui.training.grammar import action_is_wellformed, answer_line
    from s3gym_tui.training.sampling import ReplySampler

    entry = _entry(tiny_base)
    env = games.make("trust", "explore")
    env.reset(3)
    sampler = ReplySampler(entry["model"], entry["tokenizer"], temperature=1.0, max_new_tokens=24)
    ids = sampler.prompt_ids(build_messages(env, None, [], ""))
    actions = []
    for k in range(12):
        parsed = parse_reply(sampler.text(sampler.sample(ids, answer_line(env.action_grammar()), key=k)))
        assert parsed.action is not None and action_is_wellformed(parsed.action, env.action_grammar())
        actions.append(parsed.action)
    assert set(actions) == {"collaborate", "cheat"}
    assert sampler.engines == {"llguidance": 12}


def test_the_regex_scan_is_the_fallback(tiny_base, monkeypatch):
    from s3gym_tui.training import constrain
    from s3gym_tui.training.regex_constraint import RegexConstraint
    from s3gym_tui.training.grammar import answer_line

    monkeypatch.setattr(constrain, "_grammar_matcher", lambda entry, line: None)  # as if llguidance were missing
    entry = {"model": None, "tokenizer": _entry(tiny_base)["tokenizer"]}
    line = answer_line(games.make("trust", "explore").action_grammar())
    processor, used = constrain.make_constraint(entry, line, 0, entry["tokenizer"].eos_token_id)
    assert used == constrain.FALLBACK and isinstance(processor, RegexConstraint)
    with pytest.raises(ValueError, match="llguidance cannot constrain this reply"):
        constrain.make_constraint(entry, line, 0, entry["tokenizer"].eos_token_id, engine="llguidance")


def test_no_signal_is_read_from_the_reward_sources_own_spread():
    prompts = [["a"], ["a"], ["b"], ["b"]]
    source = [2.0, 2.0, 0.0, 0.0]  # the source told no group's replies apart ...
    total = [2.0, 1.0, 0.0, -1.0]  # ... only the format term did (one reply per group did not parse)
    assert zero_spread_share(source, prompts) == 1.0 and zero_spread_share(total, prompts) == 0.0
    metrics = {"source_zero_std_share": 1.0, "frac_reward_zero_std": 0.0, "reward_std": 1.1}
    assert "the reward source gave every group's replies one reward" in no_signal_reason("grpo", metrics)
    assert no_signal_reason("grpo", {**metrics, "source_zero_std_share": 0.5}) is None
    assert zero_spread_share(source, None) is None
