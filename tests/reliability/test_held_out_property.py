"""The held-out line as a property over many generated small runs (random game, pathway, seed bases,
budgets, episode counts, scripted or fault-injecting model): the leakage audit is empty, seeds never
cross phases, no prompt sent to a model (nor any summary) carries a verifier reward, and the store
refuses an evaluation episode on an exploration seed and the reverse.

Verifier rewards carry a canary: every game's rewards are shifted by a distinctive fraction, so a
reward that reached a prompt would be recognisable there. More examples:
`S3GYM_PROPERTY_EXAMPLES=500 python -m pytest tests/reliability/test_held_out_property.py`.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import tempfile
from contextlib import contextmanager
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

import s3gym_games as games
from s3gym_tui.engine import llm, runner, session
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import EVAL_SEED_BASE, Episode, RunConfig
from s3gym_tui.providers import fault
from s3gym_tui.store import LeakageError, Store, audit

CANARY = 0.0031337
EXAMPLES = int(os.environ.get("S3GYM_PROPERTY_EXAMPLES", "40"))


def reward_marks(reward: float) -> set[str]:
    """How a canaried reward would look in a prompt (repr, the engine's :g formatting, the fraction)."""
    return {repr(reward), f"{reward:g}", f"{reward:.4f}"}


@contextmanager
def canary_rewards_and_recorded_prompts():
    """Shift the verifier reward of every game the engine plays by CANARY; record every message
    list sent to a model."""
    sent: list[list[dict]] = []
    original_make = games.make
    original_complete = llm.complete

    def make(name, mode="explore"):
        """Games the engine plays report canaried rewards (games' own internal probes do not)."""
        game = original_make(name, mode)
        original_step = game.step

        def step(action):
            result = original_step(action)
            return dataclasses.replace(result, reward=result.reward + CANARY)

        game.step = step
        return game

    async def recording(settings, messages, context=None):
        sent.append([dict(m) for m in messages])
        return await original_complete(settings, messages, context)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(games, "make", make)
        mp.setattr(runner, "complete", recording)
        mp.setattr(session, "complete", recording)
        yield sent


def run_once(path: Path, config: RunConfig) -> tuple[Store, object, list[list[dict]]]:
    with canary_rewards_and_recorded_prompts() as sent:
        store = Store(path)
        run = store.runs.create_run(config, run_id="p")
        final = asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    return store, final, sent


def leaked_rewards(store: Store, run_id: str, sent: list[list[dict]]) -> list[str]:
    marks = set()
    for episode in store.episodes.list(run_id):
        for step in store.episodes.steps(episode.id):
            if step.reward != 0:
                marks |= reward_marks(step.reward)
    texts = [json.dumps(m, ensure_ascii=False) for m in sent]
    texts += [store.prompts.step_prompt(e.id, s.index) for e in store.episodes.list(run_id) for s in store.episodes.steps(e.id)]
    texts += [s.as_tips() for s in store.summaries.list(run_id)]
    return sorted({mark for mark in marks for text in texts if mark in text})


runs = st.fixed_dictionaries({
    "game": st.sampled_from(games.names()),
    "pathway": st.sampled_from(["none", "history", "summary"]),
    "provider": st.sampled_from(["scripted", "fault"]),
    "explore_episodes": st.integers(0, 3),
    "eval_every": st.integers(1, 3),
    "eval_episodes": st.integers(0, 2),
    "explore_seed_base": st.one_of(st.integers(0, 50), st.integers(0, EVAL_SEED_BASE - 10)),
    "eval_seed_base": st.one_of(st.just(EVAL_SEED_BASE), st.integers(EVAL_SEED_BASE, 10 * EVAL_SEED_BASE)),
    "history_budget": st.sampled_from([0, 200, 2_000, 100_000]),
    "step_cap": st.integers(1, 10),
    "fault_period": st.integers(1, 4),
})


@settings(max_examples=EXAMPLES, deadline=None, derandomize=True,
          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.shrink],
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(spec=runs, probe_seed=st.integers(0, EVAL_SEED_BASE - 1), probe_eval=st.integers(EVAL_SEED_BASE, 2**40))
def test_the_held_out_line_holds_for_generated_runs(spec, probe_seed, probe_eval):
    spec = dict(spec)
    provider, period = spec.pop("provider"), spec.pop("fault_period")
    fault.reset()
    fault.SETTINGS.period = period
    fault.SETTINGS.huge_chars = 2_000
    config = RunConfig(model=f"{provider}/{spec['game']}", **spec)
    with tempfile.TemporaryDirectory() as tmp:
        store, run, sent = run_once(Path(tmp) / "p.db", config)
        try:
            assert run.status == "finished"
            report = audit(store)
            assert report.ok, report.lines()
            episodes = store.episodes.list("p")
            explore = [e for e in episodes if e.phase == "explore"]
            evals = [e for e in episodes if e.phase == "eval"]
            explore_seeds = {e.seed for e in explore}
            eval_seeds = {e.seed for e in evals}
            assert explore_seeds == {config.explore_seed(i) for i in range(config.explore_episodes)}
            assert eval_seeds == {config.eval_seed(j) for j in range(config.eval_episodes)} or not evals
            assert all(s < EVAL_SEED_BASE for s in explore_seeds) and all(s >= EVAL_SEED_BASE for s in eval_seeds)
            assert all(e.mode == e.phase for e in episodes)
            by_id = {e.id: e for e in episodes}
            for e in episodes:  # experience comes from earlier exploration episodes only
                horizon = e.index if e.phase == "explore" else e.checkpoint
                for source in e.history_episode_ids:
                    assert by_id[source].phase == "explore" and by_id[source].index < horizon
            for summary in store.summaries.list("p"):
                assert all(by_id[s].phase == "explore" for s in summary.source_episode_ids)
            assert not leaked_rewards(store, "p", sent)
            for phase, seed in (("eval", probe_seed), ("explore", probe_eval)):
                bad = Episode(id=f"probe-{phase}", run_id="p", game=config.game, mode=phase, phase=phase, seed=seed,
                              index=0, checkpoint=0 if phase == "eval" else None, model=config.model,
                              pathway=config.pathway)
                with pytest.raises(LeakageError):
                    store.episodes.add_episode(bad)
                with pytest.raises(LeakageError):
                    store.episodes.add_episode(bad.model_copy(update={"run_id": None, "checkpoint": None}))
            assert audit(store).ok
        finally:
            store.close()
            fault.reset()


@pytest.mark.parametrize("game", games.names())
def test_the_canary_would_be_seen_with_oracle_feedback(tmp_path, game):
    """The detector can fail: the oracle-feedback ablation shows rewards, and they are found."""
    config = RunConfig(model=f"scripted/{game}", game=game, pathway="history", explore_episodes=2, eval_every=2,
                       eval_episodes=1, oracle_feedback=True, step_cap=8)
    store, run, sent = run_once(tmp_path / "oracle.db", config)
    assert run.status == "finished"
    assert leaked_rewards(store, "p", sent)
