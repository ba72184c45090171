"""The protocol runner with the scripted players: full runs, pathways, the held-out line, resume."""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import time
from pathlib import Path

import pytest

from s3gym_tui.engine.report import run_report
from s3gym_tui.store import Store

from tests import cli_fork
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


ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"}


def _stored(db: Path, sql: str, *params):
    """One value read from the killed run's database, read-only (None: no file or no table yet)."""
    if not db.exists():
        return None
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            row = conn.execute(sql, params).fetchone()
        finally:
            conn.close()
    except sqlite3.Error:
        return None
    return None if row is None else row[0]


def _steps(db: Path) -> int:
    return _stored(db, "SELECT count(*) FROM steps") or 0


def _kill_after(args: list[str], db: Path, more_steps: int, timeout: float = 120.0) -> int:
    """One life: `s3gym ARGS` (forked from the preloaded CLI, tests/cli_fork.py), SIGKILLed once
    `more_steps` steps more than at its start are stored. Returns the steps stored after its death;
    fails if it ended before the kill or stored too little in `timeout` seconds."""
    start = _steps(db)
    proc = cli_fork.spawn(args, env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    try:
        while proc.poll() is None and _steps(db) < start + more_steps:
            assert time.monotonic() < deadline, f"s3gym {args[0]} stored {_steps(db) - start} of {more_steps} " \
                                                f"steps in {timeout:.0f} s"
            time.sleep(0.01)
    finally:
        proc.kill()  # nothing if it ended already: then the check below fails with its output
    _out, err = proc.communicate(timeout=60)
    assert proc.returncode == -signal.SIGKILL, (f"s3gym {args[0]} ended (exit {proc.returncode}) before the kill: "
                                                f"{err.decode(errors='replace')[-2000:]}")
    return _steps(db)


@pytest.mark.parametrize("pathway", ["history", "summary"])
def test_kill_9_then_resume_equals_uninterrupted(tmp_path, pathway):
    """`s3gym run` killed -9 mid-run, then `s3gym resume` killed -9 mid-run three times, then
    `s3gym resume` to the end: the same run, step for step (prompts, replies, rewards, histories),
    as an uninterrupted one with the same id and config, and a consistent store. Each life is killed
    once the store holds 15-40 more steps than at its start (a number fixed per life and pathway, far
    below the run's 768 steps), not after a sleep, so all four kills land mid-run. The CLI processes
    are forked from a preloaded one (tests/cli_fork.py: real processes, the CLI's real entry) instead
    of five fresh interpreters each paying `import litellm`."""
    db = tmp_path / "killed.db"
    rng = random.Random(f"kill-9-{pathway}")
    args = ["-m", "scripted/snake", "-p", pathway, "--episodes", "6", "--eval-every", "3", "--eval-episodes", "2",
            "--db", str(db)]

    def status(run_id: str):
        return _stored(db, "SELECT status FROM runs WHERE id = ?", run_id)

    stored = [_kill_after(["run", "snake", *args], db, rng.randint(15, 40))]
    run_id = _stored(db, "SELECT id FROM runs")
    assert run_id is not None and _stored(db, "SELECT count(*) FROM runs") == 1
    kills = int(status(run_id) != "finished")
    # the uninterrupted reference, with the id `s3gym run` gave (episode ids and prompts hold it)
    reference_store, reference = run_protocol(tmp_path / "ref.db", run_id=run_id, model="scripted/snake",
                                              game="snake", pathway=pathway, explore_episodes=6, eval_every=3,
                                              eval_episodes=2)
    total = _steps(tmp_path / "ref.db")
    for _life in range(3):
        more = rng.randint(15, 40)
        assert stored[-1] + more < total  # the kill is due before the run's end
        stored.append(_kill_after(["resume", run_id, "--db", str(db)], db, more))
        kills += status(run_id) != "finished"
    # every life died of its SIGKILL (_kill_after checks) with the run unfinished, each storing steps
    assert kills == 4
    assert 0 < stored[0] < stored[1] < stored[2] < stored[3] < total
    done = cli_fork.run(["resume", run_id, "--db", str(db)], env=ENV, cwd=ROOT, capture_output=True, timeout=300)
    assert done.returncode == 0, done.stderr.decode(errors="replace")[-2000:]
    store = Store(db)
    run = store.runs.get_run(run_id)
    assert run.status == "finished"
    assert run.config == reference.config  # the CLI made the reference's config
    assert trajectory(store, run_id) == trajectory(reference_store, run_id)
    check_run_consistency(store, run)
