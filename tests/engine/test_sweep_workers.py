"""A sweep driven by several worker processes: the same runs as one process, a stop and a killed
worker leave it resumable to the same result, the budget holds across workers, and a bad worker
count is refused in one line. Small sweeps: each worker is a fresh interpreter."""

from __future__ import annotations

import asyncio
import os
import signal

import pytest

from s3gym_tui.engine import events as ev
from s3gym_tui.engine.sweep import SweepRunEvent, SweepRunner
from s3gym_tui.engine.sweep_workers import split
from s3gym_tui.models import SweepConfig
from s3gym_tui.store import Store

from tests.engine.helpers import check_run_consistency
from tests.engine.test_sweep import PLAY, TINY, TINY_FLAGS, _canonical, run_cli
from tests.fake_openai import FakeOpenAI

# four scripted runs (deterministic), two of each game's model at once
CONFIG = SweepConfig(games=("trust", "nullify"), pathways=("none", "summary"), models=("scripted",),
                     settings=TINY, concurrency=2, runs_per_model=2)


def drive(store: Store, config: SweepConfig, workers: int, on_event=None):
    stored, _ = store.sweeps.create_sweep(config)
    runner = SweepRunner(store, stored, backoff_base_s=0, workers=workers)
    if on_event is not None:
        runner.on_event = lambda event: on_event(runner, event)
    return asyncio.run(runner.run()), runner


@pytest.fixture(scope="module")
def twin(tmp_path_factory):
    """The sweep driven by this process alone: what every multi-worker sweep must equal."""
    store = Store(tmp_path_factory.mktemp("twin") / "twin.db")
    final, _ = drive(store, CONFIG, workers=1)
    assert final.status == "finished"
    yield store, {(r.config.game, r.config.pathway): r for r in store.sweeps.sweep_runs(final.id)}
    store.close()


def same_as_twin(store: Store, sweep_id: str, twin) -> None:
    twin_store, twins = twin
    runs = store.sweeps.sweep_runs(sweep_id)
    assert len(runs) == len(twins)
    for run in runs:
        assert run.status == "finished"
        check_run_consistency(store, run)
        assert _canonical(store, run) == _canonical(twin_store, twins[(run.config.game, run.config.pathway)])


def test_calls_in_flight_are_shared_out_among_the_workers():
    assert split(4, 2) == [2, 2] and split(5, 2) == [3, 2] and split(96, 4) == [24] * 4
    assert sum(split(7, 3)) == 7


def test_two_workers_drive_the_same_runs_as_one_process_and_the_parent_sees_their_progress(tmp_path, twin):
    seen: dict[str, int] = {}

    def count(runner, event) -> None:
        if isinstance(event, SweepRunEvent):
            seen[type(event.event).__name__] = seen.get(type(event.event).__name__, 0) + 1
            if isinstance(event.event, ev.StepDone):
                assert event.event.step.prompt == ""  # the stored prompt does not cross the pipe
                assert event.event.step.reply  # what the parent's warnings read does

    store = Store(tmp_path / "two.db")
    final, runner = drive(store, CONFIG, workers=2, on_event=count)
    assert final.status == "finished", final.note
    assert [w.driven for w in runner.pool.workers] == [2, 2]  # both processes drove runs
    assert all(w.process.returncode == 0 for w in runner.pool.workers)  # and ended on their own
    same_as_twin(store, final.id, twin)
    episodes = sum(len(store.episodes.list(r.id)) for r in store.sweeps.sweep_runs(final.id))
    assert seen["EpisodeDone"] == episodes and seen["RunFinished"] == 4
    steps = sum(e.n_steps for r in store.sweeps.sweep_runs(final.id) for e in store.episodes.list(r.id))
    assert seen["StepDone"] == steps


def test_a_stop_during_a_two_worker_sweep_stops_every_worker_and_resume_finishes_it(tmp_path, twin, capsys):
    db = tmp_path / "stop.db"
    store = Store(db)

    def stop_soon(runner, event) -> None:
        if isinstance(event, SweepRunEvent) and isinstance(event.event, ev.EpisodeDone):
            runner.stop("interrupted (Ctrl-C)")  # what the signal handler calls

    final, runner = drive(store, CONFIG, workers=2, on_event=stop_soon)
    assert final.status == "stopped" and final.note.startswith("interrupted (Ctrl-C);"), final.note
    statuses = [r.status for r in store.sweeps.sweep_runs(final.id)]
    assert "finished" not in statuses and "stopped" in statuses
    assert all(w.process.returncode == 0 for w in runner.pool.workers)  # they stopped, not killed
    assert store.leases.live_leases() == {}
    store.close()
    code, out, err = run_cli(capsys, "resume", final.id, "--workers", "2", "--yes", "--db", str(db))
    assert code == 0, err
    assert "2 worker process(es) drive the runs" in out
    with Store(db) as done:
        assert done.sweeps.get_sweep(final.id).status == "finished"
        same_as_twin(done, final.id, twin)


def test_a_killed_worker_leaves_its_runs_resumable_to_the_same_result(tmp_path, twin, capsys):
    db = tmp_path / "kill.db"
    store = Store(db)
    killed: list[int] = []

    def kill_one(runner, event) -> None:
        if killed or not (isinstance(event, SweepRunEvent) and isinstance(event.event, ev.StepDone)):
            return
        worker = next(w for w in runner.pool.workers if event.run_id in w.active)
        killed.append(worker.process.pid)
        os.kill(worker.process.pid, signal.SIGKILL)

    final, runner = drive(store, CONFIG, workers=2, on_event=kill_one)
    assert final.status == "stopped" and f"PID {killed[0]}, killed by signal 9" in final.note, final.note
    assert "resumable" in final.note
    assert store.leases.live_leases() == {}  # the dead worker's leases are dead with it
    store.close()
    code, out, err = run_cli(capsys, "resume", final.id, "--workers", "2", "--yes", "--db", str(db))
    assert code == 0, err
    with Store(db) as done:
        same_as_twin(done, final.id, twin)


def test_the_budget_holds_across_workers(tmp_path, monkeypatch):
    """Each worker counts the others' spend (relayed by the parent): the sweep stops near its
    budget, not at a budget per worker."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000000000000000")
    with FakeOpenAI(delay_s=0.005, reply=PLAY, usage="auto") as server:
        config = SweepConfig(games=("trust",), pathways=("none", "history", "summary"),
                             models=("openai/gpt-4o-mini",), settings=TINY,
                             api_bases={"openai/gpt-4o-mini": (server.base,)}, concurrency=2, runs_per_model=2,
                             budget_usd=0.003)
        store = Store(tmp_path / "budget.db")
        final, runner = drive(store, config, workers=2)
        usage = store.sweeps.sweep_usage(final.id)
        assert final.status == "stopped" and "budget of $0.00" in final.note, final.note
        assert runner.budget_hit and all(w.driven >= 1 for w in runner.pool.workers)
        per_call = usage["cost"] / usage["calls"]
        assert usage["cost"] >= 0.003
        assert usage["cost"] - 0.003 <= (config.concurrency + 1) * per_call * 1.5  # not a budget per worker
        assert runner.limits.spent_usd == pytest.approx(usage["cost"])  # the parent heard every call
        assert server.completed == usage["calls"]


@pytest.mark.parametrize("args", [["--workers", "0"], ["--workers", "65"], ["-w", "-3"]])
def test_a_bad_worker_count_is_refused_in_one_line(tmp_path, capsys, args):
    db = str(tmp_path / "bad.db")
    code, _, err = run_cli(capsys, "sweep", "--models", "scripted", "--games", "trust", *TINY_FLAGS, *args,
                           "--yes", "--db", db)
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "--workers" in lines[0] and "1 to 64" in lines[0], err
    with Store(db) as store:
        assert store.sweeps.list_sweeps() == []


def test_the_worker_count_comes_from_the_config_and_a_bad_one_is_named(tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.toml"
    monkeypatch.setenv("S3GYM_CONFIG", str(config))
    config.write_text("sweep_workers = 0\n")
    code, _, err = run_cli(capsys, "sweep", "--models", "scripted", "--games", "trust", *TINY_FLAGS, "--yes",
                           "--db", str(tmp_path / "c.db"))
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and "sweep_workers" in lines[0], err
    from s3gym_tui.config import load_settings

    config.write_text("sweep_workers = 3\n")
    assert load_settings().sweep_workers == 3
