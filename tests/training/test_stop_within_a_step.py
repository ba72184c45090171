"""A stop is honoured within a step, not only at its end: between two gradient-accumulation micro-batches
(the last finished update saved, so a resume goes on from it to what an uninterrupted twin reaches),
between two GRPO rollouts and between two warm-start drafts; the stored reason names the phase, and
the trainer logs to TensorBoard beside the training when asked (`--report-to tensorboard`)."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest

from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.training import stop
from s3gym_tui.training.config import SftConfig
from s3gym_tui.training.pipeline import resume_training, train_from_run

pytest.importorskip("trl")

# 4 examples, batch 1 x 4 accumulated: one update per epoch, 2 in all
SFT = dict(epochs=2, batch_size=1, grad_accum=4, learning_rate=1e-2, max_examples=4, eval_episodes=1, step_cap=1,
           grammar_eval=False)


@pytest.fixture(autouse=True)
def _no_stop_left():
    stop.clear()
    yield
    stop.clear()


def _source(store):
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=1,
                                          eval_every=1, eval_episodes=1))
    return asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())


def test_a_stop_between_micro_batches_keeps_the_finished_update_and_resumes_to_the_twin(store, tiny_base,
                                                                                       monkeypatch):
    from s3gym_tui.training import hf

    source = _source(store)
    options = SftConfig(base=str(tiny_base), **SFT)
    twin = stop.run(lambda: train_from_run(store, source.id, options)).training
    assert twin.status == "finished" and twin.steps == 2

    substeps = []

    class StopInUpdate2(hf.StopCallback):
        """Requests a stop after micro-batch 2 of update 2 (as a signal arriving then would)."""

        def on_substep_end(self, args, state, control, **kwargs):
            substeps.append(state.global_step)
            if state.global_step == 1 and substeps.count(1) == 2:
                stop.request("interrupted (Ctrl-C)")
            return super().on_substep_end(args, state, control, **kwargs)

    monkeypatch.setattr(hf, "StopCallback", StopInUpdate2)
    with pytest.raises(stop.TrainingStopped):
        stop.run(lambda: train_from_run(store, source.id, options))
    (training,) = [t for t in store.trainings.list(source_run=source.id) if t.id != twin.id]
    # update 2 ended after its second micro-batch: no third one ran, no second update was made
    assert substeps == [0, 0, 0, 1, 1]
    assert [p.step for p in store.trainings.losses(training.id)] == [1]
    assert training.status == "interrupted" and training.error.startswith("interrupted (Ctrl-C) during SFT update 2")
    # the finished update is kept: the trainer's state at update 1 (no epoch had ended: nothing else saved it)
    trainer_dir = Path(training.directory) / "adapters" / "trainer"
    assert (trainer_dir / "checkpoint-1" / "trainer_state.json").is_file()
    part, = training.metrics["parts"]
    assert part["interrupted"] and part["phase"] == "sft" and part["updates"] == 1 and part["seconds"] > 0
    assert training.train_seconds == pytest.approx(part["seconds"], abs=0.01)

    monkeypatch.setattr(hf, "StopCallback", StopInUpdate2.__mro__[1])  # the real one again
    outcome = stop.run(lambda: resume_training(store, training.id))
    done = outcome.training
    assert done.status == "finished" and done.steps == 2 and done.metrics["resumed_from"].endswith("checkpoint-1")
    ours = [p.loss for p in store.trainings.losses(done.id)]
    theirs = [p.loss for p in store.trainings.losses(twin.id)]
    assert ours == theirs  # bit for bit: the dropped half-update is done again from the same state
    # the summary covers both parts: the time of the stopped one is in the training's, and throughput is over both
    assert done.metrics["interrupted_parts"] == 1 and done.train_seconds > part["seconds"]
    assert done.metrics["seconds_all_parts"] == pytest.approx(done.train_seconds, rel=0.05)


def test_a_stop_between_rollouts_names_the_rollout():
    from s3gym_games.trl_env import GRAMMAR_KEY, prompt_row
    from s3gym_tui.training.group_rollouts import GroupRollouts

    class Sampler:
        max_new_tokens, tokenizer = 8, None
        calls = 0

        def prompt_ids(self, messages):
            return [1, 2, 3]

        def sample(self, ids, pattern, key=None):
            Sampler.calls += 1
            if Sampler.calls == 2:
                stop.request("interrupted (Ctrl-C)")
            return [5, 6]

    rollouts = GroupRollouts("trust", "step", Sampler(), 2, "constrained", "oracle")
    row = prompt_row("trust", 3, [], [], "\"collaborate\" | \"cheat\"")
    assert row["prompt"][0][GRAMMAR_KEY]
    prompts = [row["prompt"]] * 4
    with pytest.raises(stop.TrainingStopped):
        rollouts(prompts)
    assert Sampler.calls == 2  # the third rollout never started
    assert stop.current_phase() == "GRPO update 1: rollouts (2 of 4 done)"


def test_a_stop_between_warm_start_drafts():
    from s3gym_tui.training.warm_start import collect_examples

    drafts = []

    def reply(messages, env, k):
        drafts.append(k)
        if k == 1:
            stop.request("terminated (SIGTERM)")
        return "Answer: collaborate, Score: 1", True

    with pytest.raises(stop.TrainingStopped):
        collect_examples("trust", [0], reply, 8, step_cap=10)
    assert drafts == [0, 1]
    assert stop.current_phase().startswith("the format warm start: drafting examples (")


def test_report_to_tensorboard_writes_event_files_a_reader_loads(store, tiny_base):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    source = _source(store)
    options = SftConfig(base=str(tiny_base), **{**SFT, "grad_accum": 2}, report_to="tensorboard")
    training = stop.run(lambda: train_from_run(store, source.id, options)).training
    logs = Path(training.directory) / "logs" / "sft"
    files = list(logs.rglob("events.out.tfevents.*"))
    assert files, sorted(str(p) for p in Path(training.directory).rglob("*"))
    reader = EventAccumulator(str(files[0].parent))
    reader.Reload()
    losses = reader.Scalars("train/loss")
    assert [e.step for e in losses] == [1, 2, 3, 4]
    stored = [p.loss for p in store.trainings.losses(training.id)]
    assert [e.value for e in losses] == pytest.approx(stored, rel=1e-5)
    assert training.settings["recipe"]["report_to"] == "tensorboard"
