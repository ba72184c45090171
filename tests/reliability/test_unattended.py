"""Jobs that run unattended (nohup, Slurm, CI), through the real CLI: progress reaches a pipe as it
happens (one timestamped line per episode, checkpoint, update or phase; `--progress` chooses), a
failure after something was stored exits 3 with the resume command and stores the work as stopped,
an empty model name is a usage error, `--plan` and `--estimate` create nothing, `-o -` is stdout and
a closed pipe ends quietly, `vacuum` reports the database and its WAL, errors name the flag typed,
and sweeps warn about replies that do not parse, live and in their final table."""

from __future__ import annotations

import os
import queue
import re
import sqlite3
import subprocess
import threading
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.store import Store
from s3gym_tui.store.connection import Connection
from s3gym_tui.store.episodes import Episodes

from tests import cli_fork
from tests.engine.helpers import check_run_consistency, run_protocol
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[2]
TINY = ["--episodes", "2", "--eval-every", "2", "--eval-episodes", "1"]
STAMP = re.compile(r"^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d ", re.MULTILINE)
PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main([str(a) for a in args])
    out = capsys.readouterr()
    return code, out.out, out.err


def child_env(**extra: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "S3GYM_CONFIG": "/nonexistent/s3gym-test-config.toml", **extra}
    env.pop("COLUMNS", None)
    return env


def s3gym(*args: str) -> list[str]:
    """The arguments of `python -m s3gym_tui ARGS`, which these tests run forked from the preloaded CLI
    (tests/cli_fork.py: spawn and run are Popen and subprocess.run for it)."""
    return [str(a) for a in args]


def disk_full_after(monkeypatch, steps: int) -> dict:
    """The store's step writer raises SQLite's ENOSPC error from the (steps + 1)-th step on, inside
    the store's own transaction (so it reaches the runner as the store reports a full disk)."""
    original = Episodes._step_values
    state = {"written": 0}

    def writer(step, secrets):
        if state["written"] >= steps:
            raise sqlite3.OperationalError("database or disk is full")
        state["written"] += 1
        return original(step, secrets)

    monkeypatch.setattr(Episodes, "_step_values", staticmethod(writer))
    return state


# ----- progress into a pipe ---------------------------------------------------------------------
def test_plain_progress_lines_reach_a_pipe_while_the_sweep_is_still_running(tmp_path):
    """The first calls answer, then the server holds every call: the sweep is stuck mid-way, and its
    first episodes' lines must already be readable from the pipe (old code: nothing until the end)."""
    db = tmp_path / "pipe.db"
    lines: "queue.Queue[str]" = queue.Queue()
    with FakeOpenAI() as server:
        server.behave(times=4, reply=PLAY)  # x=0's eval episode and exploration episode 0: 2 steps each
        server.behave(hang=True)  # then every call waits for the test
        proc = cli_fork.spawn(
            s3gym("sweep", "--games", "trust", "--pathways", "none", "--models", "openai/fake", "--api-base",
                  server.base_url, *TINY, "--step-cap", "2", "--max-retries", "0", "--timeout", "300", "--yes",
                  "--db", db),
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=child_env(OPENAI_API_KEY="sk-fake"))
        reader = threading.Thread(target=lambda: [lines.put(line) for line in proc.stdout], daemon=True)
        reader.start()
        seen = []
        try:
            while not any(re.search(r"trust none openai/fake 2/4", line) for line in seen):
                seen.append(lines.get(timeout=120))  # a guard against a stall, not a speed claim
            alive = proc.poll() is None
        finally:
            server.hang.set()
            proc.wait(timeout=300)
            reader.join(timeout=60)
    assert alive, "the sweep had ended: the line did not arrive while it ran"
    progress = [line for line in seen if STAMP.match(line)]
    assert any("openai/fake 1/4" in line and "score" in line for line in progress), seen
    assert proc.returncode == 0, proc.stderr.read()
    rest = "".join(seen) + "".join(lines.get() for _ in range(lines.qsize()))
    assert "sweep 1/1" in rest and "replies per model" in rest


@pytest.mark.parametrize("mode", ["plain", "none", "bars"])
def test_progress_mode_is_chosen_with_a_flag(tmp_path, capsys, mode):
    code, out, err = cli(capsys, "run", "trust", "-m", "scripted/trust", *TINY, "--progress", mode,
                         "--db", tmp_path / "m.db")
    assert code == 0, err
    stamped = [line for line in out.splitlines() if STAMP.match(line)]
    if mode == "plain":  # one line per episode and checkpoint, not per step
        assert len([s for s in stamped if " exploration " in s]) == 2
        assert len([s for s in stamped if " evaluation " in s]) == 2
        assert len([s for s in stamped if " checkpoints " in s]) == 2
        assert len(stamped) == 6 and "checkpoints 2/2 x=2:" in stamped[-1]
    else:
        assert stamped == []
    assert "checkpoint curve" in out  # the tables follow in every mode


def test_plain_is_the_default_when_stdout_is_not_a_terminal(tmp_path, capsys):
    code, out, err = cli(capsys, "run", "trust", "-m", "scripted/trust", *TINY, "--db", tmp_path / "d.db")
    assert code == 0, err
    assert len(STAMP.findall(out)) == 6


def test_a_training_prints_a_line_per_phase_and_update(tmp_path, capsys, monkeypatch):
    """`train`'s progress goes through the same mechanism: a fake pipeline reports the hooks a real
    one reports (dataset, base loaded, updates, checkpoints, evaluation) and stops on a full disk."""
    pytest.importorskip("trl")
    from types import SimpleNamespace

    from s3gym_tui.store import StoreError
    from s3gym_tui.training import pipeline
    from s3gym_tui.training.backend import TrainEvent

    db = tmp_path / "t.db"
    run_protocol(db, run_id="src", model="scripted/trust", game="trust", explore_episodes=1, eval_episodes=0)

    async def fake_train(store, run_id, options, hooks, out_dir=None):
        hooks.dataset_progress(5, 10)  # a detail: no line
        hooks.training_created(SimpleNamespace(id="train-x1"))
        for kind, step in (("load", 0), ("step", 1), ("step", 2), ("checkpoint", 2)):
            hooks.train_event(TrainEvent(kind=kind, phase="sft", step=step, max_steps=2, loss=0.5, epoch=1.0,
                                         x=1 if kind == "checkpoint" else None))
        raise StoreError("disk full: cannot add losses in t.db")

    monkeypatch.setattr(pipeline, "train_from_run", fake_train)
    code, out, err = cli(capsys, "train", "src", "--epochs", "1", "--progress", "plain", "--db", db)
    stamped = [line for line in out.splitlines() if STAMP.match(line)]
    assert [re.sub(r"\s+", " ", line[20:]).split(" ")[0:2] for line in stamped] == [
        ["loading", "base"], ["loading", "base"], ["SFT", "updates"], ["SFT", "updates"], ["checkpoints", "1/1"]]
    assert code == 3
    assert "disk full" in err and "resume with: s3gym resume train-x1" in err


# ----- a failure after something was stored -----------------------------------------------------
def test_disk_full_mid_run_exits_3_prints_the_resume_command_and_stores_the_run_stopped(tmp_path, capsys,
                                                                                          monkeypatch):
    db = tmp_path / "full.db"
    disk_full_after(monkeypatch, 15)
    code, _, err = cli(capsys, "run", "trust", "-m", "scripted/trust", "--episodes", "3", "--eval-every", "3",
                       "--eval-episodes", "1", "--db", db)
    assert code == 3, err
    with Store(db) as store:
        [run] = store.runs.list_runs()
        assert run.status == "stopped" and "disk full" in run.status_reason
        assert sum(len(store.episodes.steps(e.id)) for e in store.episodes.list(run.id)) == 15
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 2 and "disk full" in lines[0] and "Traceback" not in err
    assert lines[1] == f"resume with: s3gym resume {run.id}"
    monkeypatch.undo()  # room again: the command printed continues the run to its end
    code, _, err = cli(capsys, *lines[1].removeprefix("resume with: s3gym ").split(), "--db", db)
    assert code == 0, err
    with Store(db) as store:
        finished = store.runs.get_run(run.id)
        assert finished.status == "finished"
        check_run_consistency(store, finished)


def test_disk_full_mid_sweep_stops_every_run_resumable_and_exits_3(tmp_path, capsys, monkeypatch):
    db = tmp_path / "fullsweep.db"
    disk_full_after(monkeypatch, 25)
    code, out, err = cli(capsys, "sweep", "--games", "trust", "--pathways", "none,history", "--models", "scripted",
                         *TINY, "--concurrency", "1", "--yes", "--db", db)
    assert code == 3, err
    with Store(db) as store:
        [sweep] = store.sweeps.list_sweeps()
        assert sweep.status == "stopped" and "disk full" in sweep.note
        statuses = [r.status for r in store.sweeps.sweep_runs(sweep.id)]
        assert "failed" not in statuses and "stopped" in statuses and statuses != ["finished"] * 2
    assert f"resume with: s3gym resume {sweep.id}" in err.splitlines()
    monkeypatch.undo()
    code, out, err = cli(capsys, "resume", sweep.id, "--yes", "--db", db)
    assert code == 0, err
    with Store(db) as store:
        assert store.sweeps.get_sweep(sweep.id).status == "finished"
        for run in store.sweeps.sweep_runs(sweep.id):
            assert run.status == "finished"
            check_run_consistency(store, run)


def test_a_model_failing_mid_run_prints_the_resume_command(tmp_path, capsys):
    with FakeOpenAI() as server:
        server.behave(times=3, reply=PLAY)
        server.behave(status=401)
        code, _, err = cli(capsys, "run", "trust", "-m", "hosted_vllm/fake", "--api-base", server.base_url, *TINY,
                           "--max-retries", "0", "--db", tmp_path / "m.db")
    assert code == 3
    with Store(tmp_path / "m.db") as store:
        [run] = store.runs.list_runs()
        assert run.status == "stopped"
    assert f"resume with: s3gym resume {run.id}" in err.splitlines()


# ----- an empty model name; --plan and --estimate create nothing ------------------------------------
@pytest.mark.parametrize("args", [
    ["run", "trust", "-m", "", "--estimate"],  # (--estimate, --plan: a failing check stops early)
    ["run", "trust", "--model", "   ", "--estimate"],
    ["sweep", "--games", "trust", "-m", "", "--plan"],
    ["sweep", "--games", "trust", "--models", " , ", "--plan"],
    ["tui", "-m", ""],
    ["-m", ""],
    ["train", "some-run", "--correction", ""],
    ["train", "some-run", "--base", " "],
    ["train", "some-run", "--remote-model", ""],
])
def test_an_empty_model_name_is_a_usage_error(tmp_path, capsys, monkeypatch, args):
    from s3gym_tui.app import S3GymApp

    opened = []
    monkeypatch.setattr(S3GymApp, "run", lambda self: opened.append(self))  # the app is not opened
    db = tmp_path / "none.db"
    code, out, err = cli(capsys, *args, "--db", db)
    assert code == 2 and not opened, out + err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and ("model name cannot be empty" in lines[0] or "no model named" in lines[0])
    assert not db.exists()


@pytest.mark.parametrize("args", [
    ["sweep", "--games", "trust", "--models", "scripted", *TINY, "--plan"],
    ["run", "trust", "-m", "scripted/trust", *TINY, "--estimate"],
])
@pytest.mark.parametrize("where", ["--db", "$S3GYM_DB"])
def test_plan_and_estimate_create_no_file_and_no_directory(tmp_path, capsys, monkeypatch, args, where):
    target = tmp_path / "not-yet" / "s3gym.db"
    if where == "--db":
        args = [*args, "--db", target]
    else:
        monkeypatch.setenv("S3GYM_DB", str(target))
    code, out, err = cli(capsys, *args)
    assert code == 0, err
    assert ("calls" in out) and list(tmp_path.iterdir()) == []


# ----- stdout: `-o -` and a closed pipe ----------------------------------------------------------
@pytest.fixture(scope="module")
def finished(tmp_path_factory) -> tuple[Path, str]:
    db = tmp_path_factory.mktemp("out") / "out.db"
    store, run = run_protocol(db, run_id="trust-out", model="scripted/trust", game="trust", pathway="history",
                              explore_episodes=6, eval_every=3, eval_episodes=2)
    store.close()
    return db, run.id


def test_export_to_dash_is_stdout(finished, tmp_path, capsys, monkeypatch):
    db, run_id = finished
    monkeypatch.chdir(tmp_path)
    code, out, err = cli(capsys, "export", run_id, "-o", "-", "--db", db)
    assert code == 0, err
    assert out.startswith('{"type": "run"') and len(out.splitlines()) > 10
    assert not (tmp_path / "-").exists()


def test_export_into_head_ends_quietly_with_exit_0(finished):
    db, run_id = finished
    proc = cli_fork.spawn(s3gym("export", run_id, "--db", db), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                          env=child_env())
    first = proc.stdout.readline()  # `| head -1`: one line, then the reader goes away
    proc.stdout.close()
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 0, err
    assert first.startswith(b'{"type": "run"') and err == ""


@pytest.mark.parametrize("args", [
    ["export", "{run}"], ["runs"], ["runs", "--json"], ["sweeps", "--json"], ["report", "{run}"],
    ["report", "{run}", "--json"], ["games"], ["models", "--json"], ["audit"], ["datasette-metadata"],
])
def test_every_command_writing_to_stdout_ends_quietly_when_nobody_reads(finished, args):
    """stdout is a pipe whose reader is already gone (`| true`): every write fails with EPIPE."""
    db, run_id = finished
    read, write = os.pipe()
    os.close(read)
    needs_db = args[0] not in ("games", "models")
    command = [a.replace("{run}", run_id) for a in args] + (["--db", str(db)] if needs_db else [])
    try:
        proc = cli_fork.run(s3gym(*command), stdout=write, stderr=subprocess.PIPE, env=child_env(), timeout=120)
    finally:
        os.close(write)
    assert proc.returncode == 0 and proc.stderr.decode() == ""


# ----- vacuum: the database and its WAL -------------------------------------------------------------
def test_vacuum_reports_database_and_wal_and_names_the_live_run_keeping_the_wal(tmp_path, capsys, monkeypatch):
    db = tmp_path / "v.db"
    store, kept = run_protocol(db, run_id="kept", model="scripted/trust", game="trust", explore_episodes=3,
                               eval_episodes=1)
    run_protocol(db, run_id="gone", model="scripted/trust", game="trust", explore_episodes=6, eval_episodes=1)
    assert cli(capsys, "rm", "gone", "--yes", "--db", db)[0] == 0
    lease = store.leases.acquire_lease("kept", "s3gym run trust")  # a live run's driver ...
    reader = sqlite3.connect(db)
    reader.execute("BEGIN")
    reader.execute("SELECT count(*) FROM steps").fetchone()  # ... in the middle of a read
    original = Connection.__init__

    def short_wait(self, *args, busy_timeout: float = 0.5, **kw):  # the checkpoint gives up sooner
        original(self, *args, busy_timeout=busy_timeout, **kw)

    monkeypatch.setattr(Connection, "__init__", short_wait)
    code, out, err = cli(capsys, "vacuum", "--db", db)
    assert code == 0, err
    wal = re.search(r"WAL\s+([\d.,]+ [KM]?B) -> ([\d.,]+ [KM]?B)", out)
    assert re.search(r"database\s+[\d.,]+ [KM]?B -> [\d.,]+ [KM]?B", out) and wal, out
    assert wal.group(2) != "0 B"  # the compacted pages wait in the WAL ...
    assert "not folded back" in out and "kept" in out and f"PID {os.getpid()}" in out  # ... and it says why
    reader.rollback()
    reader.close()
    store.leases.release_lease(lease)
    store.close()
    code, out, err = cli(capsys, "vacuum", "--db", db)
    assert code == 0, err
    assert re.search(r"WAL\s+[\d.,]+ [KM]?B -> 0 B", out) and "not folded back" not in out


# ----- errors name the flag typed --------------------------------------------------------------------
@pytest.mark.parametrize("args,flag,field", [
    (["sweep", "--games", "trust", "-m", "scripted", "--step-cap", "100", "--plan"], "--step-cap 100", "step_cap"),
    (["sweep", "--games", "trust", "-m", "scripted", "--episodes", "-1", "--plan"], "--episodes -1", "explore_"),
    (["sweep", "--games", "trust", "-m", "scripted", "--timeout", "0", "--plan"], "--timeout 0", "timeout_s"),
    (["sweep", "--games", "trust", "-m", "scripted", "--temperature", "9", "--plan"], "--temperature 9",
     "temperature:"),
    (["sweep", "--games", "trust", "-m", "scripted", "--runs-per-model", "0", "--plan"], "--runs-per-model 0",
     "runs_per_model"),
    (["run", "trust", "-m", "scripted/trust", "--eval-every", "0", "--estimate"], "--eval-every 0", "eval_every"),
    (["run", "trust", "-m", "scripted/trust", "--eval-episodes", "101", "--estimate"], "--eval-episodes 101",
     "eval_episodes"),
    (["run", "trust", "-m", "scripted/trust", "--history-budget", "-5", "--estimate"], "--history-budget -5",
     "history_budget"),
])
def test_errors_name_the_flag_the_user_typed(tmp_path, capsys, args, flag, field):
    code, _, err = cli(capsys, *args, "--db", tmp_path / "f.db")
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2 and len(lines) == 1 and flag in lines[0] and field not in lines[0], err


def test_resume_and_train_name_their_flags_too(finished, tmp_path, capsys):
    db = tmp_path / "s.db"
    code, _, err = cli(capsys, "sweep", "--games", "trust", "--pathways", "none", "-m", "scripted", *TINY,
                       "--budget-usd", "1", "--yes", "--db", db)
    assert code == 0, err
    with Store(db) as store:
        [sweep] = store.sweeps.list_sweeps()
    code, _, err = cli(capsys, "resume", sweep.id, "--concurrency", "0", "--db", db)
    assert code == 2 and "--concurrency 0:" in err and "concurrency:" not in err.replace("--concurrency 0:", "")
    source, run_id = finished
    code, _, err = cli(capsys, "train", run_id, "--eval-episodes", "500", "--db", source)
    assert code == 2 and "--eval-episodes 500:" in err and "eval_episodes" not in err


# ----- sweeps warn about replies that do not parse --------------------------------------------------
def test_a_sweep_warns_live_and_in_its_final_table_when_replies_do_not_parse(tmp_path, capsys, monkeypatch):
    from s3gym_tui.providers import fault

    monkeypatch.setattr(fault.SETTINGS, "faults", ("wrong_language",))
    try:
        code, out, err = cli(capsys, "sweep", "--games", "trust", "--pathways", "none", "--models", "fault,scripted",
                             "--episodes", "1", "--eval-every", "1", "--eval-episodes", "1", "--yes",
                             "--db", tmp_path / "w.db")
    finally:
        fault.reset()
    assert code == 0, err
    live, final = out.split("replies per model")
    warnings = [line for line in live.splitlines() if "warning:" in line]
    assert len(warnings) == 1 and STAMP.match(warnings[0])  # once, when it starts, with its time
    assert "fault/trust: 3 of its last 3 replies did not parse" in warnings[0] and "100%" in warnings[0]
    rows = {line.split()[1]: line for line in final.splitlines() if "/trust" in line and "│" in line}
    assert re.search(r"│\s+1 │\s+30 │\s+30 │\s+100% │", rows["fault/trust"]), final
    assert re.search(r"│\s+1 │\s+30 │\s+0 │\s+0% │", rows["scripted/trust"]), final
    assert "warning: fault/trust: 30 of 30 replies did not parse (100%)" in " ".join(final.split())
    assert "scripted/trust:" not in final  # no warning for a model whose replies parse
