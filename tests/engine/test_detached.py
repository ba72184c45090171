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
