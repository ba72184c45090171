"""The right baseline on a stored training (no torch: the `trained` provider's generation is replaced): every
checkpoint is evaluated as written and under the game's grammar, each against the base served the same way,
and the gain is split into what parsing gained and what play gained; a checkpoint that only matches the
constrained base is reported as a format gain, in the report, `s3gym trainings --json` and the screen's view."""

from __future__ import annotations

import json

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, Training, TrainingCheckpoint, audit
from s3gym_tui.training.baseline import baseline_text, outcome_line, splits
from s3gym_tui.training.evaluate import NotATrainingRun, create_eval_run, evaluate_training, training_report

PROSE = "I would rather think about it"


@pytest.fixture
def fake_trained(monkeypatch):
    """x = 0 (the base) writes prose, x = 1 writes `collaborate` (what the base picks under the grammar too),
    x = 2 writes `cheat` (what it also picks under the grammar): the provider's generation replaced."""
    from s3gym_tui.training import serve

    seen = []

    def generate(name, messages, ctx, params):
        _, x = serve.parse_model(name)
        seen.append(name)
        # an action call reaches the provider with its facts, as the real one needs them (the plugin accepts
        # the name as built-in: engine.llm then sends the context)
        assert (ctx or {}).get("task") == "act" and ctx.get("grammar"), (name, ctx)
        if serve.constrains(name):
            text = "Answer: cheat, Score: 3" if x == 2 else "Answer: collaborate, Score: 2"
        else:
            text = {0: PROSE, 1: "Answer: collaborate, Score: 2", 2: "Answer: cheat, Score: 3"}[x]
        return {"text": text, "prompt_tokens": 5, "completion_tokens": 7, "repaired": False, "task": "act"}

    monkeypatch.setattr(serve.HANDLER, "generate", generate)
    serve.register()
    return seen


async def _stored_training(store):
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=1,
                                          eval_every=1, eval_episodes=2))
    run = await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()
    training = store.trainings.add_training(Training(id="t-base", games=("trust",), source_run=run.id, base="tiny", epochs=2,
                                                     method="grpo"))
    for x in (0, 1, 2):
        store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=training.id, x=x, model=f"trained/t-base/{x}"))
    written = create_eval_run(store, training, run.config, [0, 1, 2], step_cap=3, run_id="t-base")
    constrained = create_eval_run(store, training, run.config, [0, 1, 2], step_cap=3, run_id="t-base-grammar",
                                  decoding="grammar")
    return training, written, constrained


async def test_each_checkpoint_against_the_base_served_the_same_way(store, fake_trained):
    training, written, constrained = await _stored_training(store)
    assert constrained.config.model == "trained/t-base/2/grammar"
    await evaluate_training(store, written, backoff_base_s=0)
    await evaluate_training(store, constrained, backoff_base_s=0)
    assert {n for n in fake_trained if n.endswith("/grammar")} == {f"t-base/{x}/grammar" for x in (0, 1, 2)}

    report = training_report(store, written)
    assert report.grammar_run.id == constrained.id
    rows = {r.epoch: r for r in report.rows}
    # as written: the base's prose scores nothing; under the grammar the base plays (collaborate)
    assert rows[0].parsed_share == 0.0 and rows[1].parsed_share == rows[2].parsed_share == 1.0
    assert rows[0].grammar.mean > rows[0].mean
    assert rows[1].grammar.mean == rows[0].grammar.mean  # x = 1 plays what the constrained base plays
    assert rows[2].grammar.mean > rows[0].grammar.mean  # x = 2 plays better than it
    gains = {g.x: g for g in splits(report)}
    assert gains[1].verdict == "format gain" and gains[1].format_gain == 1.0 and gains[1].play_gain == 0.0
    assert gains[1].total > 0 and gains[1].base_constrained == rows[0].grammar.mean
    assert gains[2].verdict == "play gain" and gains[2].play_gain == rows[2].grammar.mean - rows[0].grammar.mean
    assert "under the game's grammar" in baseline_text(report) and constrained.id in baseline_text(report)
    assert outcome_line(report).startswith("play gain: x=2")
    with pytest.raises(NotATrainingRun, match="constrained its replies to the grammar"):
        training_report(store, constrained)
    assert audit(store).ok


async def test_a_checkpoint_that_only_matches_the_constrained_base_is_a_format_gain(store, fake_trained, tmp_path):
    training, written, constrained = await _stored_training(store)
    await evaluate_training(store, written, backoff_base_s=0)
    await evaluate_training(store, constrained, backoff_base_s=0)
    # the training as far as x = 1 (what a format warm start alone makes): its outcome is a format gain
    from dataclasses import replace

    report = training_report(store, written)
    upto = replace(report, rows=tuple(r for r in report.rows if r.epoch <= 1))
    line = outcome_line(upto)
    assert line.startswith("format gain only: x=1") and "+100 pp" in line and "+0.00 under the grammar" in line


def test_trainings_json_and_the_report_say_which_baseline(tmp_path, fake_trained, capsys):
    import asyncio

    db = tmp_path / "b.db"
    with Store(db) as store:
        _, written, constrained = asyncio.run(_stored_training(store))
        asyncio.run(evaluate_training(store, written, backoff_base_s=0))
        asyncio.run(evaluate_training(store, constrained, backoff_base_s=0))
    assert main(["trainings", "--json", "--db", str(db)]) == 0
    (data,) = json.loads(capsys.readouterr().out)
    (evaluation,) = data["evaluations"]  # the constrained run is part of the written run's evaluation
    assert evaluation["grammar_run_id"] == "t-base-grammar" and "under the game's grammar" in evaluation["baseline"]
    assert [(g["x"], g["verdict"]) for g in evaluation["gains"]] == [(1, "format gain"), (2, "play gain")]
    assert evaluation["checkpoints"][0]["grammar"]["mean"] is not None
    assert main(["trainings", "--db", str(db)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "play gain" in out
    assert main(["report", "t-base", "--db", str(db)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "baseline:" in out
