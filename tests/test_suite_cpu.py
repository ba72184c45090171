"""benchmarks/suite_cpu.py sums the suite's CPU log by file and names a folder that holds more than one run."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def summarise(folder: Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(ROOT / "benchmarks" / "suite_cpu.py"), str(folder), "--top", "5"],
                          capture_output=True, text=True, timeout=60)


def test_the_log_is_summed_by_file_and_one_run_gives_no_warning(tmp_path):
    (tmp_path / "cpu-gw0.tsv").write_text("tests/a.py::one\t1.250\t0.500\t3.000\ntests/b.py::two\t0.100\t0.000\t0.200\n")
    (tmp_path / "cpu-gw1.tsv").write_text("tests/a.py::three\t2.000\t0.000\t2.500\n")
    result = summarise(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("3 tests: 3.9 s CPU (3.4 in the workers, 0.5 in processes they started), 5.7 s wall")
    assert "     3.8      0.5      5.5      2  tests/a.py" in result.stdout
    assert result.stderr == ""


def test_a_folder_with_two_runs_of_a_test_is_named_on_stderr(tmp_path):
    (tmp_path / "cpu-main.tsv").write_text("tests/a.py::one\t1.000\t0.000\t1.000\n" * 2)
    result = summarise(tmp_path)
    assert result.returncode == 0, result.stderr
    assert "1 tests logged more than once (e.g. tests/a.py::one)" in result.stderr
    assert "log each run into a new folder" in result.stderr


def test_an_empty_folder_is_one_line(tmp_path):
    result = summarise(tmp_path)
    assert result.returncode == 1
    assert result.stderr.strip().count("\n") == 0 and "S3GYM_TEST_CPU_LOG" in result.stderr


def test_a_test_id_with_quotes_is_read_whole(tmp_path):
    (tmp_path / "cpu-gw0.tsv").write_text('tests/a.py::one["x\t\\"y]\t1.000\t0.000\t1.000\ntests/a.py::two\t1.000\t0.000\t1.000\n')
    result = summarise(tmp_path)
    assert result.returncode == 0, result.stderr
    assert result.stdout.startswith("2 tests: 2.0 s CPU") and '  tests/a.py::one["x' in result.stdout


def test_escape_sequences_in_a_logged_test_id_never_reach_the_terminal(tmp_path):
    (tmp_path / "cpu-gw0.tsv").write_text("tests/a.py::t[\x1b]52;c;SGk=\x07\x1b[2J\x9b31m\x1b]0;x\x07]\t1.000\t0.000\t1.000\n")
    result = summarise(tmp_path)
    assert result.returncode == 0, result.stderr
    assert not any(c in result.stdout for c in "\x1b\x07\x9b") and "52;c;SGk=" in result.stdout
