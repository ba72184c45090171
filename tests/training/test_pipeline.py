"""The local pathway end to end on the tiny base (seconds): dataset -> LoRA -> served checkpoints ->
strict evaluation stored as a training run; the same through `s3gym train`; the refusals."""

from __future__ import annotations

import json

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.parsing import parse_reply
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, audit
from s3gym_tui.training.backend import TrainConfig
from s3gym_tui.training.pipeline import TrainingError, TrainOptions, train_from_run
from s3gym_tui.training.runs import MANIFEST, read_manifest

pytest.importorskip("peft")
pytest.importorskip("trl")

TINY = TrainConfig(epochs=2, batch_size=2, grad_accum=1, learning_rate=1e-2)


async def scripted_run(store, episodes=1):
    run = store.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=episodes,
                                     eval_every=episodes, eval_episodes=1))
    return await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()


async def test_local_pipeline_on_the_tiny_base(store, tiny_base, tmp_path):
    source = await scripted_run(store)
    options = TrainOptions(base=str(tiny_base), max_examples=4, eval_episodes=1, step_cap=2, train=TINY)
    seen = {"train": [], "eval": []}
    from s3gym_tui.training.pipeline import Hooks

    hooks = Hooks(train_event=seen["train"].append, eval_event=seen["eval"].append)
    outcome = await train_from_run(store, source.id, options, hooks)
    run, report = outcome.run, outcome.report
    assert outcome.exported.count == 4 and outcome.build.dataset.run_id == source.id
    assert run.config.pathway == "trained" and run.config.checkpoints() == [0, 1, 2] and run.status == "finished"
    assert [r.model for r in report.rows] == [f"trained/{run.id}/{x}" for x in (0, 1, 2)]
    assert run.config.model == f"trained/{run.id}/2"
    info = report.info
    assert info.backend == "local" and info.epochs == 2 and info.examples == 4 and len(info.losses) == 4
    assert set(info.repairs) == {0, 1, 2} and all(0 <= n <= 2 for n in info.repairs.values())
    base_dir, adapters = read_manifest(tmp_path / "training" / run.id / MANIFEST)
    assert base_dir == tiny_base.resolve() and sorted(adapters) == [1, 2]
    assert (tmp_path / "training" / run.id / f"{outcome.build.dataset.id}.prompt_completion.jsonl").is_file()
    for episode in store.episodes(run.id):
        assert episode.n_steps == 2 and episode.model == f"trained/{run.id}/{episode.checkpoint}"
        for step in store.steps(episode.id):
            parsed = parse_reply(step.reply)
            assert parsed.action in ("collaborate", "cheat") and parsed.self_score is not None
    assert [e.kind for e in seen["train"]].count("epoch") == 2 and seen["eval"]
    assert audit(store).ok
    note = json.loads(run.note.split(" ", 1)[1])
    assert note["source_run"] == source.id and note["dataset_id"] == outcome.build.dataset.id


async def test_refusals(store, tiny_base):
    source = await scripted_run(store)
    with pytest.raises(TrainingError, match="no examples"):
        await train_from_run(store, source.id, TrainOptions(base=str(tiny_base), threshold=100.0))
    with pytest.raises(TrainingError, match="unknown backend"):
        await train_from_run(store, source.id, TrainOptions(backend="cloud"))
    with pytest.raises(TrainingError, match="config.json"):
        await train_from_run(store, source.id, TrainOptions(base="/nonexistent/model", max_examples=1))
    trained = store.create_run(RunConfig(model="trained/x/1", game="trust", pathway="trained"))
    with pytest.raises(TrainingError, match="is a training run"):
        await train_from_run(store, trained.id, TrainOptions())


def test_s3gym_train_with_progress_and_tables(tmp_path, tiny_base, capsys):
    import asyncio

    db = tmp_path / "c.db"
    with Store(db) as store:
        source = asyncio.run(scripted_run(store))
    code = main(["train", source.id, "--base", str(tiny_base), "--epochs", "1", "--max-examples", "2",
                 "--batch-size", "2", "--grad-accum", "1", "--eval-episodes", "1", "--step-cap", "1",
                 "--correction", "reference", "--db", str(db)])
    out = capsys.readouterr()
    assert code == 0, out.err
    for needle in ("dataset (self-judged selection vs verifier)", "checkpoints of trust-trained-",
                   "training curve metrics", "prompt_completion.jsonl", "epochs", "evaluation"):
        assert needle in out.out, needle
    with Store(db) as store:
        trained = [r for r in store.list_runs() if r.config.pathway == "trained"]
    assert len(trained) == 1 and [c.x for c in Store(db).checkpoints(trained[0].id)] == [0, 1]
    code = main(["resume", trained[0].id, "--db", str(db)])
    err = capsys.readouterr().err
    assert code == 2 and "is a training run" in err
    code = main(["train", "no-such-run", "--db", str(db)])
    assert code == 2 and "no run 'no-such-run'" in capsys.readouterr().err
