"""One driver per run: a lease names the process driving a run; a second driver is refused in one
line; Ctrl-C and SIGTERM stop a headless run cleanly (exit 130, a resume hint, the reason stored);
a killed driver's lease is dead at once, so the run resumes; a lost lease stops the loser."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import time
from pathlib import Path

import pytest

from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store
from s3gym_tui.store.leases import RunBusy

from tests import cli_fork
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml",
       "OPENAI_API_KEY": "sk-test-not-a-real-key-000"}


@pytest.fixture
def slow_server():
    server = FakeOpenAI(delay_s=0.05).start()
    yield server
    server.stop()


def _start(args: list[str]):
    """`python -m s3gym_tui ARGS`, forked from the preloaded CLI (tests/cli_fork.py)."""
    return cli_fork.spawn(args, cwd=ROOT, env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for(predicate, timeout: float = 60.0, what: str = "condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.1)
    raise AssertionError(f"timed out waiting for {what}")


def _status(db: Path, run_id: str) -> str:
    with Store(db) as store:
        return store.runs.get_run(run_id).status


def _live_lease(db: Path):
    if not db.exists():
        return None
    with Store(db) as store:
        runs = store.runs.list_runs()
        leases = store.leases.live_leases()
        for run in runs:
            if run.id in leases:
                return run.id, leases[run.id]
    return None


def _steps(db: Path, run_id: str) -> int:
    with Store(db) as store:
        return sum(e.n_steps for e in store.episodes.list(run_id))


def test_second_driver_refused_then_signals_stop_cleanly_and_a_dead_driver_is_taken_over(
        tmp_path: Path, slow_server: FakeOpenAI):
    db = tmp_path / "live.db"
    model = ["trust", "-m", "openai/fake", "--api-base", slow_server.base_url, "--db", str(db)]
    first = _start(["run", *model, "--episodes", "40", "--eval-episodes", "1"])
    try:
        run_id, lease = _wait_for(lambda: _live_lease(db), what="the first driver's lease")
        assert lease.pid == first.pid
        _wait_for(lambda: _steps(db, run_id) > 3, what="some steps")
        second = cli_fork.run(["resume", run_id, "--db", str(db)], cwd=ROOT, env=ENV, capture_output=True,
                              text=True, timeout=120)
        assert second.returncode == 2
        lines = second.stderr.strip().splitlines()
        assert len(lines) == 1 and f"is being driven by PID {first.pid}" in lines[0], second.stderr
        first.send_signal(signal.SIGINT)  # Ctrl-C
        out, err = first.communicate(timeout=120)
    finally:
        if first.poll() is None:
            first.kill()
    assert first.returncode == 130, err
    assert f"resume with: s3gym resume {run_id}" in err
    assert "Traceback" not in err and "never awaited" not in err
    with Store(db) as store:
        run = store.runs.get_run(run_id)
        assert (run.status, run.status_reason) == ("stopped", "interrupted (Ctrl-C)")
        assert store.leases.lease(run_id) is None
        steps_before = sum(e.n_steps for e in store.episodes.list(run_id))

    resumed = _start(["resume", run_id, "--db", str(db)])
    try:
        _wait_for(lambda: _steps(db, run_id) > steps_before + 3, what="the resumed run's steps")
        resumed.send_signal(signal.SIGTERM)
        _, err = resumed.communicate(timeout=120)
    finally:
        if resumed.poll() is None:
            resumed.kill()
    assert resumed.returncode == 130, err
    with Store(db) as store:
        assert store.runs.get_run(run_id).status_reason == "terminated (SIGTERM)"

    killed = _start(["resume", run_id, "--db", str(db)])
    # its lease and the run marked running (two steps of a resume: a kill between them leaves "stopped")
    _wait_for(lambda: _live_lease(db) and _status(db, run_id) == "running", what="the third driver running")
    killed.kill()  # kill -9: no chance to release the lease
    killed.wait(timeout=60)
    with Store(db) as store:
        stale = store.leases.lease(run_id)
        assert stale is not None and stale.pid == killed.pid and not stale.alive()
        assert store.runs.get_run(run_id).status == "running"  # as the dead driver left it
    taken = _start(["resume", run_id, "--db", str(db)])
    try:
        run_id2, lease = _wait_for(lambda: _live_lease(db), what="the taking-over driver's lease")
        assert run_id2 == run_id and lease.pid == taken.pid
        taken.send_signal(signal.SIGINT)
        taken.communicate(timeout=120)
    finally:
        if taken.poll() is None:
            taken.kill()
    assert taken.returncode == 130


def test_lease_rules_in_process(tmp_path: Path):
    with Store(tmp_path / "l.db") as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
        lease = store.leases.acquire_lease(run.id, "test")
        with pytest.raises(RunBusy, match=f"is being driven by PID {os.getpid()} \\(test\\) since"):
            store.leases.acquire_lease(run.id, "another screen")
        assert store.leases.renew_lease(lease)
        assert set(store.leases.live_leases()) == {run.id}
        store.conn.execute("UPDATE leases SET heartbeat_at = heartbeat_at - 3600")  # gone silent
        assert store.leases.live_leases() == {}
        taken = store.leases.acquire_lease(run.id, "taker")
        assert not store.leases.renew_lease(lease)  # the first driver learns it lost the run
        store.leases.release_lease(lease)  # releasing a lost lease leaves the new one alone
        assert store.leases.lease(run.id).token == taken.token
        store.leases.release_lease(taken)
        assert store.leases.lease(run.id) is None


def test_a_runner_that_loses_its_lease_stops_and_leaves_the_status_to_the_new_driver(tmp_path: Path,
                                                                                     monkeypatch):
    from s3gym_tui.engine import lease as lease_module

    store = Store(tmp_path / "lost.db")
    run = store.runs.create_run(RunConfig(model="scripted/snake", game="snake", explore_episodes=500,
                                          eval_episodes=0))
    runner = ProtocolRunner(store, run, backoff_base_s=0)

    async def drive():
        from s3gym_tui.engine import runner as runner_module

        monkeypatch.setattr(runner_module, "LeaseKeeper",
                            lambda *a, **k: lease_module.LeaseKeeper(*a, **k, interval=0.05))
        task = asyncio.create_task(runner.run_protocol())
        while store.leases.lease(run.id) is None or store.episodes.list(run.id) == []:
            await asyncio.sleep(0.01)
        store.conn.execute("UPDATE leases SET token = 'someone-else', pid = 1, "
                           "command = 'the new driver'")
        store.runs.set_run_status(run.id, "running", "the new driver's")
        return await asyncio.wait_for(task, 60)

    final = asyncio.run(drive())
    assert runner.stop_reason == "another process took over the run"
    assert final.status == "running" and final.status_reason == "the new driver's"
    assert store.leases.lease(run.id).token == "someone-else"
    store.close()
