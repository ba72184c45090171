"""The protocol runner with the scripted players: full runs, pathways, the held-out line, resume."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import time

import pytest

from s3gym_tui.engine.report import run_report
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store

from tests.engine.helpers import check_run_consistency, run_protocol, trajectory

PATHWAYS = ["none", "history", "summary"]


@pytest.mark.parametrize("pathway", PATHWAYS)
def test_default_size_run_on_trust(tmp_path, pathway):
    store, run = run_protocol(tmp_path / "t.db", model="scripted/trust", game="trust", pathway=pathway)
    assert run.status == "finished"
    assert run.config.checkpoints() == list(range(0, 31, 3))
    check_run_consistency(store, run)
    explore = sorted(store.episodes.list(run.id, phase="explore"), key=lambda e: e.index)
    if pathway == "history":
        for e in explore:  # every previous exploration episode, and nothing else
            assert list(e.history_episode_ids) == [p.id for p in explore[:e.index]]
        prompt = json.loads(store.prompts.step_prompt(explore[5].id, 0))[1]["content"]
        assert prompt.startswith("Hint Messages:") and prompt.count("--- Previous episode") == 5
    if pathway == "summary":
        summaries = store.summaries.list(run.id)
        assert len(summaries) == 30  # one per experience state x = 1..30
        for s in summaries:
            assert all(store.episodes.get_episode(i).phase == "explore" for i in s.source_episode_ids)
        assert all(e.summary_id for e in explore[1:])
        prompt = json.loads(store.prompts.step_prompt(explore[4].id, 0))[1]["content"]
        assert "Strategies to retain:" in prompt
    if pathway == "none":
        prompt = json.loads(store.prompts.step_prompt(explore[4].id, 0))[1]["content"]
        assert "Hint Messages:" not in prompt
    report = run_report(store, run)
    by_x = {c.x: c.mean for c in store.checkpoints.list(run.id)}
    assert report.points == tuple((x, by_x[x]) for x in run.config.checkpoints())
    assert report.curve.avg == pytest.approx(sum(by_x.values()) / len(by_x))


# Every game and pathway (scripted players, check_run_consistency on each) is one sweep:
# tests/engine/test_sweep_default.py (9 exploration episodes, 4 checkpoints x 3 eval episodes, a history
# budget the longer games exceed), which also checks its report against the stored rows; the default
# size of a run is test_default_size_run_on_trust's above, and that of the grid its plan there.


def test_verifier_rewards_never_reach_the_agent(tmp_path, monkeypatch):
    """Plant a canary value in every verifier reward: it is stored, and appears in no prompt,
    no history, no summary. With the oracle ablation it does appear (the test can fail)."""
    from s3gym_games.trust.game import TrustGame

    original = TrustGame._apply

    def canary_apply(self, action):
        outcome = original(self, action)
        return type(outcome)(outcome.feedback, outcome.reward + 0.0031337, outcome.valid, outcome.terminated,
                             outcome.info)

    monkeypatch.setattr(TrustGame, "_apply", canary_apply)

    def texts(store, run):
        for e in store.episodes.list(run.id):
            for s in store.episodes.steps(e.id):
                yield store.prompts.step_prompt(e.id, s.index)
        for s in store.summaries.list(run.id):
            yield s.as_tips()

    for pathway in ("history", "summary"):
        store, run = run_protocol(tmp_path / f"{pathway}.db", model="scripted/trust", game="trust",
                                  pathway=pathway, explore_episodes=4, eval_every=2, eval_episodes=2)
        rewards = [s.reward for e in store.episodes.list(run.id) for s in store.episodes.steps(e.id)]
        assert any("0031337" in repr(r) for r in rewards)
        assert not any("0031337" in t for t in texts(store, run))
    store, run = run_protocol(tmp_path / "oracle.db", model="scripted/trust", game="trust", pathway="history",
                              explore_episodes=2, eval_every=2, eval_episodes=1, oracle_feedback=True)
    assert any("0031337" in t for t in texts(store, run))


def test_history_budget_drops_oldest_first_and_records_the_cut(tmp_path):
    store, run = run_protocol(tmp_path / "b.db", model="scripted/trust", game="trust", pathway="history",
                              explore_episodes=8, eval_every=4, eval_episodes=1, history_budget=700)
    explore = sorted(store.episodes.list(run.id, phase="explore"), key=lambda e: e.index)
    last = explore[-1]
    assert last.history_cut > 0
    assert len(last.history_episode_ids) + last.history_cut == last.index
    assert list(last.history_episode_ids) == [e.id for e in explore[last.history_cut:last.index]]
    prompt = json.loads(store.prompts.step_prompt(last.id, 0))[1]["content"]
    assert f"[{last.history_cut} older episode(s) dropped" in prompt


def test_unreachable_model_stops_cleanly_and_resumes(tmp_path):
    store, run = run_protocol(tmp_path / "u.db", model="nosuchprovider/model-x", game="trust", pathway="none",
                              explore_episodes=3, eval_every=3, eval_episodes=1, max_retries=0)
    assert run.status == "stopped"
    assert all(not store.episodes.steps(e.id) for e in store.episodes.list(run.id))


def test_fault_injection_run_completes_with_every_fault_recorded(tmp_path):
    store, run = run_protocol(tmp_path / "f.db", model="fault/trust", game="trust", pathway="summary",
                              explore_episodes=6, eval_every=3, eval_episodes=2)
    assert run.status == "finished"
    check_run_consistency(store, run)
    faults = [s.fault for e in store.episodes.list(run.id) for s in store.episodes.steps(e.id) if s.fault]
    text = " ".join(faults)
    for kind in ("rate_limit", "timeout", "server_error", "connection", "empty reply", "self-score"):
        assert kind in text, kind


_KILL_SCRIPT = """
import asyncio, sys
from s3gym_tui.store import Store
from s3gym_tui.models import RunConfig
from s3gym_tui.engine.runner import ProtocolRunner
store = Store(sys.argv[1])
cfg = RunConfig(model="scripted/snake", game="snake", pathway=sys.argv[3], explore_episodes=6, eval_every=3,
                eval_episodes=2)
try:
    run = store.runs.get_run(sys.argv[2])
except Exception:
    run = store.runs.create_run(cfg, run_id=sys.argv[2])
asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
"""


@pytest.mark.parametrize("pathway", ["history", "summary"])
def test_kill_9_then_resume_equals_uninterrupted(tmp_path, pathway):
    reference_store, reference = run_protocol(tmp_path / "ref.db", run_id="r1", model="scripted/snake",
                                              game="snake", pathway=pathway, explore_episodes=6, eval_every=3,
                                              eval_episodes=2)
    path = tmp_path / "killed.db"
    env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}
    kills = 0
    for delay in (4.0, 1.5, 2.5, 3.5):
        proc = subprocess.Popen([sys.executable, "-c", _KILL_SCRIPT, str(path), "r1", pathway], env=env)
        time.sleep(delay)
        if proc.poll() is None:
            os.kill(proc.pid, signal.SIGKILL)
            kills += 1
        proc.wait()
    subprocess.run([sys.executable, "-c", _KILL_SCRIPT, str(path), "r1", pathway], env=env, check=True)
    assert kills >= 1
    store = Store(path)
    assert store.runs.get_run("r1").status == "finished"
    assert trajectory(store, "r1") == trajectory(reference_store, "r1")
    check_run_consistency(store, store.runs.get_run("r1"))
