"""`--full-finetune`: every weight trained (no LoRA adapter), its checkpoints whole models that the `trained`
provider serves; refused where the frozen judge or the KL reference needs the adapter switched off."""

from __future__ import annotations

import asyncio

import pytest

from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.training import stop
from s3gym_tui.training.config import SftConfig
from s3gym_tui.training.pipeline import train_from_run

pytest.importorskip("trl")


def test_a_full_fine_tune_saves_and_serves_whole_models(store, tiny_base):
    from pathlib import Path

    from s3gym_tui.training.serve import whole_model

    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=1,
                                          eval_every=1, eval_episodes=1))
    run = asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    options = SftConfig(base=str(tiny_base), full_finetune=True, epochs=1, batch_size=2, grad_accum=1,
                        learning_rate=1e-3, max_examples=2, eval_episodes=1, step_cap=1)
    outcome = stop.run(lambda: train_from_run(store, run.id, options))
    (cp,) = [c for c in store.trainings.training_checkpoints(outcome.training.id) if c.x == 1]
    assert whole_model(Path(cp.adapter)) and not (Path(cp.adapter) / "adapter_model.safetensors").exists()
    assert outcome.training.status == "finished" and [r.epoch for r in outcome.report.rows] == [0, 1]
    assert all(r.replies == 1 for r in outcome.report.rows)  # x = 1 was served from its whole checkpoint


def test_full_fine_tune_refusals():
    from s3gym_tui.training.config import RecipeError, build

    with pytest.raises(RecipeError, match="--full-finetune with GRPO: the frozen judge"):
        build("grpo", {"full_finetune": True, "reward": "self"})
    with pytest.raises(RecipeError, match="--full-finetune with GRPO: the frozen judge"):
        build("grpo", {"full_finetune": True, "reward": "oracle", "beta": 0.1})
    assert build("grpo", {"full_finetune": True, "reward": "oracle"}).full_finetune
    with pytest.raises(RecipeError, match="distillation students are LoRA adapters"):
        build("distill", {"full_finetune": True})
