"""Folder exports (`s3gym export --format jsonl-dir|parquet`) load in pandas, DuckDB and Hugging Face
`datasets`: every record type in its own file, the columns of the declared schema with their types, the
row counts of the database, and each step's prompt rebuilt from its shared parts equal to the prompt as
sent. The round trips run on a History-shaped run whose full-prompt export is over 50 MB."""

from __future__ import annotations

import json
import random
import sqlite3
from pathlib import Path

import duckdb
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from datasets import load_dataset

from s3gym_tui.cli import main
from s3gym_tui.engine.export_schema import SCHEMAS, arrow_schema, duckdb_columns, hf_features
from s3gym_tui.engine.export_tables import MANIFEST
from s3gym_tui.models import EVAL_SEED_BASE, Checkpoint, Episode, RunConfig, Step
from s3gym_tui.store import Store
from s3gym_tui.store.annotations import Annotation

EPISODES, STEPS, HISTORY = 16, 64, 5  # exploration episodes, steps each, episodes kept as history
TABLE_OF = {"runs": "runs", "episodes": "episodes", "steps": "steps", "summaries": "summaries",
            "checkpoints": "checkpoints", "annotations": "annotations"}


def _board(rng: random.Random) -> str:
    rows = ["   0123456789", " 0 ##########"]
    rows += [f" {r} #" + "".join(rng.choice("....SA.X") for _ in range(8)) + "#" for r in range(1, 9)]
    return "\n".join([*rows, " 9 ##########"])


def _prompt(hint: str, turns: list[str], state: str) -> str:
    user = (f"Hint Messages:\n{hint}\n\n" if hint else "") + (
        "Current episode so far:\n" + "".join(turns) if turns else "") + (
        "Game rules:\nSnake on a 10x10 grid. " + "Eat apples, avoid walls and your body. " * 20 +
        f"\n\nCurrent state:\n{state}\n\nThink briefly, then end with: Answer: <ACTION>, Score: <SCORE>")
    return json.dumps([{"role": "system", "content": "You are an agent playing a text game."},
                       {"role": "user", "content": user}], ensure_ascii=False)


def build_history_run(db: Path, seed: int = 7) -> str:
    """A History run through the store API: each exploration episode's prompts carry the previous
    HISTORY episodes' turns as Hint Messages and the episode so far; three evaluation checkpoints, two
    summary versions, annotations on a step, an episode and a summary, and a person's move (no prompt)."""
    rng = random.Random(seed)
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/snake", game="snake", pathway="history"))
        played: list[list[str]] = []
        explored: list[str] = []

        def play(episode: Episode, n_steps: int, hint: str) -> list[str]:
            store.episodes.add_episode(episode)
            turns: list[str] = []
            steps = []
            for i in range(n_steps):
                board, action = _board(rng), rng.choice(["UP", "DOWN", "LEFT", "RIGHT"])
                human = episode.phase == "explore" and i == 5
                steps.append(Step(
                    episode_id=episode.id, index=i, observation=board,
                    prompt="" if human else _prompt(hint, turns, board),
                    reply=f"Answer: {action}, Score: {i % 2}", action=action,
                    self_score=None if human or i % 7 == 3 else float(i % 2), reward=float(rng.random() < 0.2),
                    feedback=f"Moved {action}.", valid=True, terminated=i == n_steps - 1, truncated=False,
                    actor="human" if human else "model", tokens_in=0 if human else 9000, tokens_out=12,
                    latency_ms=5.0, cost=None))
                turns.append(f"Env: {board}\nLLM: Answer: {action}, Score: {i % 2}\nEnv: Moved {action}.\n")
            store.episodes.add_steps(steps)
            store.episodes.finish_episode(episode.id, score=float(rng.randint(0, 9)))
            return turns

        def evaluate(x: int) -> None:
            ep = Episode(id=f"{run.id}-c{x:03d}-e0", run_id=run.id, game="snake", mode="eval", phase="eval",
                         seed=EVAL_SEED_BASE, index=0, checkpoint=x, model=run.config.model, pathway="history",
                         history_episode_ids=tuple(explored[-HISTORY:]))
            play(ep, 8, "".join(t for turns in played[-HISTORY:] for t in turns))
            store.checkpoints.add_checkpoint(Checkpoint(run_id=run.id, x=x, episode_ids=(ep.id,),
                                            scores=(store.episodes.get_episode(ep.id).score,)))

        evaluate(0)
        for e in range(EPISODES):
            ep = Episode(id=f"{run.id}-x{e:03d}", run_id=run.id, game="snake", mode="explore", phase="explore",
                         seed=e, index=e, model=run.config.model, pathway="history",
                         history_episode_ids=tuple(explored[-HISTORY:]), history_cut=max(0, e - HISTORY))
            played.append(play(ep, STEPS, "".join(t for turns in played[-HISTORY:] for t in turns)))
            explored.append(ep.id)
            if (e + 1) % 8 == 0:
                evaluate(e + 1)
        first = store.summaries.add_summary(run.id, "eat apples", "the walls", "go up", source_episode_ids=explored[:2])
        store.summaries.add_summary(run.id, "eat apples early", "the walls", "go left", source_episode_ids=explored[:4],
                          parent_version=first.version)
        store.annotations.add_annotation("step", "good", author="human:ann", note="nice turn", episode_id=explored[1],
                             step_index=3, correction="LEFT")
        store.annotations.add_annotation("episode", "bad", author="human:ann", episode_id=explored[2])
        store.annotations.add_annotation("summary", "good", author="human:ann", summary_id=first.id)
        store.runs.set_run_status(run.id, "finished")
        return run.id


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    """The database and its exports: jsonl-dir and parquet (prompt parts), jsonl-dir --full-prompts."""
    root = tmp_path_factory.mktemp("export")
    db = root / "history.db"
    run_id = build_history_run(db)
    folders = {}
    for name, args in {"jsonl": ["-f", "jsonl-dir"], "parquet": ["-f", "parquet"],
                       "full": ["-f", "jsonl-dir", "--full-prompts"]}.items():
        folders[name] = root / name
        assert main(["export", run_id, "-o", str(folders[name]), *args, "--db", str(db)]) == 0
    return db, run_id, folders


def _db_counts(db: Path) -> dict[str, int]:
    with sqlite3.connect(db) as conn:
        return {name: conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0]
                for name, table in TABLE_OF.items()}


def _size(folder: Path) -> int:
    return sum(p.stat().st_size for p in folder.iterdir())


def test_the_full_prompt_export_is_over_50_mb_and_parts_make_it_much_smaller(exported):
    _, _, folders = exported
    full, parts = _size(folders["full"]), _size(folders["jsonl"])
    assert full > 50_000_000
    assert parts < full / 5
    assert _size(folders["parquet"]) < parts


def test_every_file_matches_the_database_and_the_manifest(exported):
    db, run_id, folders = exported
    counts = _db_counts(db)
    assert counts["annotations"] == 3 and counts["summaries"] == 2 and counts["checkpoints"] == 3
    for name, folder in folders.items():
        manifest = json.loads((folder / MANIFEST).read_text())
        assert manifest["run_id"] == run_id
        assert set(manifest["files"]) == set(SCHEMAS)
        for kind, table in TABLE_OF.items():
            assert manifest["files"][kind]["rows"] == counts[kind], (name, kind)
            assert manifest["files"][kind]["columns"] == dict(SCHEMAS[kind])


def test_pandas_loads_every_record_type(exported):
    db, _, folders = exported
    counts = _db_counts(db)
    for kind in SCHEMAS:
        frame = pd.read_parquet(folders["parquet"] / f"{kind}.parquet", dtype_backend="pyarrow")
        assert list(frame.columns) == [name for name, _ in SCHEMAS[kind]]
        declared = arrow_schema(kind)
        assert [frame[name].dtype.pyarrow_dtype for name in frame.columns] == declared.types, kind
        lines = pd.read_json(folders["jsonl"] / f"{kind}.jsonl", lines=True)
        assert len(lines) == len(frame)
        if kind in counts:
            assert len(frame) == counts[kind], kind
    steps = pd.read_json(folders["jsonl"] / "steps.jsonl", lines=True)
    parts = pd.read_json(folders["jsonl"] / "prompt_parts.jsonl", lines=True).set_index("id")["text"]
    full = pd.read_json(folders["full"] / "steps.jsonl", lines=True)
    asked = steps["prompt_part_ids"].notna()
    rebuilt = steps.loc[asked, "prompt_part_ids"].map(lambda ids: "".join(parts.loc[ids]))
    assert asked.sum() == counts["steps"] - EPISODES  # one person's move an exploration episode
    assert rebuilt.tolist() == full.loc[asked, "prompt"].tolist()
    assert parts.index.is_unique


def test_duckdb_reads_the_declared_types_and_rebuilds_every_prompt(exported):
    db, _, folders = exported
    counts = _db_counts(db)
    con = duckdb.connect()
    for kind in SCHEMAS:
        described = con.execute(f"DESCRIBE SELECT * FROM '{folders['parquet'] / kind}.parquet'").fetchall()
        assert {row[0]: row[1] for row in described} == duckdb_columns(kind), kind
        jsonl = folders["jsonl"] / f"{kind}.jsonl"
        n = con.execute(f"SELECT count(*) FROM read_json('{jsonl}', columns = $c, format = 'newline_delimited')",
                        {"c": duckdb_columns(kind)}).fetchone()[0]
        assert n == (counts[kind] if kind in counts else
                     con.execute(f"SELECT count(*) FROM '{folders['parquet'] / kind}.parquet'").fetchone()[0])
    same, total = con.execute(f"""
        WITH rebuilt AS (
            SELECT s.episode_id, s."index", string_agg(p.text, '' ORDER BY u.i) AS prompt
            FROM '{folders['parquet'] / 'steps'}.parquet' s,
                 unnest(s.prompt_part_ids) WITH ORDINALITY AS u(id, i)
                 JOIN '{folders['parquet'] / 'prompt_parts'}.parquet' p ON p.id = u.id
            GROUP BY ALL)
        SELECT count(*) FILTER (WHERE r.prompt = f.prompt), count(f.prompt)
        FROM read_json('{folders['full'] / 'steps'}.jsonl', columns = $c, format = 'newline_delimited') f
        LEFT JOIN rebuilt r USING (episode_id, "index")""", {"c": duckdb_columns("steps")}).fetchone()
    assert same == total == counts["steps"] - EPISODES


def test_hugging_face_datasets_loads_every_record_type(exported, tmp_path):
    db, _, folders = exported
    counts = _db_counts(db)
    for kind in SCHEMAS:
        from_parquet = load_dataset("parquet", data_files=str(folders["parquet"] / f"{kind}.parquet"),
                                    split="train", cache_dir=str(tmp_path / "hf"))
        assert from_parquet.features == hf_features(kind), kind
        from_jsonl = load_dataset("json", data_files=str(folders["jsonl"] / f"{kind}.jsonl"), split="train",
                                  features=hf_features(kind), cache_dir=str(tmp_path / "hf"))
        assert from_jsonl.num_rows == from_parquet.num_rows
        if kind in counts:
            assert from_parquet.num_rows == counts[kind], kind
    full = load_dataset("json", data_files=str(folders["full"] / "steps.jsonl"), split="train",
                        features=hf_features("steps"), cache_dir=str(tmp_path / "hf"))
    assert full.num_rows == counts["steps"] and full.features["prompt"].dtype == "string"


def test_the_schema_names_every_stored_field():
    """A field added to a model must be added to its record type's columns (never dropped silently)."""
    from s3gym_tui.models import Run, Summary

    for kind, model in {"runs": Run, "episodes": Episode, "steps": Step, "summaries": Summary,
                        "checkpoints": Checkpoint, "annotations": Annotation}.items():
        columns = {name for name, _ in SCHEMAS[kind]}
        assert set(model.model_fields) <= columns, kind
        assert pa.schema(arrow_schema(kind)).names == [name for name, _ in SCHEMAS[kind]]


def test_parquet_columns_keep_their_types_when_a_run_has_no_values(tmp_path):
    """An all-null column (no annotation, no summary, no cost) is typed the same in every run."""
    db = tmp_path / "small.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
    assert main(["export", run.id, "-o", str(tmp_path / "out"), "-f", "parquet", "--db", str(db)]) == 0
    for kind in SCHEMAS:
        assert pq.read_schema(tmp_path / "out" / f"{kind}.parquet").types == arrow_schema(kind).types
