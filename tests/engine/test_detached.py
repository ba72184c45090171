"""The command lines of runs the app starts (engine/detached.py): `s3gym run …` spells out every setting
of the run dialog, so the CLI builds exactly the config the dialog chose; the log names the command
without credentials."""

from __future__ import annotations

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine import detached
from s3gym_tui.engine.detached import logged, resume_argv, run_argv
from s3gym_tui.models import RunConfig


def test_the_cli_builds_the_very_config_the_dialog_chose(tmp_path, monkeypatch, capsys):
    from s3gym_tui.cli import runs as cli_runs
    from s3gym_tui.engine import estimate

    chosen = RunConfig(model="hosted_vllm/my-model", game="chess", pathway="history", explore_episodes=7,
                       eval_every=2, eval_episodes=1, history_budget=1234, step_cap=9, max_tokens=321,
                       temperature=0.35, decoding_seed=11, api_bases=("http://127.0.0.1:9/v1",
                                                                      "http://127.0.0.1:10/v1"),
                       oracle_feedback=True, timeout_s=33.5, max_retries=2, decoding="grammar",
                       model_args={"top_p": 0.9, "stop": ["\n\n"], "note": "a b"})
    built = []
    monkeypatch.setattr(cli_runs, "_preflight", lambda config: None)  # no server behind the bases
    monkeypatch.setattr(estimate, "estimate_run", lambda config: built.append(config) or
                        type("E", (), {"lines": lambda self: ["estimated"]})())
    argv = run_argv(chosen, tmp_path / "x.db")
    assert argv[:3] == detached.cli_prefix()
    code = main(argv[3:] + ["--estimate"])  # as the child process parses it (--estimate: nothing stored)
    capsys.readouterr()
    server = {"context_tokens": None, "server_kind": None}  # what the server says: asked by the CLI too
    assert code in (0, None) and [c.model_copy(update=server) for c in built] == [chosen]
    one_base = chosen.model_copy(update={"api_bases": (), "api_base": "http://127.0.0.1:9/v1",
                                         "decoding_seed": None, "oracle_feedback": False, "decoding": "free",
                                         "model_args": {}})
    main(run_argv(one_base, tmp_path / "x.db")[3:] + ["--estimate"])
    assert built[-1].model_copy(update=server) == one_base


def test_seed_bases_the_command_line_cannot_say_are_refused():
    with pytest.raises(ValueError, match="seed bases"):
        run_argv(RunConfig(model="scripted/trust", game="trust", explore_seed_base=5), "x.db")


def test_the_logged_command_carries_no_credentials(tmp_path, monkeypatch):
    monkeypatch.setenv("MY_PROVIDER_API_KEY", "sk-canary-0123456789")
    argv = run_argv(RunConfig(model="openai/m", game="trust", api_base="http://user:hunter22@host:8000/v1?key=abc"),
                    tmp_path / "x.db") + ["--note", "sk-canary-0123456789"]
    line = logged(argv)
    assert line.startswith("s3gym run trust --model openai/m")
    assert "hunter22" not in line and "abc" not in line and "sk-canary" not in line and "host:8000" in line
    assert logged(resume_argv("trust-none-1", tmp_path / "x.db")).startswith("s3gym resume trust-none-1 ")


def test_a_secret_model_argument_never_goes_on_a_command_line(tmp_path):
    config = RunConfig(model="openai/m", game="trust", model_args={"api_key": "sk-live-0123456789", "top_p": 0.5})
    with pytest.raises(ValueError, match="api_key hold a secret"):
        run_argv(config, tmp_path / "x.db")
    argv = run_argv(config, tmp_path / "x.db", file_args={"api_key": "sk-live-0123456789"})  # the CLI reads it
    assert "sk-live-0123456789" not in " ".join(argv) and "top_p=0.5" in argv


CANARY_PASSWORD = "pw-canary-31337"
CANARY_QUERY_KEY = "q-canary-4242"


def with_key(base: str) -> str:
    """`base` with a key in its query (a user:password in it, litellm's aiohttp transport refuses
    together with an API key: "Cannot combine AUTHORIZATION header with … credentials encoded in URL")."""
    return base + f"?api_key={CANARY_QUERY_KEY}"


def cmdline(pid: int) -> str:
    """What `ps` shows of a process: its /proc/<pid>/cmdline, readable by any local user (read again
    while it is empty: just after the fork, before the new program's arguments are in place)."""
    import time

    for _ in range(200):
        with open(f"/proc/{pid}/cmdline", "rb") as handle:
            text = handle.read().replace(b"\0", b" ").decode()
        if text:
            return text
        time.sleep(0.01)
    raise AssertionError(f"process {pid} shows no command line")


def used_key(fake, since: int = 0) -> list[bool]:
    """Per chat request the fake got after `since`: did it carry the canary key?"""
    return [CANARY_QUERY_KEY in r["path"] for r in fake.requests[since:] if "chat/completions" in r["path"]]


def test_a_child_gets_credentials_through_its_environment_only(tmp_path):
    """Any child the app starts (ChildRuns.start): a user:password and a key in a URL argument are not
    on its command line, and secrets.with_credentials in the child gives the URL back whole."""
    import sys
    import time

    from s3gym_tui.engine.detached import ChildRuns

    full = f"http://tester:{CANARY_PASSWORD}@127.0.0.1:9/v1?api_key={CANARY_QUERY_KEY}"
    probe = ("import sys, time; from s3gym_tui.secrets import with_credentials; "
             "print(with_credentials(sys.argv[2]), flush=True); time.sleep(30)")
    child = ChildRuns(tmp_path / "x.db").start([sys.executable, "-c", probe, "--api-base", full], "probe")
    try:
        shown = cmdline(child.pid)
        assert "--api-base http://127.0.0.1:9/v1?api_key=" in shown
        assert CANARY_PASSWORD not in shown and CANARY_QUERY_KEY not in shown
        assert CANARY_PASSWORD not in " ".join(child.argv)
        for _ in range(300):
            if full in child.log.read_text():
                break
            time.sleep(0.05)
        assert child.log.read_text().splitlines()[1:] == [full]  # the child has it; the `$` line does not
    finally:
        child.process.kill()
        child.process.wait()


def test_credentials_in_an_api_base_never_reach_a_childs_command_line(tmp_path, monkeypatch):
    """A run the app starts, then its resume (engine.detached.ChildRuns, as screens.run_control does):
    the real child processes' /proc/<pid>/cmdline hold no credential, yet the server got them from
    both, and the store and the log hold none."""
    import time

    from s3gym_tui.engine.detached import ChildRuns
    from s3gym_tui.store import Store

    from tests.fake_openai import FakeOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "none")  # what a local server takes
    monkeypatch.setenv("S3GYM_CONFIG", str(tmp_path / "none.toml"))
    db = tmp_path / "x.db"
    with FakeOpenAI(delay_s=0.4, reply="Answer: C, Score: 1") as fake:
        config = RunConfig(model="openai/fake", game="trust", pathway="none", explore_episodes=3, eval_every=3,
                           eval_episodes=0, step_cap=2, api_base=with_key(fake.base), timeout_s=30)
        runs = ChildRuns(db)
        child = runs.start(run_argv(config, db), "run-trust")
        shown = cmdline(child.pid)
        assert "--api-base" in shown and "127.0.0.1" in shown
        assert CANARY_QUERY_KEY not in shown
        deadline = time.monotonic() + 120
        while not used_key(fake) and child.alive and time.monotonic() < deadline:
            time.sleep(0.1)
        child.stop()  # Ctrl-C mid-run: stopped, resumable
        assert child.process.wait(timeout=120) in (0, 130), child.log_tail(10)
        with Store(db) as store:
            (run,) = store.runs.list_runs()
            assert run.status != "finished"
        asked = len(fake.requests)
        again = runs.start(resume_argv(run.id, db), f"resume-{run.id}")
        assert CANARY_QUERY_KEY not in cmdline(again.pid)
        assert again.process.wait(timeout=180) == 0, again.log_tail(10)
    first, resumed = used_key(fake)[:1], used_key(fake, asked)
    assert first == [True] and resumed and all(resumed)  # the server got them, each time
    with Store(db) as store:
        run = store.runs.get_run(run.id)
        assert run.status == "finished" and run.config.api_base.startswith("http://127.0.0.1:")
    logs = "".join(p.read_text() for p in (tmp_path / "x-runs").iterdir())
    stored = db.read_bytes() + (tmp_path / "x.db-wal").read_bytes() if (tmp_path / "x.db-wal").exists() \
        else db.read_bytes()
    assert CANARY_QUERY_KEY not in logs and CANARY_QUERY_KEY.encode() not in stored


def test_a_resume_finds_the_credentials_in_the_config_file(tmp_path, monkeypatch, capsys):
    """`s3gym resume` of a run whose api base had credentials (not stored): the config file's api base
    for the model, when it is the stored one without them, supplies them (also for a process the app
    did not start)."""
    from s3gym_tui.store import Store

    from tests.fake_openai import FakeOpenAI

    monkeypatch.setenv("OPENAI_API_KEY", "none")
    db = tmp_path / "x.db"
    with FakeOpenAI(reply="Answer: C, Score: 1") as fake:
        config = tmp_path / "s3gym.toml"
        config.write_text(f'[models."openai/fake"]\napi_base = "{with_key(fake.base)}"\n')
        monkeypatch.setenv("S3GYM_CONFIG", str(config))
        with Store(db) as store:
            made = store.runs.create_run(RunConfig(model="openai/fake", game="trust", explore_episodes=1, eval_every=1,
                                                   eval_episodes=0, step_cap=2, api_base=with_key(fake.base)))
            run = store.runs.get_run(made.id)  # as stored
            assert CANARY_QUERY_KEY not in run.config.api_base
        assert main(["resume", run.id, "--progress", "none", "--db", str(db)]) in (0, None), capsys.readouterr()
    assert used_key(fake) and all(used_key(fake))
