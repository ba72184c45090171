"""Trainings in the store: the records round-trip, the held-out guard on training sources, the audit of
trainings, and schema 3's migration moving old `training {json}` run notes into the new tables."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from s3gym_tui.models import EVAL_SEED_BASE, RunConfig
from s3gym_tui.store import (ExpertRef, LeakageError, LossPoint, Store, StoreError, Study, Training,
                             TrainingCheckpoint, TrainingSource, audit, schema)


def test_a_training_and_its_tables_round_trip(store: Store, run, explored):
    dataset = store.datasets.add_dataset(run.id, {"threshold": 0}, [{"episode_id": explored[0].id, "step_index": 0,
                                                                     "kind": "kept", "tokens": 321}])
    t = store.trainings.add_training(Training(id="t1", method="grpo", games=("trust",), source_run=run.id, reward="oracle",
                                              base="/b", settings={"grpo": {"updates": 3}}, metrics={"peak_rss_mb": 2800.5}))
    assert store.trainings.get_training("t1") == t and store.trainings.find_training("nope") is None
    with pytest.raises(StoreError, match="already exists"):
        store.trainings.add_training(t)
    store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id="t1", x=0, model="trained/t1/0", step=0))
    store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id="t1", x=1, model="trained/t1/1", adapter="/a", step=4))
    store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id="t1", x=1, model="trained/t1/1", adapter="/a", step=4,
                                                               repaired=2))  # replaced, not duplicated
    assert [(c.x, c.step, c.repaired) for c in store.trainings.training_checkpoints("t1")] == [(0, 0, None), (1, 4, 2)]
    store.trainings.add_losses("t1", [LossPoint(step=1, loss=2.5, phase="grpo", metrics={"reward": 0.5}),
                                      LossPoint(step=2, loss=2.0, phase="grpo")])
    store.trainings.add_losses("t1", [LossPoint(step=2, loss=1.5, phase="grpo")])
    assert [(p.step, p.loss) for p in store.trainings.losses("t1")] == [(1, 2.5), (2, 1.5)]
    assert store.trainings.losses("t1")[0].metrics == {"reward": 0.5} and store.trainings.losses("t1", "sft") == []
    evaluation = store.runs.create_run(RunConfig(model="trained/t1/1", game="trust", pathway="trained"))
    store.trainings.add_training_eval("t1", "trust", evaluation.id, [1, 0])
    assert store.trainings.training_evals("t1") == [("trust", evaluation.id, (0, 1))]
    assert store.trainings.training_of_run(evaluation.id) == (t, "trust", (0, 1)) and store.trainings.training_of_run(run.id) is None
    store.trainings.add_training_sources("t1", [TrainingSource(kind="dataset", ref=dataset.id, game="trust"),
                                                TrainingSource(kind="rollout", game="trust", seed=4, mode="explore", n=7),
                                                TrainingSource(kind="prompt", ref=explored[1].id, game="trust", n=2)])
    assert [s.kind for s in store.trainings.training_sources("t1")] == ["dataset", "rollout", "prompt"]
    assert store.trainings.training_sources("t1", "rollout")[0].n == 7
    done = store.trainings.update_training("t1", status="finished", steps=4)
    assert done.status == "finished" and done.finished_at is not None and store.trainings.get_training("t1") == done
    with pytest.raises(StoreError, match="bad training status"):
        store.trainings.update_training("t1", status="done")
    assert [x.id for x in store.trainings.list(source_run=run.id)] == ["t1"] and store.trainings.list(study_id="s") == []
    assert store.datasets.dataset_rows(dataset.id)[0].tokens == 321
    assert audit(store).ok


def test_training_sources_never_come_from_evaluation(store: Store, run, explored, evaluated):
    store.trainings.add_training(Training(id="t2", games=("trust",)))
    for source, needle in ((TrainingSource(kind="rollout", seed=EVAL_SEED_BASE + 3, mode="explore"), "evaluation seed"),
                           (TrainingSource(kind="rollout", seed=3, mode="eval"), "explore mode"),
                           (TrainingSource(kind="prompt", ref=evaluated[0].id), "cannot be a training prompt")):
        with pytest.raises(LeakageError, match=needle):
            store.trainings.add_training_sources("t2", [TrainingSource(kind="rollout", seed=1, mode="explore"), source])
    with pytest.raises(StoreError, match="no dataset"):
        store.trainings.add_training_sources("t2", [TrainingSource(kind="dataset", ref="ds-nope")])
    with pytest.raises(StoreError, match="no training"):
        store.trainings.add_training_sources("t-none", [])
    assert store.trainings.training_sources("t2") == []  # all or nothing


def test_the_audit_covers_trainings(store: Store, run, explored, evaluated):
    store.trainings.add_training(Training(id="leaky", games=("trust",)))
    conn = store.conn
    conn.execute("INSERT INTO training_sources (training_id, kind, game, seed, mode) VALUES "
                 "('leaky', 'rollout', 'trust', ?, 'explore')", (EVAL_SEED_BASE + 1,))
    conn.execute("INSERT INTO training_sources (training_id, kind, ref) VALUES ('leaky', 'prompt', ?)",
                 (evaluated[1].id,))
    conn.execute("INSERT INTO training_sources (training_id, kind, ref) VALUES ('leaky', 'prompt', 'ep-gone')")
    conn.execute("INSERT INTO training_sources (training_id, kind, ref) VALUES ('leaky', 'dataset', 'ds-gone')")
    dataset = store.datasets.add_dataset(run.id, {}, [{"episode_id": explored[0].id, "step_index": 0, "kind": "kept"}])
    conn.execute("INSERT INTO dataset_rows (dataset_id, episode_id, step_index, kind, messages) VALUES (?, ?, 0, "
                 "'kept', '[]')", (dataset.id, evaluated[0].id))
    store.trainings.add_training(Training(id="from-ds", games=("trust",), dataset_id=dataset.id))
    report = audit(store)
    details = [f.detail for f in report.eval_in_training]
    assert any(f"evaluation seed {EVAL_SEED_BASE + 1}" in d for d in details)
    assert any(f"evaluation episode {evaluated[1].id!r}" in d for d in details)
    assert any("'from-ds' trained on 1 row(s) of evaluation episode" in d for d in details)
    dangling = [f.detail for f in report.dangling_references]
    assert any("unknown episode 'ep-gone'" in d for d in dangling) and any("unknown dataset 'ds-gone'" in d
                                                                           for d in dangling)
    assert report.eval_in_dataset  # the row itself is caught too
    assert not report.ok


def test_studies_round_trip(store: Store):
    study = store.trainings.add_study(Study(id="st", games=("trust", "snake"),
                                            experts=(ExpertRef(training_id="a", x=1, game="trust", model="trained/a/1"),),
                                            settings={"options": {"ablations": True}}))
    assert store.trainings.get_study("st") == study and [s.id for s in store.trainings.studies()] == ["st"]
    assert store.trainings.set_study_settings("st", {"cells": {"a|trust": "r"}}).settings == {"cells": {"a|trust": "r"}}
    assert store.trainings.set_study_status("st", "finished").status == "finished"
    with pytest.raises(StoreError):
        store.trainings.set_study_status("st", "nope")
    with pytest.raises(StoreError, match="no study"):
        store.trainings.get_study("none")


def _old_file(path: Path, monkeypatch) -> str:
    """A schema-2 file with a training run whose metadata is still `training {json}` text in runs.note."""
    before = next(i for i, m in enumerate(schema.MIGRATIONS) if "tables for trainings" in (m.__doc__ or ""))
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:before])
    with Store(path) as store:
        source = store.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
        ds = store.datasets.add_dataset(source.id, {"threshold": 0}, [])
        info = {"source_run": source.id, "dataset_id": ds.id, "backend": "local", "base": "/models/base",
                "checkpoints": {"0": "trained/trust-trained-1/0", "1": "trained/trust-trained-1/1"},
                "directory": "/data/trust-trained-1", "examples": 9, "epochs": 1,
                "losses": [{"step": 1, "epoch": 0.5, "loss": 2.0}, {"step": 2, "epoch": 1.0, "loss": 1.0}],
                "train_seconds": 12.5, "settings": {"lora_r": 8}, "repairs": {"0": 3, "1": 1}}
        store.runs.create_run(RunConfig(model="trained/trust-trained-1/1", game="trust", pathway="trained"),
                              run_id="trust-trained-1", note="training " + json.dumps(info))
        store.runs.create_run(RunConfig(model="m", game="trust", pathway="trained"), run_id="broken",
                              note="training {not json")
        store.runs.create_run(RunConfig(model="m", game="trust"), run_id="plain", note="a person's note")
        assert store.schema_version == before
    monkeypatch.undo()
    return source.id


def test_schema_3_moves_old_training_notes_into_the_tables(tmp_path: Path, monkeypatch):
    path = tmp_path / "old.db"
    source_id = _old_file(path, monkeypatch)
    with Store(path) as store:
        assert store.schema_version == schema.SCHEMA_VERSION >= 4
        t = store.trainings.get_training("trust-trained-1")
        assert (t.method, t.role, t.games, t.base, t.examples, t.epochs, t.train_seconds) == (
            "sft", "expert", ("trust",), "/models/base", 9, 1, 12.5)
        assert t.source_run == source_id
        assert t.settings == {"lora_r": 8} and t.status == "interrupted"  # its run never finished
        cps = store.trainings.training_checkpoints(t.id)
        assert [(c.x, c.model, c.repaired) for c in cps] == [(0, "trained/trust-trained-1/0", 3),
                                                             (1, "trained/trust-trained-1/1", 1)]
        assert cps[1].adapter == "/data/trust-trained-1/adapters/epoch-1" and cps[0].adapter is None
        assert [(p.step, p.loss, p.phase) for p in store.trainings.losses(t.id)] == [(1, 2.0, "sft"), (2, 1.0, "sft")]
        assert store.trainings.training_evals(t.id) == [("trust", "trust-trained-1", ())]
        assert store.trainings.training_sources(t.id)[0].ref == t.dataset_id
        assert store.runs.get_run("trust-trained-1").note == ""  # moved, not copied
        assert store.runs.get_run("broken").note == "training {not json"  # unreadable: left as it was
        assert store.trainings.find_training("broken") is None
        assert store.runs.get_run("plain").note == "a person's note"
        assert store.datasets.dataset_rows(t.dataset_id) == []
        cols = {r[1] for r in store.conn.execute("PRAGMA table_info(dataset_rows)")}
        assert {"reason", "tokens"} <= cols
    with Store(path) as store:  # and not again
        assert len(store.trainings.list()) == 1


def test_a_half_done_migration_leaves_the_old_file(tmp_path: Path, monkeypatch):
    path = tmp_path / "old.db"
    _old_file(path, monkeypatch)
    from s3gym_tui.store import schema_trainings

    def broken(conn, *args):
        raise sqlite3.OperationalError("disk I/O error")

    monkeypatch.setattr(schema_trainings, "_move_note", broken)
    with pytest.raises(StoreError):
        Store(path)
    conn = sqlite3.connect(path)
    assert int(conn.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()[0]) < schema.SCHEMA_VERSION
    assert conn.execute("SELECT note FROM runs WHERE id = 'trust-trained-1'").fetchone()[0].startswith("training {")
    assert "trainings" not in {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    conn.close()


def test_removing_runs_keeps_trainings_whole(store: Store, run, explored, make_episode):
    """`s3gym rm` refuses a run a training learnt from; an evaluation run may go (the link goes with it)."""
    dataset = store.datasets.add_dataset(run.id, {}, [{"episode_id": explored[0].id, "step_index": 0, "kind": "kept"}])
    store.trainings.add_training(Training(id="kept", games=("trust",), source_run=run.id, dataset_id=dataset.id))
    with pytest.raises(StoreError, match="training kept learnt from these runs"):
        store.hygiene.remove_runs([run.id])
    assert store.runs.get_run(run.id) and store.datasets.get_dataset(dataset.id)
    other = store.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
    store.trainings.add_training(Training(id="prompts", games=("trust",)))
    episode = store.episodes.add_episode(make_episode(other, index=0))
    store.trainings.add_training_sources("prompts", [TrainingSource(kind="prompt", ref=episode.id)])
    with pytest.raises(StoreError, match="training prompts learnt"):
        store.hygiene.remove_runs([other.id])
    evaluation = store.runs.create_run(RunConfig(model="trained/kept/0", game="trust", pathway="trained"))
    store.trainings.add_training_eval("kept", "trust", evaluation.id)
    store.hygiene.remove_runs([evaluation.id])
    assert store.trainings.training_evals("kept") == [] and store.trainings.get_training("kept")
