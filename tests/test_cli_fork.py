"""tests/cli_fork.py: a forked `s3gym` process behaves as `python -m s3gym_tui` does (exit codes, output,
environment, directory, signals, kill -9, timeouts), falls back to a fresh interpreter when an import-time
setting differs, and the server forks with one thread."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from s3gym_tui.store import Store
from tests import cli_fork
from tests.fake_openai import FakeOpenAI

ROOT = Path(__file__).resolve().parents[1]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml",
       "OPENAI_API_KEY": "sk-test-not-a-real-key-000"}


def _fresh(args, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "s3gym_tui", *args], capture_output=True, text=True,
                          timeout=300, **kwargs)


def _forked(args, **kwargs) -> subprocess.CompletedProcess:
    out = cli_fork.run(args, capture_output=True, text=True, timeout=300, **kwargs)
    assert cli_fork.spawn.last_fallback is None, cli_fork.spawn.last_fallback
    return out


@pytest.mark.parametrize("args", [["--version"], ["--help"], ["run", "trust", "--no-such-option"], ["games"],
                                  ["run", "nosuchgame", "-m", "scripted/trust", "--db", "{db}"],
                                  ["runs", "--db", "{db}", "--json"]])
def test_exit_code_stdout_and_stderr_are_a_fresh_interpreters(tmp_path: Path, args):
    """--help shows `python -m s3gym_tui` (sys.argv and __main__ as -m sets them); errors are one line."""
    args = [a.format(db=tmp_path / "x.db") for a in args]
    fresh = _fresh(args, env=ENV, cwd=ROOT)
    forked = _forked(args, env=ENV, cwd=ROOT)
    assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
    assert forked.stdout or forked.stderr


def test_a_run_stores_the_same_as_a_fresh_interpreters(tmp_path: Path):
    args = ["run", "trust", "-m", "scripted/trust", "--episodes", "1", "--eval-episodes", "1"]
    fresh = _fresh([*args, "--db", str(tmp_path / "a.db")], env=ENV, cwd=ROOT)
    forked = _forked([*args, "--db", str(tmp_path / "b.db")], env=ENV, cwd=ROOT)
    assert forked.returncode == fresh.returncode == 0, (fresh.stderr, forked.stderr)
    with Store(tmp_path / "a.db") as a, Store(tmp_path / "b.db") as b:
        runs_a, runs_b = a.runs.list_runs(), b.runs.list_runs()
        assert [r.status for r in runs_a] == [r.status for r in runs_b] == ["finished"]
        steps = [[(e.phase, e.seed, e.n_steps, e.score) for e in s.episodes.list(r[0].id)] for s, r in ((a, runs_a), (b, runs_b))]
        assert steps[0] == steps[1] and steps[0]
        run_id = runs_a[0].id
    for command in (["export", run_id], ["report", run_id]):  # what a finished run shows
        args = [*command, "--db", str(tmp_path / "a.db")]
        fresh, forked = _fresh(args, env=ENV, cwd=ROOT), _forked(args, env=ENV, cwd=ROOT)
        assert (forked.returncode, forked.stdout, forked.stderr) == (fresh.returncode, fresh.stdout, fresh.stderr)
        assert fresh.stdout


def test_a_sweep_stores_the_same_as_a_fresh_interpreters(tmp_path: Path):
    args = ["sweep", "--games", "trust,nullify", "--pathways", "none", "--models", "scripted", "--episodes", "2",
            "--eval-every", "2", "--eval-episodes", "1", "--yes"]
    fresh = _fresh([*args, "--db", str(tmp_path / "a.db")], env=ENV, cwd=ROOT)
    forked = _forked([*args, "--db", str(tmp_path / "b.db")], env=ENV, cwd=ROOT)
    assert forked.returncode == fresh.returncode == 0, (fresh.stderr, forked.stderr)
    stored = []
    for name in ("a.db", "b.db"):
        with Store(tmp_path / name) as store:
            stored.append(sorted((r.config.game, r.config.model, r.status, tuple((e.phase, e.seed, e.n_steps, e.score)
                                                          for e in store.episodes.list(r.id)))
                                 for r in store.runs.list_runs()))
    assert stored[0] == stored[1] and len(stored[0]) == 2


@pytest.fixture(scope="module")
def own_server():
    """A server whose environment the tests know: S3GYM_MODEL set (not read at import time)."""
    server = cli_fork.ForkServer(env={**ENV, "S3GYM_MODEL": "nosuchprovider/server"})
    yield server
    server.close()


def test_the_environment_is_replaced(tmp_path: Path, own_server):
    """The model named by S3GYM_MODEL, else the config's (S3GYM_CONFIG): refused before anything runs."""
    assert "S3GYM_MODEL" not in own_server.hello["env"] and "S3GYM_CONFIG" not in own_server.hello["env"]
    config = tmp_path / "config.toml"
    config.write_text('default_model = "nosuchprovider/fromconfig"\n')
    run = ["run", "trust", "--db", str(tmp_path / "x.db")]
    outcomes = []
    for env in ({**ENV, "S3GYM_MODEL": "nosuchprovider/asked"}, {**ENV, "S3GYM_CONFIG": str(config)}):
        out = cli_fork.run(run, env=env, cwd=ROOT, fork_server=own_server, capture_output=True, text=True,
                           timeout=300)
        assert cli_fork.spawn.last_fallback is None
        outcomes.append((out.returncode, out.stderr.split("'")[1]))
    assert outcomes == [(2, "nosuchprovider/asked"), (2, "nosuchprovider/fromconfig")]


def test_the_working_directory_is_the_requests(tmp_path: Path):
    out = _forked(["run", "trust", "-m", "scripted/trust", "--episodes", "1", "--eval-episodes", "1", "--db",
                   "relative.db"], env=ENV, cwd=tmp_path)
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "relative.db").exists() and not (ROOT / "relative.db").exists()


def test_stdout_to_a_file_and_stderr_to_stdout(tmp_path: Path):
    with open(tmp_path / "out.txt", "wb") as out:
        proc = cli_fork.spawn(["run", "trust", "--no-such-option"], env=ENV, cwd=ROOT, stdout=out,
                              stderr=subprocess.STDOUT)
        assert proc.wait(timeout=300) == 2
    assert (tmp_path / "out.txt").read_text().startswith("error: No such option: --no-such-option")
    proc = cli_fork.spawn(["--version"], env=ENV, cwd=ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    assert proc.wait(timeout=300) == 0 and proc.stdout is None
    assert proc.communicate() == (None, None)


def test_unbuffered_output_as_the_apps_run_processes_ask_is_forked_with_a_fresh_interpreters_output(tmp_path: Path):
    """engine/detached.py starts the app's run processes with PYTHONUNBUFFERED=1, stdout to a log file and
    stderr into it: forked, not a fresh interpreter, with the same output."""
    env = {**ENV, "PYTHONUNBUFFERED": "1"}
    logs = []
    for name, start in (("forked", cli_fork.spawn), ("fresh", None)):
        with open(tmp_path / f"{name}.log", "wb") as out:
            if start is None:
                proc = subprocess.Popen([sys.executable, "-m", "s3gym_tui", "run", "trust", "--no-such-option"],
                                        env=env, cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
            else:
                proc = start(["run", "trust", "--no-such-option"], env=env, cwd=ROOT, stdout=out,
                             stderr=subprocess.STDOUT, start_new_session=True)
                assert cli_fork.spawn.last_fallback is None, cli_fork.spawn.last_fallback
            assert proc.wait(timeout=300) == 2
        logs.append((tmp_path / f"{name}.log").read_text())
    assert logs[0] == logs[1] and logs[0].startswith("error: No such option: --no-such-option")


@pytest.fixture
def slow_server():
    server = FakeOpenAI(delay_s=0.05).start()
    yield server
    server.stop()


def _steps(db: Path) -> int:
    if not db.exists():
        return 0
    with Store(db) as store:
        return sum(e.n_steps for run in store.runs.list_runs() for e in store.episodes.list(run.id))


def _wait_for_steps(db: Path, proc) -> None:
    deadline = time.monotonic() + 120
    while _steps(db) < 3:
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline, "no steps stored"
        time.sleep(0.1)


def _signals(pid: int) -> dict:
    """The signals the process ignores, catches and blocks (/proc/PID/status)."""
    fields = {}
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        key, _, value = line.partition(":")
        if key in ("SigIgn", "SigCgt", "SigBlk"):
            fields[key] = value.strip()
    return fields


def _interrupt(start, tmp_path: Path, name: str, server: FakeOpenAI, sig: int):
    db = tmp_path / f"{name}.db"
    proc = start(["run", "trust", "-m", "openai/fake", "--api-base", server.base_url, "--episodes", "40",
                  "--db", str(db)], env=ENV, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for_steps(db, proc)
        signals = _signals(proc.pid)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
    return proc.returncode, err.replace(str(tmp_path), "TMP").replace(name, "DB"), signals


def test_ctrl_c_ends_it_as_a_fresh_interpreter(tmp_path: Path, slow_server):
    """The signal dispositions and mask while it runs (SIGINT caught, SIGPIPE ignored, SIGTERM as the CLI
    sets it, ...), the exit code and the message are a fresh one's."""
    fresh = _interrupt(lambda args, **kw: subprocess.Popen([sys.executable, "-m", "s3gym_tui", *args], **kw),
                       tmp_path, "fresh", slow_server, signal.SIGINT)
    forked = _interrupt(cli_fork.spawn, tmp_path, "forked", slow_server, signal.SIGINT)
    assert cli_fork.spawn.last_fallback is None
    assert fresh[0] == 130, fresh
    assert forked[2] == fresh[2]
    run_ids = [line.rsplit(" ", 1)[-1] for line in (fresh[1] + forked[1]).splitlines() if "resume with" in line]
    assert len(run_ids) == 2
    assert forked[:2] == (fresh[0], fresh[1].replace(run_ids[0], run_ids[1]))


def test_kill_9_and_timeouts(tmp_path: Path, slow_server):
    db = tmp_path / "k.db"
    proc = cli_fork.spawn(["run", "trust", "-m", "openai/fake", "--api-base", slow_server.base_url, "--episodes",
                           "40", "--db", str(db)], env=ENV, cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.PIPE, text=True, start_new_session=True)
    assert isinstance(proc, cli_fork.ForkedProcess) and proc.threads_at_fork == 1
    try:
        assert os.getsid(proc.pid) == proc.pid  # its own session
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=0.2)
        assert proc.poll() is None and proc.returncode is None
        _wait_for_steps(db, proc)
        with pytest.raises(subprocess.TimeoutExpired) as timeout:
            proc.communicate(timeout=0.5)
        assert timeout.value.timeout == 0.5
        proc.kill()
        out, err = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL
    assert "Traceback" not in err
    proc.kill()  # after its end: nothing happens, as with Popen
    assert proc.wait(timeout=1) == -signal.SIGKILL


def test_import_time_settings_that_differ_take_a_fresh_interpreter(tmp_path: Path, own_server):
    hello = own_server.hello
    assert hello["threads"] == 1 and hello["heavy"] == [] and hello["argv_reads"] == [] and hello["cwd_reads"] == []
    assert {"LITELLM_LOG", "LITELLM_LOCAL_MODEL_COST_MAP", "OMP_NUM_THREADS", "FORCE_COLOR"} <= set(hello["env"])
    cases = [({**ENV, "LITELLM_LOG": "DEBUG"}, "LITELLM_LOG"), ({**ENV, "OMP_NUM_THREADS": "7"}, "OMP_NUM_THREADS"),
             ({k: v for k, v in ENV.items() if k != "LITELLM_LOCAL_MODEL_COST_MAP"}, "LITELLM_LOCAL_MODEL_COST_MAP"),
             ({**ENV, "PYTHONHASHSEED": "1"}, "PYTHONHASHSEED"), ({**ENV, "HOME": str(tmp_path)}, "HOME")]
    for env, variable in cases:
        assert variable in cli_fork.fallback_reason(env, str(ROOT), fork_server=own_server)
    proc = cli_fork.spawn(["--version"], env=cases[0][0], cwd=ROOT, stdout=subprocess.PIPE, fork_server=own_server)
    assert isinstance(proc, subprocess.Popen) and "LITELLM_LOG" in cli_fork.spawn.last_fallback
    assert proc.communicate(timeout=300)[0].startswith(b"s3gym ")
    assert cli_fork.fallback_reason({**ENV, "PYTHONPATH": str(ROOT)}, str(tmp_path), fork_server=own_server) is None
    (tmp_path / "litellm").mkdir()  # `python -m` would import this one from the working directory
    (tmp_path / "litellm" / "__init__.py").write_text("")
    assert "litellm" in cli_fork.fallback_reason(ENV, str(tmp_path), fork_server=own_server)
    assert "litellm" in cli_fork.fallback_reason({**ENV, "PYTHONPATH": str(tmp_path)}, str(ROOT), fork_server=own_server)
    (tmp_path / "plugin.dist-info").mkdir()
    assert "metadata" in cli_fork.fallback_reason({**ENV, "PYTHONPATH": str(tmp_path)}, str(ROOT), fork_server=own_server)
    leader, follower = os.openpty()
    try:
        assert "terminal" in cli_fork.fallback_reason(ENV, str(ROOT), (None, follower, None), own_server)
    finally:
        os.close(leader)
        os.close(follower)
    assert cli_fork.fallback_reason(ENV, str(ROOT), fork_server=own_server) is None


def test_the_forked_processes_cpu_is_counted():
    before = cli_fork.cpu_seconds()
    _forked(["run", "trust", "--no-such-option"], env=ENV, cwd=ROOT)
    assert cli_fork.cpu_seconds() > before
