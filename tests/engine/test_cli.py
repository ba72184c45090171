"""The headless CLI: a run end to end, the tables, and one clear line for every user error."""

from __future__ import annotations

import json

import pytest

from s3gym_tui.cli import main


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
    (["run", "trust", "--episodes", "-1", "--db", "{db}"], "explore_episodes"),
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
