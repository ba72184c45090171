"""The embedded model (SmolLM2-135M through llama.cpp, grammar-constrained) on every game.

Each run is bounded by tokens, not by how busy the machine is: a step cap, a reply cap that fits
the game's longest action, and a prompt-token budget the test checks (a prompt that grows past it
fails here, it does not just get slower). Chess prompts (seven 15x15 boards) are ~4,600 tokens
each, so Chess plays one evaluation episode of one step, without history. Calls get a timeout far above what
these tokens take and no retries: a call that times out is a failure to look at, not a retry.
"""

from __future__ import annotations

import json

import pytest

import s3gym_games as games
from s3gym_games.reply import parse_reply

from tests.engine.helpers import check_run_consistency, run_protocol

# game -> (pathway, exploration episodes, step cap, reply tokens, prompt tokens of the whole run);
# a run is its exploration episodes plus one evaluation episode at each checkpoint (x = 0, 1, ...)
BOUNDS = {game: ("history", 1, 2, 48, 9_000) for game in games.names()}
BOUNDS["chess"] = ("none", 0, 1, 224, 5_500)  # one 4,600-token prompt; 22 pieces `A:(r,c), ` ~165 tokens


MINUTES = {"chess": 5, "pvz": 4}  # the longest of these runs, started before the other slow tests (tests/conftest.py)


@pytest.mark.slow
@pytest.mark.timeout(1800)  # a liveness guard only: the token bounds keep a run to minutes
@pytest.mark.parametrize("game", [pytest.param(game, marks=pytest.mark.slow(minutes=MINUTES.get(game, 0)))
                                  for game in games.names()])
def test_short_local_run_every_reply_parses(tmp_path, game):
    pathway, explore, step_cap, reply_tokens, prompt_budget = BOUNDS[game]
    store, run = run_protocol(tmp_path / "l.db", model="local/smollm2-135m", game=game, pathway=pathway,
                              explore_episodes=explore, eval_every=1, eval_episodes=1, step_cap=step_cap,
                              max_tokens=reply_tokens, decoding_seed=0, timeout_s=1500, max_retries=0)
    assert run.status == "finished"
    check_run_consistency(store, run)
    episodes = store.episodes.list(run.id)
    assert len(episodes) == 2 * explore + 1
    steps = [(e, s) for e in episodes for s in store.episodes.steps(e.id)]
    assert len(steps) == sum(min(step_cap, e.n_steps) for e in episodes) >= len(episodes)
    assert sum(s.tokens_in for _, s in steps) <= prompt_budget
    for episode, step in steps:
        assert step.fault is None, step.fault
        assert 0 < step.tokens_out <= reply_tokens
        parsed = parse_reply(step.reply)
        assert parsed.action is not None and parsed.self_score is not None, step.reply
        assert step.action == parsed.action
        prompt = store.prompts.step_prompt(episode.id, step.index)
        messages = json.loads(prompt)
        assert messages[0]["role"] == "system" and "reward" not in messages[1]["content"].lower().replace(
            "immediate reward you expect", "")
