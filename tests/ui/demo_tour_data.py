"""A small demo database built by `s3gym demo` itself (the test-only reduced schedule: the learner on Trust
x none, history, summary and a scripted contrast run), with fixed ids and times for snapshots."""

from __future__ import annotations

import itertools
import json
import shutil
import sqlite3
import types
from pathlib import Path

import pytest

from s3gym_tui.engine import demo
from tests.ui.analysis_data import FIXED_TIME

TOUR_SCHEDULE = {"games": ["trust"], "explore_episodes": 6, "eval_every": 3, "eval_episodes": 3,
                 "contrast": {"model": "scripted/trust", "game": "trust", "pathway": "history",
                              "explore_episodes": 1, "eval_every": 1, "eval_episodes": 1, "step_cap": 3,
                              "decoding": "free"}}


def build_tour_db(path: Path) -> None:
    from s3gym_tui.cli import main
    from s3gym_tui.store import Store

    counter = itertools.count(1)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv(demo.SCHEDULE_ENV, json.dumps(TOUR_SCHEDULE))
        patch.setattr("s3gym_tui.store.connection.uuid",  # ids in creation order
                      types.SimpleNamespace(uuid4=lambda: types.SimpleNamespace(hex=f"{next(counter):012d}")))
        assert main(["demo", "--db", str(path), "--no-open", "--progress", "none"]) == 0
    with Store(path) as store:  # a build time that does not change from one build to the next
        mark = demo.read_mark(store.conn)
        demo.write_mark(store, mark.model_copy(update={"started_at": FIXED_TIME, "wall_s": 42.0, "cpu_s": 40.0}))
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE runs SET created_at = ?", (FIXED_TIME,))
        conn.execute("UPDATE sweeps SET created_at = ?", (FIXED_TIME,))
        conn.execute("UPDATE summaries SET created_at = ?", (FIXED_TIME,))
        conn.execute("UPDATE episodes SET started_at = ?, finished_at = ?", (FIXED_TIME, FIXED_TIME))
        conn.execute("UPDATE steps SET created_at = ?, latency_ms = 1.0", (FIXED_TIME,))
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


@pytest.fixture(scope="session")
def tour_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("tour") / "s3gym-demo.db"
    build_tour_db(path)
    return path


@pytest.fixture
def tour_db(tour_template, tmp_path) -> Path:
    """A private copy of the demo database (named as the demo's default)."""
    target = tmp_path / "s3gym-demo.db"
    shutil.copy(tour_template, target)
    return target
