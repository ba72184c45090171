"""Strict-mode checkpoint evaluation: evaluation runs linked to a stored training (no torch: checkpoints
played by the scripted players and by a deliberately bad test provider)."""

from __future__ import annotations

import pytest

from s3gym_tui.engine.events import CheckpointScored, EpisodeDone
from s3gym_tui.engine.metrics import game_curve_metrics
from s3gym_tui.engine.report import run_report
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Training, TrainingCheckpoint, audit
from s3gym_tui.training.dataset import build_dataset
from s3gym_tui.training.evaluate import (NotATrainingRun, create_eval_run, eval_runs, evaluate_training, own_eval_run,
                                         played_checkpoints, training_report)


@pytest.fixture
async def source(store):
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=2,
                                          eval_every=2, eval_episodes=2, eval_seed_base=1_000_010))
    run = await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()
    build = await build_dataset(store, run.id)
    return run, build.dataset


@pytest.fixture
def bad_provider(monkeypatch):
    """`bad/<anything>`: always answers an action Trust refuses, so it scores 0."""
    import litellm
    from litellm import CustomLLM

    from s3gym_tui.providers._common import build_response

    class Bad(CustomLLM):
        def completion(self, model, messages, *args, model_response=None, **kwargs):
            return build_response(model_response, f"bad/{model}", "Answer: pass, Score: 2", prompt_tokens=1,
                                  completion_tokens=1)

        async def acompletion(self, model, messages, *args, model_response=None, **kwargs):
            return self.completion(model, messages, model_response=model_response)

    monkeypatch.setattr(litellm, "custom_provider_map",
                        list(litellm.custom_provider_map or []) + [{"provider": "bad", "custom_handler": Bad()}])
    litellm.utils.custom_llm_setup()
    return "bad/model"


_n = iter(range(10_000))


def stored_training(store, source_run, dataset, checkpoints) -> Training:
    training = store.trainings.add_training(Training(id=f"t-{next(_n)}", games=("trust",), source_run=source_run.id,
                                                     dataset_id=dataset.id, base="scripted", epochs=max(checkpoints), examples=3))
    for x, model in checkpoints.items():
        store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=training.id, x=x, model=model))
    return training


async def test_every_checkpoint_is_played_in_strict_mode_on_the_source_eval_seeds(store, source):
    run, dataset = source
    models = {0: "scripted/trust", 1: "scripted/trust", 2: "scripted/trust"}
    training = stored_training(store, run, dataset, models)
    trained = create_eval_run(store, training, run.config, list(models), eval_episodes=2)
    cfg = trained.config
    assert (cfg.pathway, cfg.checkpoints(), cfg.eval_seed_base, cfg.game) == ("trained", [0, 1, 2], 1_000_010, "trust")
    assert store.trainings.training_of_run(trained.id) == (training, "trust", (0, 1, 2))
    assert store.trainings.training_of_run(run.id) is None and own_eval_run(store.trainings, store.runs, training).id == trained.id
    assert played_checkpoints(store.trainings, trained) == models
    events = []
    checkpoints = await evaluate_training(store, trained, events.append, backoff_base_s=0)
    assert [c.x for c in checkpoints] == [0, 1, 2] == [c.x for c in store.checkpoints.list(trained.id)]
    assert sum(isinstance(e, EpisodeDone) for e in events) == 6
    assert [e.checkpoint.x for e in events if isinstance(e, CheckpointScored)] == [0, 1, 2]
    source_seeds = [e.seed for e in store.episodes.list(run.id, phase="eval", checkpoint=0)]
    for x in (0, 1, 2):
        episodes = store.episodes.list(trained.id, phase="eval", checkpoint=x)
        assert [e.seed for e in episodes] == source_seeds
        for episode in episodes:
            assert episode.model == models[x] and episode.pathway == "trained"
            assert episode.history_episode_ids == () and episode.summary_id is None
            for step in store.episodes.steps(episode.id):
                assert "Hint Messages:" not in store.prompts.step_prompt(episode.id, step.index)
    assert not store.episodes.list(trained.id, phase="explore")
    assert store.runs.get_run(trained.id).status == "finished" and audit(store).ok
    report = training_report(store, trained)
    points = [(r.epoch, r.mean) for r in report.rows]
    assert report.curve == game_curve_metrics(points, "trust")
    assert report.negative_transfer == () and all(r.delta == 0 for r in report.rows)
    assert run_report(store, store.runs.get_run(trained.id)).curve == report.curve  # the ordinary report agrees
    # resuming does nothing new
    again = await evaluate_training(store, trained, backoff_base_s=0)
    assert again == checkpoints and len(store.episodes.list(trained.id)) == 6


async def test_negative_transfer_is_flagged_when_a_checkpoint_falls_below_epoch_0(store, source, bad_provider):
    run, dataset = source
    training = stored_training(store, run, dataset, {0: "scripted/trust", 1: bad_provider, 2: "scripted/trust"})
    trained = create_eval_run(store, training, run.config, [0, 1, 2], eval_episodes=2)
    await evaluate_training(store, trained, backoff_base_s=0)
    report = training_report(store, trained)
    means = {r.epoch: r.mean for r in report.rows}
    assert means[1] == 0.0 and means[0] > 0 and means[2] == means[0]
    assert report.negative_transfer == (1,)
    assert [r.negative for r in report.rows] == [False, True, False]
    assert report.rows[1].delta == -means[0] and report.curve.final_delta == 0
    assert report.curve.auc_plus == 0 and report.curve.max == means[0]


async def test_remote_style_checkpoints_play_with_their_step_cap(store, source):
    run, dataset = source
    training = stored_training(store, run, dataset, {0: "scripted/trust", 3: "scripted/trust"})
    trained = create_eval_run(store, training, run.config, [0, 3], eval_episodes=1, step_cap=4)
    assert trained.config.checkpoints() == [0, 3] and trained.config.step_cap == 4
    await evaluate_training(store, trained, backoff_base_s=0)
    assert all(e.n_steps == 4 for e in store.episodes.list(trained.id))
    assert [(r.repair, r.unparsed, r.replies) for r in training_report(store, trained).rows] == [(None, 0, 4)] * 2
    assert [r.id for _, r, _ in eval_runs(store.trainings, store.runs, training)] == [trained.id]
    with pytest.raises(ValueError, match="only trained/<id>/<x> replies can be repaired"):
        create_eval_run(store, training, run.config, [0, 3], repair=True)


FREE = "I think I would cheat here"  # what the fake checkpoint writes: no Answer line


@pytest.fixture
def fake_trained(monkeypatch):
    """The `trained` provider with its generation replaced (no torch): every free reply breaks the
    answer format; with .../repair the provider repairs it, as the real one does (serve.generate's
    result). `calls` counts generations; `fail_after` makes the next generation fail (an interruption)."""
    from s3gym_tui.training import serve

    state = {"calls": 0, "fail_after": None}

    def generate(name, messages, ctx, params):
        if state["fail_after"] is not None and state["calls"] >= state["fail_after"]:
            raise serve.bad_request("the machine went away", f"trained/{name}", "trained")
        state["calls"] += 1
        if serve.repairs(name):
            return {"text": "Answer: cheat, Score: 1", "prompt_tokens": 5, "completion_tokens": 9, "repaired": True,
                    "free_reply": FREE, "task": "act"}
        return {"text": FREE, "prompt_tokens": 5, "completion_tokens": 7, "repaired": False, "task": "act"}

    monkeypatch.setattr(serve.HANDLER, "generate", generate)
    serve.register()
    return state


async def test_replies_are_scored_as_written_and_repairs_are_stored_and_counted_across_a_resume(
        store, source, fake_trained):
    run, dataset = source
    tid = f"t-{next(_n)}"
    training = store.trainings.add_training(Training(id=tid, games=("trust",), source_run=run.id, dataset_id=dataset.id,
                                                     base="tiny", epochs=1, examples=3))
    for x in (0, 1):
        store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=tid, x=x, model=f"trained/{tid}/{x}"))
    written = create_eval_run(store, training, run.config, [0, 1], eval_episodes=1, step_cap=2)
    repaired = create_eval_run(store, training, run.config, [0, 1], eval_episodes=1, step_cap=2, repair=True)
    assert repaired.config.model == f"trained/{tid}/1/repair" and own_eval_run(store.trainings, store.runs, training).id == written.id
    assert own_eval_run(store.trainings, store.runs, training, repair=True).id == repaired.id

    await evaluate_training(store, written, backoff_base_s=0)
    for episode in store.episodes.list(written.id):  # stored as the model wrote it, never repaired
        assert [s.reply for s in store.episodes.steps(episode.id)] == [FREE, FREE] and not store.trainings.step_repairs(episode.id)
    assert store.trainings.repair_counts(written.id) == {0: (0, 2), 1: (0, 2)}

    fake_trained["fail_after"] = fake_trained["calls"] + 3  # the repairing evaluation stops after 3 replies
    with pytest.raises(Exception, match="the machine went away"):
        await evaluate_training(store, repaired, backoff_base_s=0)
    assert store.runs.get_run(repaired.id).status == "stopped"
    assert sum(r for r, _ in store.trainings.repair_counts(repaired.id).values()) == 3
    fake_trained["fail_after"] = None
    await evaluate_training(store, repaired, backoff_base_s=0)  # resumed: the count is the store's, 4 of 4
    assert store.trainings.repair_counts(repaired.id) == {0: (2, 2), 1: (2, 2)}
    for episode in store.episodes.list(repaired.id):
        steps = store.episodes.steps(episode.id)
        repairs = store.trainings.step_repairs(episode.id)
        assert repairs == {s.index: (FREE, s.reply) for s in steps} and all(s.action == "cheat" for s in steps)

    report = training_report(store, written)
    assert report.repair_run.id == repaired.id
    for row in report.rows:  # both figures, never mixed: as written every reply failed; repaired, all were fixed
        assert (row.unparsed, row.replies) == (2, 2) and row.repair.repaired == row.repair.steps == 2
        assert row.mean == 0.0 and row.repair.mean != row.mean and row.repair.mean is not None
    with pytest.raises(NotATrainingRun, match="repaired its replies"):
        training_report(store, repaired)

    # a second evaluation of the same base on the same seed reports the same count (read from the store)
    again = create_eval_run(store, training, run.config, [0], eval_episodes=1, step_cap=2, repair=True)
    await evaluate_training(store, again, backoff_base_s=0)
    assert store.trainings.repair_counts(again.id) == {0: (2, 2)} == {0: store.trainings.repair_counts(repaired.id)[0]}
    assert audit(store).ok


async def test_an_evaluation_run_may_play_only_some_checkpoints_on_another_game(store, source):
    """A cross-game cell of the distillation matrix: only the expert's own checkpoint, on snake."""
    run, dataset = source
    training = stored_training(store, run, dataset, {0: "scripted/trust", 2: "scripted/snake"})
    snake = store.runs.create_run(RunConfig(model="scripted/snake", game="snake", explore_episodes=0, eval_episodes=1,
                                            eval_seed_base=1_000_020, step_cap=3))
    cross = create_eval_run(store, training, snake.config, [2], game="snake")
    assert (cross.config.game, cross.config.eval_seed_base, cross.config.step_cap) == ("snake", 1_000_020, 3)
    assert played_checkpoints(store.trainings, cross) == {2: "scripted/snake"}
    await evaluate_training(store, cross, backoff_base_s=0)
    assert [c.x for c in store.checkpoints.list(cross.id)] == [2]
    report = training_report(store, cross)
    assert report.game == "snake" and [r.epoch for r in report.rows] == [2] and report.rows[0].delta is None
    with pytest.raises(ValueError, match="no checkpoint 5"):
        create_eval_run(store, training, snake.config, [5], game="snake")


def test_a_run_that_evaluates_no_training_is_refused(store):
    run = store.runs.create_run(RunConfig(model="m", game="trust", pathway="trained"))
    with pytest.raises(NotATrainingRun, match="not the evaluation run of a training"):
        training_report(store, run)
