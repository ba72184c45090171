"""The Training pathway end to end: dataset from a run -> JSONL -> fine-tune (local LoRA or remote)
-> the checkpoints served through litellm -> strict-mode evaluation stored as a training run."""

from __future__ import annotations

import asyncio
import gc
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Optional

from s3gym_tui.engine.events import Event
from s3gym_tui.models import Run
from s3gym_tui.training import require_extra
from s3gym_tui.training.backend import TrainConfig, TrainEvent
from s3gym_tui.training.dataset import DatasetBuild, Exported, build_dataset, export_jsonl, training_examples
from s3gym_tui.training.evaluate import (TrainingReport, create_training_run, evaluate_training, new_training_id,
                                         record_repairs, training_report)
from s3gym_tui.training.runs import LossPoint, TrainingInfo, training_root, write_manifest


class TrainingError(RuntimeError):
    """The training cannot start or go on (one-line message for the user)."""


@dataclass(frozen=True)
class TrainOptions:
    threshold: float = 0.0
    correction: Optional[str] = None  # None | 'reference' | a litellm model string
    max_examples: Optional[int] = None
    backend: str = "local"  # 'local' | 'remote'
    base: Optional[str] = None  # local: HF model dir, None/'default' = embedded SmolLM2-135M
    remote_model: Optional[str] = None  # remote: e.g. openai/gpt-4o-mini-2024-07-18
    train: TrainConfig = field(default_factory=TrainConfig)
    eval_episodes: Optional[int] = None  # default: the source run's
    step_cap: Optional[int] = None  # default: the source run's
    out_dir: Optional[Path] = None  # default: training_root()
    cache_dir: Optional[Path] = None  # where the converted default base is kept


@dataclass
class Hooks:
    """Progress callbacks (all optional); the CLI turns them into progress bars."""

    dataset_progress: Callable[[int, int], None] = lambda seen, total: None
    dataset_built: Callable[[DatasetBuild, Exported], None] = lambda build, exported: None
    train_event: Callable[[TrainEvent], None] = lambda event: None
    remote_status: Callable[[str, Any], None] = lambda status, job: None
    run_created: Callable[[Run], None] = lambda run: None
    eval_event: Callable[[Event], None] = lambda event: None


@dataclass(frozen=True)
class TrainingOutcome:
    build: DatasetBuild
    exported: Exported
    run: Run
    report: TrainingReport


def served_model(training_id: str, epoch: int) -> str:
    return f"trained/{training_id}/{epoch}"


async def _train_local(training_id: str, examples: list, directory: Path, options: TrainOptions,
                       hooks: Hooks) -> dict[str, Any]:
    from s3gym_tui.training import serve
    from s3gym_tui.training.backend import resolve_base, train_lora

    try:
        base_dir = await asyncio.to_thread(resolve_base, options.base, options.cache_dir)
    except FileNotFoundError as exc:
        raise TrainingError(str(exc)) from None
    result = await asyncio.to_thread(train_lora, examples, base_dir, directory / "adapters", options.train,
                                     hooks.train_event)
    gc.collect()  # the trainer's copy of the model goes before the served one loads
    write_manifest(directory, training_id, base_dir, result.adapters)
    serve.HANDLER.add_training(training_id, base_dir, result.adapters)
    serve.register()
    return {"backend": "local", "base": str(base_dir), "epochs": len(result.adapters),
            "checkpoints": {k: served_model(training_id, k) for k in [0, *sorted(result.adapters)]},
            "losses": tuple(LossPoint(step=s, epoch=e, loss=l) for s, e, l in result.losses),
            "train_seconds": result.seconds, "settings": options.train.as_dict()}


async def _train_remote(exported: Exported, options: TrainOptions, hooks: Hooks) -> dict[str, Any]:
    from s3gym_tui.training.remote import RemoteTrainingError, fine_tune_remote

    if not options.remote_model:
        raise TrainingError("the remote backend needs --remote-model (e.g. openai/gpt-4o-mini-2024-07-18)")
    try:
        result = await fine_tune_remote(exported.messages, options.remote_model, epochs=options.train.epochs,
                                        progress=hooks.remote_status)
    except RemoteTrainingError as exc:
        raise TrainingError(str(exc)) from None
    if not result.fine_tuned_model:
        raise TrainingError(f"fine-tuning job {result.job_id} succeeded but named no model")
    return {"backend": "remote", "base": result.base_model, "epochs": options.train.epochs,
            "checkpoints": {0: result.base_model, options.train.epochs: result.fine_tuned_model},
            "remote_job": result.job_id, "train_seconds": result.seconds,
            "settings": {"epochs": options.train.epochs, "provider_job": result.job_id}}


async def train_from_run(store, run_id: str, options: TrainOptions = TrainOptions(),
                         hooks: Optional[Hooks] = None) -> TrainingOutcome:
    """Build the dataset from run `run_id`, fine-tune, evaluate every checkpoint, store the training run."""
    hooks = hooks or Hooks()
    source = store.get_run(run_id)
    if source.config.pathway == "trained":
        raise TrainingError(f"run {run_id!r} is a training run: train from the run that explored")
    if options.backend not in ("local", "remote"):
        raise TrainingError(f"unknown backend {options.backend!r}: local or remote")
    if options.backend == "local":
        require_extra()
    elif not options.remote_model:
        raise TrainingError("the remote backend needs --remote-model (e.g. openai/gpt-4o-mini-2024-07-18)")
    training_id = new_training_id(source.config.game)
    directory = Path(options.out_dir or training_root()) / training_id
    build = await build_dataset(store, run_id, threshold=options.threshold, correction=options.correction,
                                max_examples=options.max_examples, progress=hooks.dataset_progress)
    exported = export_jsonl(store, build.dataset.id, directory)
    hooks.dataset_built(build, exported)
    if exported.count == 0:
        raise TrainingError(f"dataset {build.dataset.id} has no examples (every step was dropped): lower "
                            f"--threshold or add --correction reference")
    if options.backend == "local":
        trained = await _train_local(training_id, training_examples(store, build.dataset.id), directory, options, hooks)
    else:
        trained = await _train_remote(exported, options, hooks)
    info = TrainingInfo(source_run=source.id, dataset_id=build.dataset.id, directory=str(directory),
                        examples=exported.count, **trained)
    run = create_training_run(store, source, info, options.eval_episodes, options.step_cap, run_id=training_id)
    hooks.run_created(run)
    from s3gym_tui.training import serve

    before = {k: dict(v) for k, v in serve.HANDLER.stats.items()}
    await evaluate_training(store, run, hooks.eval_event)
    if options.backend == "local":
        repairs = {x: serve.HANDLER.stats.get(m, {}).get("repaired", 0) - before.get(m, {}).get("repaired", 0)
                   for x, m in info.checkpoints.items()}
        run = record_repairs(store, store.get_run(run.id), repairs)
    run = store.get_run(run.id)
    return TrainingOutcome(build, exported, run, training_report(store, run))
