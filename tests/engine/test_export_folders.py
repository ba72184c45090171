"""`s3gym export --format jsonl-dir|parquet` on the command line: one-line refusals that write nothing,
an earlier export replaced whole, secret values redacted in every format, the same rows in both."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.export_tables import MANIFEST
from s3gym_tui.models import Episode, RunConfig, Step
from s3gym_tui.store import Store

SECRET = "sk-exportcanary-0123456789abcdef"


@pytest.fixture
def db(tmp_path) -> tuple[Path, str]:
    """A run with one episode of two steps, written before SECRET was a secret (so it is stored)."""
    path = tmp_path / "s.db"
    with Store(path) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust"), note=f"key {SECRET}")
        store.episodes.add_episode(Episode(id="ep", run_id=run.id, game="trust", mode="explore", phase="explore", seed=0,
                                  index=0, model="scripted/trust", pathway="none"))
        prompt = json.dumps([{"role": "user", "content": f"play ({SECRET})\n" + "".join(f"rule {i}\n" for i in range(2000))}])
        store.episodes.add_steps([Step(episode_id="ep", index=i, observation="o", prompt=prompt, reply=f"Answer: C {SECRET}",
                              action="C", self_score=None, reward=1.0, feedback="ok", valid=True,
                              terminated=i == 1, truncated=False) for i in range(2)])
        store.annotations.add_annotation("step", "good", author="human:ann", note=f"see {SECRET}", episode_id="ep",
                             step_index=1)
    return path, run.id


def _export(capsys, run_id, db, *args) -> tuple[int, str]:
    code = main(["export", run_id, *args, "--db", str(db)])
    captured = capsys.readouterr()
    return code, captured.out + captured.err


def _values(folder: Path) -> str:
    """Everything in an export folder as text (Parquet files read back, not their compressed bytes)."""
    texts = []
    for path in sorted(folder.iterdir()):
        if path.suffix == ".parquet":
            texts.append(json.dumps(pq.read_table(path).to_pylist()))
        else:
            texts.append(path.read_text())
    return "\n".join(texts)


def test_secret_values_never_reach_an_export_in_any_format(db, tmp_path, capsys, monkeypatch):
    path, run_id = db
    monkeypatch.setenv("S3GYM_EXPORT_TEST_API_KEY", SECRET)
    outputs = []
    for fmt in ("jsonl-dir", "parquet"):
        for extra in ([], ["--full-prompts"]):
            out = tmp_path / f"{fmt}{len(extra)}"
            code, printed = _export(capsys, run_id, path, "-f", fmt, "-o", str(out), *extra)
            assert code == 0, printed
            outputs += [_values(out), printed]
    code, printed = _export(capsys, run_id, path, "-o", str(tmp_path / "one.jsonl"))
    outputs += [(tmp_path / "one.jsonl").read_text(), printed]
    assert all("[redacted]" in text for text in outputs[::2])
    assert not [text for text in outputs if SECRET in text]


def test_both_folder_formats_hold_the_same_rows(db, tmp_path, capsys):
    path, run_id = db
    for fmt in ("jsonl-dir", "parquet"):
        assert _export(capsys, run_id, path, "-f", fmt, "-o", str(tmp_path / fmt))[0] == 0
    for name in json.loads((tmp_path / "parquet" / MANIFEST).read_text())["files"]:
        lines = [json.loads(line) for line in (tmp_path / "jsonl-dir" / f"{name}.jsonl").read_text().splitlines()]
        assert pq.read_table(tmp_path / "parquet" / f"{name}.parquet").to_pylist() == lines, name
    steps = pq.read_table(tmp_path / "parquet" / "steps.parquet").to_pylist()
    assert steps[0]["prompt_part_ids"] == steps[1]["prompt_part_ids"] and steps[0]["prompt"] is None
    assert len(steps[0]["prompt_part_ids"]) > 1  # a 20 KB prompt is cut into parts, each written once


@pytest.mark.parametrize("case", ["unknown format", "no folder", "unwritable", "a file", "the database",
                                  "someone's folder", "full prompts in one file", "no parent"])
def test_refusals_are_one_line_and_write_nothing(db, tmp_path, capsys, case):
    path, run_id = db
    target = tmp_path / "out"
    args = {"unknown format": ["-f", "csv", "-o", str(target)],
            "no folder": ["-f", "parquet"],
            "unwritable": ["-f", "jsonl-dir", "-o", "/proc/s3gym-export-test"],  # read-only even for root
            "a file": ["-f", "parquet", "-o", str(tmp_path / "file.txt")],
            "the database": ["-f", "parquet", "-o", str(path)],
            "someone's folder": ["-f", "jsonl-dir", "-o", str(tmp_path / "mine")],
            "full prompts in one file": ["--full-prompts", "-o", str(tmp_path / "x.jsonl")],
            "no parent": ["-f", "parquet", "-o", str(tmp_path / "missing" / "out")]}[case]
    (tmp_path / "file.txt").write_text("keep me\n")
    (tmp_path / "mine").mkdir()
    (tmp_path / "mine" / "notes.txt").write_text("keep me\n")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.parent != tmp_path}
    names = set(os.listdir(tmp_path))
    code, printed = _export(capsys, run_id, path, *args)
    assert code == 2
    assert len(printed.strip().splitlines()) == 1 and "Traceback" not in printed, printed
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file() and p.parent != tmp_path} == before
    assert (tmp_path / "file.txt").read_text() == "keep me\n"
    assert set(os.listdir(tmp_path)) - names <= {"s.db-wal", "s.db-shm"}  # nothing written, no .part folder
    assert not Path("/proc/s3gym-export-test").exists()


def test_an_earlier_export_is_replaced_whole(db, tmp_path, capsys):
    path, run_id = db
    out = tmp_path / "out"
    assert _export(capsys, run_id, path, "-f", "jsonl-dir", "-o", str(out))[0] == 0
    assert _export(capsys, run_id, path, "-f", "parquet", "-o", str(out))[0] == 0
    assert sorted(p.suffix for p in out.iterdir() if p.name != MANIFEST) == [".parquet"] * 7
    assert json.loads((out / MANIFEST).read_text())["format"] == "parquet"
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []  # no temporary left
