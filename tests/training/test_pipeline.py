"""The local SFT pathway end to end on the tiny base (seconds): dataset -> LoRA -> served checkpoints ->
strict evaluation, all in the trainings tables; the length limit; Ctrl-C and resume; the same through
`s3gym train`; the refusals."""

from __future__ import annotations

import json

import pytest

from s3gym_tui.cli import main
from s3gym_games.reply import parse_reply
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, audit
from s3gym_tui.training.config import RecipeError, SftConfig, build
from s3gym_tui.training.runs import run_decoding
from s3gym_tui.training.pipeline import TrainingError, train_from_run
from s3gym_tui.training.runs import MANIFEST, read_manifest

pytest.importorskip("peft")
pytest.importorskip("trl")

TINY = dict(epochs=2, batch_size=2, grad_accum=1, learning_rate=1e-2)


async def scripted_run(store, episodes=1):
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=episodes,
                                          eval_every=episodes, eval_episodes=1))
    return await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()


async def test_local_pipeline_on_the_tiny_base(store, tiny_base, tmp_path):
    source = await scripted_run(store)
    options = SftConfig(base=str(tiny_base), max_examples=4, eval_episodes=1, step_cap=2, **TINY, repair=True)
    seen = {"train": [], "eval": []}
    from s3gym_tui.training.pipeline import Hooks

    hooks = Hooks(train_event=seen["train"].append, eval_event=seen["eval"].append)
    outcome = await train_from_run(store, source.id, options, hooks)
    run, report, training = outcome.run, outcome.report, outcome.training
    assert outcome.exported.count == 4 and outcome.build.dataset.run_id == source.id
    assert run.id == training.id and run.note == ""  # the metadata lives in the trainings tables
    assert run.config.pathway == "trained" and run.config.checkpoints() == [0, 1, 2] and run.status == "finished"
    assert [r.model for r in report.rows] == [f"trained/{run.id}/{x}" for x in (0, 1, 2)]
    assert run.config.model == f"trained/{run.id}/2"
    stored = store.trainings.get_training(training.id)
    assert (stored.method, stored.role, stored.games, stored.source_run, stored.status) == (
        "sft", "expert", ("trust",), source.id, "finished")
    assert stored.dataset_id == outcome.build.dataset.id and stored.epochs == 2 and stored.examples == 4
    assert stored.settings["length_limit"] == 8192 and stored.settings["recipe"]["max_length"] is None
    assert stored.metrics["peak_rss_mb"] > 0 and stored.metrics["examples_per_s"] > 0 and stored.metrics["tokens"] > 0
    assert [c.x for c in store.trainings.training_checkpoints(training.id)] == [0, 1, 2]
    assert [c.step for c in store.trainings.training_checkpoints(training.id)] == [0, 2, 4]
    assert len(store.trainings.losses(training.id)) == 4 and all(p.phase == "sft" for p in store.trainings.losses(training.id))
    assert [s.kind for s in store.trainings.training_sources(training.id)] == ["dataset"]
    # the random model's replies as written, and (--repair) a twin run whose repairs are stored per step
    assert report.repair_run.id == f"{run.id}-repair" and stored.settings["recipe"]["repair"] is True
    assert all(r.replies == 2 and 0 <= r.unparsed <= 2 for r in report.rows)
    counts = store.trainings.repair_counts(report.repair_run.id)
    assert all(r.repair.repaired == counts[r.epoch][0] and r.repair.steps == 2 for r in report.rows)
    for episode in store.episodes.list(report.repair_run.id):
        assert episode.model == f"trained/{run.id}/{episode.checkpoint}/repair"
        repairs = store.trainings.step_repairs(episode.id)
        for step in store.episodes.steps(episode.id):
            assert parse_reply(step.reply).action in ("collaborate", "cheat")
            if step.index in repairs:
                assert repairs[step.index][1] == step.reply and repairs[step.index][0] != step.reply
    rows = store.datasets.dataset_rows(outcome.build.dataset.id)
    kept = [r for r in rows if r.kind == "kept"]
    assert kept and all(r.tokens and r.tokens > 100 for r in kept) and outcome.build.longest == max(r.tokens for r in kept)
    base_dir, adapters = read_manifest(tmp_path / "training" / run.id / MANIFEST)
    assert base_dir == tiny_base.resolve() and sorted(adapters) == [1, 2]
    assert (tmp_path / "training" / run.id / f"{outcome.build.dataset.id}.prompt_completion.jsonl").is_file()
    for episode in store.episodes.list(run.id):
        assert episode.n_steps == 2 and episode.model == f"trained/{run.id}/{episode.checkpoint}"
        assert not store.trainings.step_repairs(episode.id)  # scored as written: nothing repaired
    assert [e.kind for e in seen["train"]].count("checkpoint") == 2 and seen["eval"]
    assert audit(store).ok


async def test_too_long_examples_are_dropped_named_and_stored_never_truncated(store, tiny_base):
    source = await scripted_run(store)
    from s3gym_tui.training.lengths import TokenCounter, load_tokenizer

    counter = TokenCounter(load_tokenizer(str(tiny_base)))
    steps = [s for e in store.episodes.list(source.id, phase="explore") for s in store.episodes.steps(e.id)]
    lengths = sorted(counter(json.loads(store.prompts.step_prompt(s.episode_id, s.index)) +
                             [{"role": "assistant", "content": s.reply}]) for s in steps)
    limit = lengths[2]  # the prompt grows with the episode: all but the first three steps are over it
    assert len(steps) == 10 and lengths[3] > limit
    options = SftConfig(base=str(tiny_base), eval_episodes=1, step_cap=1, epochs=1, batch_size=2, grad_accum=1,
                        learning_rate=1e-2, max_length=limit)
    outcome = await train_from_run(store, source.id, options)
    build = outcome.build
    assert build.limit == limit and build.too_long and all(t.tokens > limit for t in build.too_long)
    rows = {(r.episode_id, r.step_index): r for r in store.datasets.dataset_rows(build.dataset.id)}
    for t in build.too_long:
        row = rows[(t.episode_id, t.step_index)]
        assert row.kind == "dropped" and row.tokens == t.tokens and row.reason.startswith("longer than the length limit")
        assert f"({t.tokens} > {limit} tokens)" in row.reason
    assert all(r.tokens <= limit for r in rows.values() if r.kind == "kept")
    assert build.dataset.rule["too_long"] == len(build.too_long) and build.dataset.rule["max_length"] == limit
    assert outcome.training.metrics["too_long"] == len(build.too_long)
    assert len(build.too_long) == 7 and outcome.exported.count == 3
    assert outcome.training.settings["recipe"]["max_length"] == limit


async def test_ctrl_c_leaves_the_training_resumable(store, tiny_base, monkeypatch):
    from s3gym_tui.training import backend, pipeline

    source = await scripted_run(store)
    real = backend.train_lora
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(kwargs.get("resume"))
        raise KeyboardInterrupt

    monkeypatch.setattr(backend, "train_lora", interrupted)
    options = SftConfig(base=str(tiny_base), max_examples=2, eval_episodes=1, step_cap=1, epochs=1, batch_size=2,
                        grad_accum=1, learning_rate=1e-2)
    with pytest.raises(KeyboardInterrupt):
        await train_from_run(store, source.id, options)
    training = store.trainings.list(source_run=source.id)[0]
    assert training.status == "interrupted" and f"s3gym resume {training.id}" in training.error
    assert store.trainings.training_checkpoints(training.id) == [] and store.trainings.training_evals(training.id) == []

    def resumed(*args, **kwargs):
        calls.append(kwargs.get("resume"))
        return real(*args, **kwargs)

    monkeypatch.setattr(backend, "train_lora", resumed)
    outcome = await pipeline.resume_training(store, training.id)
    assert calls == [False, True]
    assert outcome.training.status == "finished" and outcome.training.error is None
    assert [c.x for c in store.checkpoints.list(outcome.run.id)] == [0, 1]
    again = await pipeline.resume_training(store, training.id)  # finished: nothing more happens
    assert again.run == store.runs.get_run(outcome.run.id) and len(store.episodes.list(outcome.run.id)) == 2


async def test_refusals(store, tiny_base):
    source = await scripted_run(store)
    with pytest.raises(TrainingError, match="no examples"):
        await train_from_run(store, source.id, SftConfig(base=str(tiny_base), threshold=100.0))
    with pytest.raises(RecipeError, match=r"--backend must be 'local' or 'remote' \(given cloud\)"):
        build("sft", {"backend": "cloud"})
    with pytest.raises(TrainingError, match="config.json"):
        await train_from_run(store, source.id, SftConfig(base="/nonexistent/model", max_examples=1))
    trained = store.runs.create_run(RunConfig(model="trained/x/1", game="trust", pathway="trained"))
    with pytest.raises(TrainingError, match="is a training run"):
        await train_from_run(store, trained.id, SftConfig())


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
    for needle in ("dataset (self-judged selection vs verifier)", "checkpoints of trust-sft-", "sft training",
                   "prompt_completion.jsonl", "checkpoints", "evaluation", "peak RSS MB", "unparsed replies",
                   "served by transformers (fp32 base + LoRA)", "another serving path"):
        assert needle in out.out, needle
    with Store(db) as store:
        evaluations = [r for r in store.runs.list_runs() if r.config.pathway == "trained"]
    # the replies as written, and (the baseline of a format gain) every checkpoint under the grammar
    trained = [r for r in evaluations if run_decoding(r) == "free"]
    assert sorted(run_decoding(r) for r in evaluations) == ["free", "grammar"]
    assert len(trained) == 1 and [c.x for c in Store(db).checkpoints.list(trained[0].id)] == [0, 1]
    code = main(["resume", trained[0].id, "--db", str(db)])  # finished: the tables again, nothing new
    assert code == 0 and "checkpoints of" in capsys.readouterr().out
    with Store(db) as store:
        assert len(store.episodes.list(trained[0].id)) == 2
    code = main(["trainings", "--db", str(db)])
    assert code == 0 and trained[0].id in capsys.readouterr().out
    # --repair later: a twin evaluation that repairs, both figures side by side (table and JSON), never mixed
    code = main(["resume", trained[0].id, "--repair", "--db", str(db)])
    out = capsys.readouterr().out
    assert code == 0 and "R mean score" in out and "R repaired replies" in out and "unparsed replies" in out
    code = main(["trainings", "--json", "--db", str(db)])
    (data,) = json.loads(capsys.readouterr().out)
    assert data["shown_status"] == "finished" and data["settings"]["recipe"]["repair"] is True
    (evaluation,) = data["evaluations"]
    assert evaluation["repair_run_id"] == f"{trained[0].id}-repair"
    for cp in evaluation["checkpoints"]:
        assert cp["replies"] == 1 and cp["repaired"]["steps"] == 1 and 0 <= cp["repaired"]["repaired_replies"] <= 1
    code = main(["resume", source.id, "--repair", "--db", str(db)])
    assert code == 2 and "--repair applies to a training" in capsys.readouterr().err
    code = main(["train", "no-such-run", "--db", str(db)])
    assert code == 2 and "no run 'no-such-run'" in capsys.readouterr().err


def test_ctrl_c_in_s3gym_train_says_how_to_continue(tmp_path, tiny_base, capsys, monkeypatch):
    import asyncio

    from s3gym_tui.training import backend

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    db = tmp_path / "c.db"
    with Store(db) as store:
        source = asyncio.run(scripted_run(store))
    monkeypatch.setattr(backend, "train_lora", interrupted)
    code = main(["train", source.id, "--base", str(tiny_base), "--max-examples", "1", "--db", str(db)])
    err = capsys.readouterr().err
    with Store(db) as store:
        (training,) = store.trainings.list(source_run=source.id)
    assert code == 130 and f"`s3gym resume {training.id}` continues it" in err and "intact" in err
    assert training.status == "interrupted"
