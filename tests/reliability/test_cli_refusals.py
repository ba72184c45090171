"""Refused before anything is stored: non-finite or out-of-range numbers of the training commands,
and any reading command on a --db path that does not exist (a typo must not leave an empty store)."""

from __future__ import annotations

import pytest

from s3gym_tui.cli import main


@pytest.mark.parametrize("args, says", [
    (["train", "r", "--lr", "nan"], "--lr must be a finite number"),
    (["train", "r", "--lr", "-1"], "--lr must be greater than 0"),
    (["train", "r", "--lr", "2"], "--lr must be at most 1"),
    (["train", "r", "--threshold", "nan"], "--threshold must be a finite number"),
    (["train", "r", "--max-steps", "0"], "--max-steps must be -1"),
    (["dataset", "r", "-o", "out", "--threshold", "inf"], "--threshold must be a finite number"),
    (["distill", "a", "b", "--lr", "0"], "--lr must be greater than 0"),
    (["distill", "a", "b", "--threshold", "-inf"], "--threshold must be a finite number"),
    (["distill", "a", "b", "--phase1-steps", "-5"], "--phase1-steps must be -1"),
])
def test_bad_training_numbers_are_refused_in_one_line(tmp_path, capsys, args, says):
    db = tmp_path / "s.db"
    assert main([*args, "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert says in err and len(err.splitlines()) == 1
    assert not db.exists()  # refused before the store was even opened


@pytest.mark.parametrize("args", [["runs"], ["sweeps"], ["trainings"], ["report"], ["audit"], ["vacuum"],
                                  ["resume", "x"], ["export", "x"], ["rm", "x", "--yes"], ["train", "x"],
                                  ["dataset", "x", "-o", "out"], ["matrix"]])
def test_a_reading_command_on_a_missing_database_says_so_and_creates_nothing(tmp_path, capsys, args):
    db = tmp_path / "typo.db"
    assert main([*args, "--db", str(db)]) == 2
    err = capsys.readouterr().err.strip()
    assert f"no database at {db}" in " ".join(err.split()) or "not installed" in err, err
    assert list(tmp_path.iterdir()) == []


def test_run_still_creates_a_new_database(tmp_path):
    db = tmp_path / "new.db"
    assert main(["run", "trust", "-m", "scripted/trust", "--episodes", "1", "--eval-every", "1",
                 "--eval-episodes", "1", "--db", str(db)]) == 0
    assert db.exists()
