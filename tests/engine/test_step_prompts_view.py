"""The SQL view step_prompts (plain SQL over the stored parts) gives every step's prompt exactly as
`s3gym export` writes it: a sweep of several games on every sweep pathway, plus a fork with a
person's move; read with Python's sqlite3 (what Datasette runs) and handed to DuckDB."""

from __future__ import annotations

import asyncio
import json
import random
import sqlite3

import duckdb
import pandas as pd
import pytest

import s3gym_games as games
from s3gym_tui.cli import main
from s3gym_tui.engine.play import fork_session
from s3gym_tui.engine.runner import call_settings
from s3gym_tui.engine.sweep import SweepRunner
from s3gym_tui.models import SweepConfig
from s3gym_tui.store import Store


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    path = tmp_path_factory.mktemp("view") / "sweep.db"
    config = SweepConfig(games=("trust", "snake", "tetris", "minesweeper"), pathways=("none", "history", "summary"),
                         models=("scripted",), settings={"explore_episodes": 2, "eval_every": 2,
                                                         "eval_episodes": 1, "step_cap": 10})
    with Store(path) as store:
        stored, _ = store.sweeps.create_sweep(config)
        assert asyncio.run(SweepRunner(store, stored, backoff_base_s=0).run()).status == "finished"
        run = next(r for r in store.runs.list_runs() if r.config.game == "snake" and r.config.pathway == "history")
        source = store.episodes.list(run.id, phase="explore")[-1]
        session = fork_session(store, source.id, 4, call_settings(run.config, 0))
        session.commit(None, action=games.make("snake").sample_action(random.Random(4)), actor="human")
        asyncio.run(session.play())
        run_ids = [r.id for r in store.runs.list_runs()]
    return path, run_ids


def _exported(capsys, path, run_id) -> dict[tuple[str, int], list]:
    """(episode id, step index) -> the prompt `s3gym export` wrote (None: no model was asked)."""
    assert main(["export", run_id, "--db", str(path)]) == 0
    prompts = {}
    for line in capsys.readouterr().out.splitlines():
        record = json.loads(line)
        if record["type"] == "step":
            prompts[(record["episode_id"], record["index"])] = record["prompt"]
    return prompts


def test_the_view_gives_every_prompt_as_exported(swept, capsys):
    path, run_ids = swept
    conn = sqlite3.connect(path)
    in_sql = {(e, i): p for e, i, p in conn.execute("SELECT episode_id, step_index, prompt FROM step_prompts")}
    exported = {}
    for run_id in run_ids:
        exported.update(_exported(capsys, path, run_id))
    with Store(path, check=False) as store:  # the fork belongs to no run: read as the replay reads it
        forks = [e for e in store.episodes.list() if e.run_id is None]
        assert forks
        for e in forks:
            for s in store.episodes.steps(e.id, include_prompt=False):
                text = store.prompts.prompt_of(s)
                exported[(e.id, s.index)] = json.loads(text) if text else None
    assert len(exported) == conn.execute("SELECT count(*) FROM steps").fetchone()[0] > 300
    assert None in exported.values()  # the person's move: no prompt, no row in the view
    assert {k: json.loads(p) for k, p in in_sql.items()} == {k: v for k, v in exported.items() if v is not None}
    pathways = {r[0] for r in conn.execute("SELECT DISTINCT e.pathway FROM step_prompts v "
                                           "JOIN episodes e ON e.id = v.episode_id")}
    assert pathways == {"none", "history", "summary"}
    with_copies = conn.execute("SELECT count(*) FROM steps WHERE prompt <> '' AND json_extract(prompt, '$.base') IS NOT NULL").fetchone()[0]
    shared = conn.execute("SELECT count(*) FROM steps WHERE prompt LIKE '%{\"text\":\"%'").fetchone()[0]
    assert with_copies > 0.8 * len(in_sql) and shared > 0  # copies and shared parts both joined in SQL


def test_duckdb_reads_the_view(swept):
    """DuckDB's own SQLite scanner is an extension it downloads (not possible offline here): the view is
    read through Python's sqlite3 into a DataFrame and queried by DuckDB."""
    path, _ = swept
    conn = sqlite3.connect(path)
    frame = pd.read_sql_query("SELECT step_id, episode_id, step_index, prompt FROM step_prompts", conn)
    (longest,) = duckdb.sql("SELECT episode_id, step_index, length(prompt) AS chars FROM frame "
                            "ORDER BY chars DESC, step_id LIMIT 1").fetchall()
    row = conn.execute("SELECT prompt FROM step_prompts WHERE episode_id = ? AND step_index = ?",
                       longest[:2]).fetchone()
    assert longest[2] == len(row[0]) > 1000 and json.loads(row[0])[0]["role"] == "system"
