"""The embedded model (SmolLM2-135M through llama.cpp, grammar-constrained) on every game."""

from __future__ import annotations

import json

import pytest

import games
from s3gym_tui.engine.parsing import parse_reply

from tests.engine.helpers import check_run_consistency, run_protocol


@pytest.mark.slow
@pytest.mark.timeout(1800)  # prompt processing of the 135M model is slow on a busy 2-core machine
@pytest.mark.parametrize("game", games.names())
def test_short_local_run_every_reply_parses(tmp_path, game):
    store, run = run_protocol(tmp_path / "l.db", model="local/smollm2-135m", game=game, pathway="history",
                              explore_episodes=1, eval_every=1, eval_episodes=1, step_cap=2, max_tokens=384,
                              decoding_seed=0)
    assert run.status == "finished"
    check_run_consistency(store, run)
    steps = [(e, s) for e in store.episodes(run.id) for s in store.steps(e.id)]
    assert len(steps) >= 6
    for episode, step in steps:
        parsed = parse_reply(step.reply)
        assert parsed.action is not None and parsed.self_score is not None, step.reply
        assert step.action == parsed.action and step.tokens_out > 0
        prompt = store.step_prompt(episode.id, step.index)
        messages = json.loads(prompt)
        assert messages[0]["role"] == "system" and "reward" not in messages[1]["content"].lower().replace(
            "immediate reward you expect", "")
