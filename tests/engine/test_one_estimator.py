"""One estimator: `s3gym run --estimate`, the sweep plan and the run dialog (engine.estimate) give the same
calls, tokens and costs for the same run, on every game, pathway and kind of model; and the pathways are
objects of one registry that RunConfig's names match."""

from __future__ import annotations

import re
import typing

import pytest

import s3gym_games as games
from s3gym_tui.engine import pathways
from s3gym_tui.engine.estimate import estimate_run
from s3gym_tui.engine.sweep_plan import plan
from s3gym_tui.models import Pathway, RunConfig
from tests.engine.test_cli import run_cli

MODELS = ("scripted/{game}", "openai/gpt-4o-mini", "anthropic/claude-haiku-4-5")  # free, priced, cache-writing


def figures(lines: list[str]) -> tuple[int, int, int]:
    """(calls, input tokens, output tokens at most) read from an estimate's printed lines."""
    text = " ".join(lines)
    calls = int(re.search(r"at most ([\d,]+) model calls", text).group(1).replace(",", ""))
    tokens_in = int(re.search(r"about ([\d,]+) input tokens", text).group(1).replace(",", ""))
    tokens_out = int(re.search(r"at most ([\d,]+) output tokens", text).group(1).replace(",", ""))
    return calls, tokens_in, tokens_out


@pytest.mark.parametrize("game", games.names())
def test_run_estimate_and_the_sweep_plan_agree_on_every_pathway_and_model(game, capsys, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-not-used")  # nothing is called: --estimate stops first
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-not-used")
    for template in MODELS:
        model = template.format(game=game)
        for pathway in ("none", "history", "summary"):
            config = RunConfig(model=model, game=game, pathway=pathway, explore_episodes=4, eval_every=2,
                               eval_episodes=2, step_cap=6, max_tokens=512)
            code, out, err = run_cli(capsys, "run", game, "-m", model, "--pathway", pathway, "--episodes", "4",
                                     "--eval-every", "2", "--eval-episodes", "2", "--step-cap", "6",
                                     "--max-tokens", "512", "--estimate", "--db", str(tmp_path / "e.db"))
            assert code == 0, err
            one = estimate_run(config)
            planned = plan([config])
            (run,), (per_model,) = planned.runs, planned.models
            printed = figures(out.split("estimate", 1)[1].splitlines())
            assert printed == (one.calls, one.input_tokens, one.output_tokens_max), (model, pathway)
            assert run == one
            assert (per_model.calls, per_model.tokens_in, per_model.tokens_out) == printed
            assert per_model.cost_max == pytest.approx(one.input_cost + one.output_cost_max)
    assert not (tmp_path / "e.db").exists()  # an estimate creates nothing


def test_a_model_without_a_price_is_unpriced_in_both():
    config = RunConfig(model="hosted_vllm/mine", game="snake", pathway="history", explore_episodes=3)
    one, planned = estimate_run(config), plan([config])
    assert not one.price_known and one.input_cost is None
    assert planned.models[0].cost_max is None and planned.unpriced == ["hosted_vllm/mine"]


def test_what_is_left_of_a_run_is_the_whole_estimate_less_what_is_done():
    config = RunConfig(model="scripted/trust", game="trust", pathway="summary", explore_episodes=6, eval_every=3)
    whole, left = estimate_run(config), estimate_run(config, frozenset({0, 1, 2}), frozenset({0, 3}))
    assert left.explore_calls == whole.explore_calls // 2
    assert left.eval_calls == whole.eval_calls // 3  # x = 6 of 0, 3, 6
    assert left.summary_calls == 4  # the summaries of states 3 to 6 (3 is written as episode 3 starts)
    assert 0 < left.input_tokens < whole.input_tokens


def test_the_pathways_are_one_registry_that_runs_name():
    assert set(pathways.names()) == set(typing.get_args(Pathway))
    assert pathways.IN_CONTEXT == ("history", "summary")
    assert [p.name for p in pathways.REGISTRY.values() if p.writes_summaries] == ["summary"]
    with pytest.raises(ValueError, match="unknown pathway 'memory': known are none, history, summary, trained"):
        pathways.pathway("memory")
    budget, episode = 1_000, 300
    assert [pathways.pathway("history").hint_tokens(x, budget, episode) for x in range(5)] == [0, 300, 600, 900,
                                                                                                1000]
    assert [pathways.pathway("summary").hint_tokens(x, budget, episode) for x in range(3)] == [
        0, pathways.SUMMARY_TOKENS, pathways.SUMMARY_TOKENS]
    assert pathways.pathway("none").hint_tokens(4, budget, episode) == 0
    assert list(pathways.pathway("summary").summary_states(3)) == [1, 2, 3]
    assert all(p.description for p in pathways.REGISTRY.values())
