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
from s3gym_tui.training.evaluate import (NotATrainingRun, create_eval_run, evaluate_training, played_checkpoints,
                                         record_repairs, training_report)
from s3gym_tui.training.runs import eval_runs, own_eval_run


@pytest.fixture
async def source(store):
    run = store.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=2,
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
    training = store.add_training(Training(id=f"t-{next(_n)}", games=("trust",), source_run=source_run.id,
                                           dataset_id=dataset.id, base="scripted", epochs=max(checkpoints), examples=3))
    for x, model in checkpoints.items():
        store.set_training_checkpoint(TrainingCheckpoint(training_id=training.id, x=x, model=model))
    return training


async def test_every_checkpoint_is_played_in_strict_mode_on_the_source_eval_seeds(store, source):
    run, dataset = source
    models = {0: "scripted/trust", 1: "scripted/trust", 2: "scripted/trust"}
    training = stored_training(store, run, dataset, models)
    trained = create_eval_run(store, training, run.config, list(models), eval_episodes=2)
    cfg = trained.config
    assert (cfg.pathway, cfg.checkpoints(), cfg.eval_seed_base, cfg.game) == ("trained", [0, 1, 2], 1_000_010, "trust")
    assert store.training_of_run(trained.id) == (training, "trust", (0, 1, 2))
    assert store.training_of_run(run.id) is None and own_eval_run(store, training).id == trained.id
    assert played_checkpoints(store, trained) == models
    events = []
    checkpoints = await evaluate_training(store, trained, events.append, backoff_base_s=0)
    assert [c.x for c in checkpoints] == [0, 1, 2] == [c.x for c in store.checkpoints(trained.id)]
    assert sum(isinstance(e, EpisodeDone) for e in events) == 6
    assert [e.checkpoint.x for e in events if isinstance(e, CheckpointScored)] == [0, 1, 2]
    source_seeds = [e.seed for e in store.episodes(run.id, phase="eval", checkpoint=0)]
    for x in (0, 1, 2):
        episodes = store.episodes(trained.id, phase="eval", checkpoint=x)
        assert [e.seed for e in episodes] == source_seeds
        for episode in episodes:
            assert episode.model == models[x] and episode.pathway == "trained"
            assert episode.history_episode_ids == () and episode.summary_id is None
            for step in store.steps(episode.id):
                assert "Hint Messages:" not in store.step_prompt(episode.id, step.index)
    assert not store.episodes(trained.id, phase="explore")
    assert store.get_run(trained.id).status == "finished" and audit(store).ok
    report = training_report(store, trained)
    points = [(r.epoch, r.mean) for r in report.rows]
    assert report.curve == game_curve_metrics(points, "trust")
    assert report.negative_transfer == () and all(r.delta == 0 for r in report.rows)
    assert run_report(store, store.get_run(trained.id)).curve == report.curve  # the ordinary report agrees
    # resuming does nothing new
    again = await evaluate_training(store, trained, backoff_base_s=0)
    assert again == checkpoints and len(store.episodes(trained.id)) == 6


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


async def test_remote_style_checkpoints_and_the_record_of_repairs(store, source):
    run, dataset = source
    training = stored_training(store, run, dataset, {0: "scripted/trust", 3: "scripted/trust"})
    trained = create_eval_run(store, training, run.config, [0, 3], eval_episodes=1, step_cap=4)
    assert trained.config.checkpoints() == [0, 3] and trained.config.step_cap == 4
    await evaluate_training(store, trained, backoff_base_s=0)
    assert all(e.n_steps == 4 for e in store.episodes(trained.id))
    record_repairs(store, training.id, {0: 2, 3: 0})
    record_repairs(store, training.id, {0: 1})  # a second evaluation run adds to the count
    assert [r.repaired for r in training_report(store, trained).rows] == [3, 0]
    assert [r.id for _, r, _ in eval_runs(store, training)] == [trained.id]


async def test_an_evaluation_run_may_play_only_some_checkpoints_on_another_game(store, source):
    """A cross-game cell of the distillation matrix: only the expert's own checkpoint, on snake."""
    run, dataset = source
    training = stored_training(store, run, dataset, {0: "scripted/trust", 2: "scripted/snake"})
    snake = store.create_run(RunConfig(model="scripted/snake", game="snake", explore_episodes=0, eval_episodes=1,
                                       eval_seed_base=1_000_020, step_cap=3))
    cross = create_eval_run(store, training, snake.config, [2], game="snake")
    assert (cross.config.game, cross.config.eval_seed_base, cross.config.step_cap) == ("snake", 1_000_020, 3)
    assert played_checkpoints(store, cross) == {2: "scripted/snake"}
    await evaluate_training(store, cross, backoff_base_s=0)
    assert [c.x for c in store.checkpoints(cross.id)] == [2]
    report = training_report(store, cross)
    assert report.game == "snake" and [r.epoch for r in report.rows] == [2] and report.rows[0].delta is None
    with pytest.raises(ValueError, match="no checkpoint 5"):
        create_eval_run(store, training, snake.config, [5], game="snake")


def test_a_run_that_evaluates_no_training_is_refused(store):
    run = store.create_run(RunConfig(model="m", game="trust", pathway="trained"))
    with pytest.raises(NotATrainingRun, match="not the evaluation run of a training"):
        training_report(store, run)
