"""No data lost: kill -9 the headless runner again and again at random moments, then resume.

The harness is `benchmarks/kill_resume.py` (run it with a big budget there); the suite runs it
with a small one, checks its checker can fail, kills the real `python -m s3gym_tui` process, and
pins the property resume depends on: a scripted model's reply is a function of the request alone.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

import s3gym_games as games
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store

from tests import cli_fork
from tests.engine.helpers import check_run_consistency, run_protocol, trajectory

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml"}


def _load_harness():
    sys.path.insert(0, str(ROOT))
    from benchmarks import kill_resume

    return kill_resume


def test_kill_9_fifteen_times_at_random_moments_then_resume(tmp_path):
    """15+ SIGKILLs (random delays, inside write transactions, right after commits) across runs
    of several games, pathways and scripted/fault models: after every death the stored state is
    a consistent prefix of the uninterrupted run, nothing committed is lost, and every finished
    run equals its uninterrupted reference step for step."""
    out = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "kill_resume.py"), "--kills", "15",
                          "--seed", "11", "--scenarios", "1,0,2", "--workdir", str(tmp_path), "--json"],
                         capture_output=True, text=True, env=ENV, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-2000:]
    figures = json.loads(out.stdout.strip().splitlines()[-1])
    assert figures["violations"] == []
    assert figures["kills"] >= 15
    assert figures["timer_kills"] and figures["in_tx_kills"] and figures["after_commit_kills"]
    assert figures["runs_finished"] == figures["rounds"] >= 2
    assert figures["checks"] == figures["lives"] > figures["kills"]


def test_the_checker_catches_lost_duplicated_and_changed_data(tmp_path):
    """The harness's checks can fail: a deleted step, a changed reply, an n_steps out of step, a
    step reported committed but missing, a finished run that stopped short."""
    harness = _load_harness()
    config = RunConfig(model="scripted/trust", game="trust", pathway="summary", explore_episodes=2,
                       eval_every=2, eval_episodes=1)
    ref = harness.reference_run(tmp_path / "ref.db", "r", config)
    copy = tmp_path / "copy.db"
    shutil.copy(tmp_path / "ref.db", copy)
    problems, stored = harness.verify(copy, "r", ref, set(), set(), final=True)
    assert problems == [] and len(stored) == len(ref["steps"])
    episode = "r-x000"

    def corrupted(sql: str, *params) -> list[str]:
        target = tmp_path / "bad.db"
        shutil.copy(copy, target)
        conn = sqlite3.connect(target)
        conn.execute(sql, params)
        conn.commit()
        conn.close()
        return harness.verify(target, "r", ref, set(), set(), final=True)[0]

    assert any("missing" in p or "n_steps" in p for p in
               corrupted('DELETE FROM steps WHERE episode_id = ? AND "index" = 3', episode))
    assert any("differs" in p for p in corrupted('UPDATE steps SET reply = ? WHERE episode_id = ? AND '
                                                 '"index" = 2', "Answer: cheat, Score: 1", episode))
    assert any("n_steps" in p for p in corrupted("UPDATE episodes SET n_steps = n_steps + 1 WHERE id = ?",
                                                 episode))
    assert any("status" in p for p in corrupted("UPDATE runs SET status = 'stopped' WHERE id = 'r'"))
    lost = {(episode, 99)}
    assert any("committed steps are missing" in p for p in harness.verify(copy, "r", ref, lost, set())[0])
    assert any("stored earlier are gone" in p for p in harness.verify(copy, "r", ref, set(), lost)[0])


@pytest.mark.parametrize("game", games.names())
def test_a_scripted_reply_is_a_function_of_the_request_alone(game):
    """What resume relies on: asked in a fresh process (no cached policy), the scripted model gives
    the move of the policy that played the whole episode (nullify's policy keeps a plan)."""
    from s3gym_tui.engine.llm import CallSettings, complete
    from s3gym_games.reply import parse_reply
    from s3gym_tui.providers import scripted

    async def ask(mode, seed, actions):
        ctx = {"task": "act", "game": game, "mode": mode, "seed": seed, "actions": actions}
        result = await complete(CallSettings(f"scripted/{game}"), [{"role": "user", "content": "go"}], ctx)
        return parse_reply(result.reply)

    for mode, seed in (("explore", 3), ("eval", 1_000_001)):
        played = games.play(games.make(game, mode), games.reference_policy(game), seed)
        for k in range(0, len(played.actions), max(1, len(played.actions) // 8)):
            with scripted._POLICIES.lock:
                scripted._POLICIES.entries.clear()  # as after a restart
            assert asyncio.run(ask(mode, seed, played.actions[:k])).action == played.actions[k], (mode, seed, k)


def _steps_stored(path: Path) -> int:
    if not path.exists():
        return 0
    try:
        conn = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def _kill_after_progress(args: list[str], db: Path, more_steps: int, timeout: float = 120) -> tuple[int, int]:
    """Start `python -m s3gym_tui ARGS` (forked from the preloaded CLI: tests/cli_fork.py), SIGKILL it
    once `more_steps` new steps are stored. Returns (steps at the kill, exit code)."""
    start = _steps_stored(db)
    proc = cli_fork.spawn(args, env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    deadline = time.monotonic() + timeout
    while proc.poll() is None and time.monotonic() < deadline:
        if _steps_stored(db) >= start + more_steps:
            proc.kill()
            break
        time.sleep(0.02)
    proc.wait(timeout=60)
    return _steps_stored(db), proc.returncode


def test_the_real_cli_process_killed_twice_then_resumed(tmp_path):
    """`python -m s3gym_tui run ...` killed mid-run, `resume` killed mid-run, `resume` to the end:
    the same finished run as an uninterrupted one. The killed processes are forked from the preloaded
    CLI; the last `resume` is a fresh interpreter (the real entry, end to end)."""
    db = tmp_path / "cli.db"
    args = ["nullify", "-m", "scripted/nullify", "-p", "history", "--episodes", "3", "--eval-every", "2",
            "--eval-episodes", "2", "--db", str(db)]
    first, code = _kill_after_progress(["run", *args], db, more_steps=12)
    assert code == -signal.SIGKILL and first >= 12
    run_id = Store(db).runs.list_runs()[0].id
    second, code = _kill_after_progress(["resume", run_id, "--db", str(db)], db, more_steps=10)
    assert code == -signal.SIGKILL and second >= first + 10
    done = subprocess.run([sys.executable, "-m", "s3gym_tui", "resume", run_id, "--db", str(db)], env=ENV,
                          cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    reference_store, reference = run_protocol(tmp_path / "ref.db", run_id=run_id, model="scripted/nullify",
                                              game="nullify", pathway="history", explore_episodes=3,
                                              eval_every=2, eval_episodes=2)
    store = Store(db)
    assert store.runs.get_run(run_id).status == "finished"
    assert trajectory(store, run_id) == trajectory(reference_store, run_id)
    check_run_consistency(store, store.runs.get_run(run_id))


def test_a_kill_after_the_last_commit_ends_the_round_as_finished(tmp_path, monkeypatch):
    """A SIGKILL can land after the run's final commit. The run is complete, so the harness must
    check it as finished instead of resuming it (resume rightly refuses a finished run)."""
    harness = _load_harness()
    real_life = harness.run_life
    lives = []

    def life_then_late_kill(db, run_id, life, log_path, err_path):
        killed, code = real_life(db, run_id, harness.Life("timer", 3600.0), log_path, err_path)
        lives.append(code)
        assert not killed and code == 0  # the run went to its end ...
        return True, -signal.SIGKILL     # ... and the kill is reported after it

    monkeypatch.setattr(harness, "run_life", life_then_late_kill)
    figures = harness.chaos(1, seed=3, workdir=tmp_path, scenarios=[0], log=lambda *a: None)
    assert figures.violations == []
    assert lives == [0]  # no second resume of the finished run
    assert figures.kills == figures.late_kills == 1
    assert figures.runs_finished == figures.rounds == 1 and figures.steps_final > 0
