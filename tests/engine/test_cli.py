"""The headless CLI: a run end to end, the tables, and one clear line for every user error."""

from __future__ import annotations

import json

import pytest

from s3gym_tui.cli import main
from s3gym_tui.store import Store


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def test_run_runs_report_audit_export(tmp_path, capsys):
    db = str(tmp_path / "c.db")
    code, out, err = run_cli(capsys, "run", "trust", "-m", "scripted/trust", "-p", "history", "--episodes", "3",
                             "--eval-every", "3", "--eval-episodes", "1", "--db", db)
    assert code == 0, err
    assert "checkpoint curve" in out and "self-judging" in out
    code, out, _ = run_cli(capsys, "runs", "--db", db)
    assert code == 0 and "trust-history-" in out and "finished" in out
    run_id = next(w for w in out.split() if w.startswith("trust-history-"))
    code, out, _ = run_cli(capsys, "audit", "--db", db)
    assert code == 0 and "audit clean" in out
    out_file = tmp_path / "run.jsonl"
    code, _, _ = run_cli(capsys, "export", run_id, "-o", str(out_file), "--db", db)
    lines = [json.loads(line) for line in out_file.read_text().splitlines()]
    kinds = [line["type"] for line in lines]
    assert code == 0 and kinds[0] == "run" and kinds.count("episode") == 3 + 2 and "step" in kinds
    code, out, _ = run_cli(capsys, "report", run_id, "--db", db)
    assert code == 0 and run_id in out


@pytest.mark.parametrize("args,needle", [
    (["run", "go", "--db", "{db}"], "unknown game 'go'"),
    (["run", "trust", "-p", "magic", "--db", "{db}"], "pathway"),
    (["run", "trust", "--episodes", "-1", "--db", "{db}"], "--episodes -1"),  # the flag, not the field
    (["report", "nosuch", "--db", "{db}"], "no run 'nosuch'"),
    (["resume", "nosuch", "--db", "{db}"], "no run 'nosuch'"),
    (["export", "nosuch", "--db", "{db}"], "no run 'nosuch'"),
    (["play", "chess", "--mode", "hard"], "unknown mode"),
    (["frobnicate"], "No such command"),
    (["run", "trust", "-m", "nosuchprovider/x", "--episodes", "1", "--eval-episodes", "0", "--db", "{db}"],
     "does not know the provider"),
])
def test_user_errors_are_one_line_with_nonzero_exit(tmp_path, capsys, args, needle):
    db = str(tmp_path / "e.db")
    Store(db).close()  # an existing, empty store (a missing file is its own error)
    code, _, err = run_cli(capsys, *[a.replace("{db}", db) for a in args])
    assert code != 0
    lines = [line for line in err.strip().splitlines() if line.strip()]
    assert len(lines) == 1 and needle in lines[0] and "Traceback" not in err


def test_corrupt_database_is_refused_and_left_untouched(tmp_path, capsys):
    db = tmp_path / "bad.db"
    db.write_bytes(b"this is not sqlite" * 100)
    before = db.read_bytes()
    code, _, err = run_cli(capsys, "runs", "--db", str(db))
    assert code == 2 and "not an SQLite database" in err and db.read_bytes() == before


def test_play_watches_a_reference_policy(capsys):
    code, out, _ = run_cli(capsys, "play", "nullify", "--mode", "eval", "--seed", "1000000")
    assert code == 0 and "final score 1" in out


# ----- the estimate, the reply-contract warning, bare options open the app ------------------------
def test_run_prints_the_estimate_first_and_estimate_only_creates_nothing(tmp_path, capsys):
    db = tmp_path / "est.db"
    code, out, err = run_cli(capsys, "run", "trust", "-m", "scripted/trust", "-p", "summary", "--episodes", "6",
                             "--eval-every", "3", "--eval-episodes", "2", "--estimate", "--db", str(db))
    assert code == 0, err
    # 6 x 10 exploration calls, 3 checkpoints x 2 episodes x 10 evaluation calls, 6 summaries
    assert "at most 126 model calls: 60 exploration" in out and "60 evaluation" in out and "6 summaries" in out
    assert "input tokens" in out and "cost:" in out
    assert not db.exists()  # nothing was created
    code, out, err = run_cli(capsys, "run", "trust", "-m", "scripted/trust", "--episodes", "3", "--eval-every", "3",
                             "--eval-episodes", "1", "--db", str(db))
    assert code == 0, err
    assert out.index("estimate") < out.index("run trust-none-")  # printed before the run starts


def test_estimate_prints_for_a_run_that_could_not_start_yet(tmp_path, capsys, monkeypatch):
    """A run refused before anything is stored (here: no API key yet) can still be priced with --estimate,
    as `sweep --plan` prices its runs; the refusal is said, and nothing is created."""
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    db = tmp_path / "est.db"
    code, out, err = run_cli(capsys, "run", "trust", "-m", "openai/gpt-4.1", "--episodes", "3", "--eval-every",
                             "3", "--eval-episodes", "1", "--estimate", "--db", str(db))
    assert code == 0, err
    assert "at most 50 model calls: 30 exploration" in out and "cost:" in out
    assert "it could not start now" in out and "OPENAI_API_KEY" in out
    assert not db.exists()
    code, _, err = run_cli(capsys, "run", "trust", "-m", "openai/gpt-4.1", "--episodes", "3", "--db", str(db))
    assert code == 2 and "OPENAI_API_KEY" in err and not db.exists()  # without --estimate: refused


def test_run_refuses_a_scripted_model_of_another_game(tmp_path, capsys):
    code, _, err = run_cli(capsys, "run", "snake", "-m", "scripted/pvz", "--db", str(tmp_path / "x.db"))
    assert code == 2 and "scripted/pvz plays pvz only" in err and not (tmp_path / "x.db").exists()


def test_run_warns_when_most_replies_do_not_parse(tmp_path, capsys, monkeypatch):
    from s3gym_tui.providers import fault

    monkeypatch.setattr(fault.SETTINGS, "faults", ("wrong_language",))
    try:
        code, out, err = run_cli(capsys, "run", "trust", "-m", "fault/trust", "--episodes", "1", "--eval-episodes",
                                 "0", "--db", str(tmp_path / "w.db"))
    finally:
        fault.reset()
    assert code == 0, err
    assert "warning:" in out and "of its last 3 replies did not parse" in out and "100%" in out


def test_the_app_without_a_terminal_is_refused_in_one_line(tmp_path, monkeypatch, capsys):
    """Without a terminal (a script, a pipe, a job runner) the app would wait for keys forever: refused
    in one line (after the config and the database are checked, whose errors come first)."""
    from s3gym_tui.app import S3GymApp
    from s3gym_tui.cli import misc

    monkeypatch.setattr(misc, "terminal_attached", lambda: False)
    monkeypatch.setattr(S3GymApp, "run", lambda self: pytest.fail("the app was opened"))
    db = tmp_path / "none.db"
    for args in (["--db", str(db)], ["tui", "--db", str(db)]):
        code, out, err = run_cli(capsys, *args)
        lines = [line for line in err.splitlines() if line.strip()]
        assert code == 2 and len(lines) == 1 and "the app needs a terminal" in lines[0], out + err
        assert not db.exists()  # nothing created for an app that did not open


def test_bare_options_open_the_app(tmp_path, monkeypatch, capsys):
    from s3gym_tui.app import S3GymApp
    from s3gym_tui.cli import misc

    monkeypatch.setattr(misc, "terminal_attached", lambda: True)  # as in a terminal
    opened = []
    monkeypatch.setattr(S3GymApp, "run", lambda self: opened.append((self.db_path, self.settings.default_model)))
    db = tmp_path / "bare.db"
    assert main(["--db", str(db), "--model", "scripted/snake"]) == 0
    assert main(["-m", "scripted/trust", "--db", str(db)]) == 0
    assert opened == [(db, "scripted/snake"), (db, "scripted/trust")]
    code = main(["--help"])
    assert code == 0 and "run" in capsys.readouterr().out  # --help still lists the commands
