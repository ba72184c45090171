"""Experts end to end, from one exploring run: SFT (self-judged dataset -> JSONL -> LoRA or a remote
fine-tune) or GRPO (on-policy rollouts on the run's exploration seeds, rewarded by the agent's own
judgement) -> checkpoints served through litellm as trained/<id>/<x> -> strict-mode evaluation.
Everything is recorded in the trainings tables; an interrupted training is resumed with
`resume_training` (the trainer continues from its last checkpoint, the evaluation from its last
finished episode).

Training runs in the calling thread (not a worker thread). Ctrl-C or SIGTERM (training/stop.py) ends
the optimizer step in progress, the trainer saves its state, and nothing further starts; the
training is then marked 'interrupted' and says how to continue.
"""

from __future__ import annotations

import gc
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Optional

from s3gym_tui.engine.events import Event
from s3gym_tui.models import Run
from s3gym_tui.store import Training, TrainingCheckpoint, TrainingSource
from s3gym_tui.store.errors import one_line
from s3gym_tui.training import require_extra
from s3gym_tui.training.backend import TrainEvent, TrainResult
from s3gym_tui.training.config import ExpertRecipe, GrpoConfig, SftConfig, TaspoConfig, stored_recipe
from s3gym_tui.training.dataset import DatasetBuild, Exported, build_dataset, export_jsonl, training_examples
from s3gym_tui.engine.lease import driving_training
from s3gym_tui.training.evaluate import (TrainingReport, create_eval_run, eval_runs, evaluate_training, own_eval_run,
                                         training_report)
from s3gym_tui.training.options import vllm_problem
from s3gym_tui.training.ranks import together, world
from s3gym_tui.training.runs import new_training_id, served_model, training_root, write_manifest

if TYPE_CHECKING:
    from s3gym_tui.store.trainings import Trainings


class TrainingError(RuntimeError):
    """The training cannot start or go on (one-line message for the user)."""


@dataclass
class Hooks:
    """Progress callbacks (all optional); the CLI turns them into progress bars."""

    dataset_progress: Callable[[int, int], None] = lambda seen, total: None
    dataset_built: Callable[[DatasetBuild, Exported], None] = lambda build, exported: None
    training_created: Callable[[Training], None] = lambda training: None
    train_event: Callable[[TrainEvent], None] = lambda event: None
    rollout: Callable[[str, int, int], None] = lambda game, seed, steps: None  # a GRPO rollout episode ended
    remote_status: Callable[[str, Any], None] = lambda status, job: None
    run_created: Callable[[Run], None] = lambda run: None
    eval_event: Callable[[Event], None] = lambda event: None


@dataclass(frozen=True)
class TrainingOutcome:
    training: Training
    run: Run
    report: TrainingReport
    build: Optional[DatasetBuild] = None
    exported: Optional[Exported] = None


def resume_hint(training_id: str) -> str:
    return f"`s3gym resume {training_id}` continues it"


def _check(source: Run, recipe: ExpertRecipe) -> None:
    """What the recipe (validated on its own, config.py) cannot know: the source run, the processes, the extra."""
    if source.config.pathway == "trained":
        raise TrainingError(f"run {source.id!r} is a training run: train from the run that explored")
    if not isinstance(recipe, ExpertRecipe):
        raise TrainingError(f"not an expert recipe: {type(recipe).__name__}")
    local = not isinstance(recipe, SftConfig) or recipe.backend == "local"
    if isinstance(recipe, GrpoConfig):
        problem = vllm_problem(recipe.vllm, recipe.level, world().size)
        if problem:
            raise TrainingError(problem)
        replies, ranks = recipe.num_generations * recipe.states_per_update, world().size
        if replies % ranks:
            raise TrainingError(f"GRPO across {ranks} processes: --generations x --states-per-update ({replies}) "
                                f"must be a multiple of {ranks}")
    problem = report_problem(recipe.report_to)
    if problem:
        raise TrainingError(problem)
    if isinstance(recipe, TaspoConfig) and world().size > 1:
        raise TrainingError("TASPO trains in one process for now (its analyzer and scorer read the store, "
                            "which only rank 0 opens): run it without torchrun / accelerate launch")
    if local:
        require_extra()


REPORT_MODULES = {"tensorboard": "tensorboard", "trackio": "trackio", "wandb": "wandb"}


def report_problem(report_to: str) -> Optional[str]:
    """Why `--report-to` cannot log here (its package is not installed), or None."""
    import importlib.util

    module = REPORT_MODULES.get(report_to)
    if module and importlib.util.find_spec(module) is None:
        return f"--report-to {report_to} needs {module} installed (pip install {module})"
    return None


def _base_dir(options_base: Optional[str], cache: Optional[Path]) -> Path:
    from s3gym_tui.training.backend import resolve_base

    try:
        return resolve_base(options_base, cache)
    except FileNotFoundError as exc:
        raise TrainingError(str(exc)) from None


def exploration_seeds(source: Run, episodes: Optional[int] = None) -> list[int]:
    """The run's exploration seeds (never an evaluation seed)."""
    from s3gym_tui.engine.visibility import require_exploration_seed

    cfg = source.config
    n = cfg.explore_episodes if episodes is None else episodes
    try:
        return [require_exploration_seed(cfg.explore_seed(i)) for i in range(max(1, n))]
    except ValueError as exc:
        raise TrainingError(str(exc)) from None


# ----- recording ---------------------------------------------------------------------------------
def record_local(trainings: Trainings, training: Training, result: TrainResult) -> Training:
    """Checkpoints (x = 0: the base), losses, throughput and the manifest of a finished local training."""
    from s3gym_tui.training import serve

    trainings.set_training_checkpoint(TrainingCheckpoint(training_id=training.id, x=0,
                                                         model=served_model(training.id, 0), step=0))
    for x, path in sorted(result.adapters.items()):
        trainings.set_training_checkpoint(TrainingCheckpoint(training_id=training.id, x=x,
                                                             model=served_model(training.id, x),
                                                             adapter=str(path), step=result.steps_at.get(x)))
    trainings.add_losses(training.id, result.losses)
    write_manifest(Path(training.directory), training.id, result.base_dir, result.adapters)
    serve.HANDLER.add_training(training.id, result.base_dir, result.adapters)
    serve.register()
    training = trainings.get_training(training.id)  # with the parts a stop stored meanwhile
    metrics = {**training.metrics, **{k: v for k, v in result.figures().items() if v is not None}}
    metrics.update({k: v for k, v in part_figures(training.metrics, result).items() if v is not None})
    # a training without a dataset (GRPO, TASPO) counts the replies its updates sampled
    examples = training.examples or result.examples
    return trainings.update_training(training.id, epochs=len(result.adapters), steps=result.steps, examples=examples,
                                     train_seconds=training.train_seconds + result.seconds, metrics=metrics,
                                     status="evaluating")


def recording(trainings: Trainings, training_id: str,
              progress: Callable[[TrainEvent], None]) -> Callable[[TrainEvent], None]:
    """The trainer's progress callback, storing every update's loss point (with its learning-signal
    figures) as it is logged, so a running or killed training shows what it has done so far."""
    from s3gym_tui.store import LossPoint

    def on_event(event: TrainEvent) -> None:
        if event.kind == "step" and event.loss is not None:
            trainings.add_losses(training_id, [LossPoint(step=event.step, epoch=event.epoch, loss=event.loss,
                                                         phase=event.phase, metrics=dict(event.metrics))])
        elif event.kind == "end" and event.metrics.get("stopped"):
            add_part(trainings, training_id, event, interrupted=True)
        progress(event)

    return on_event


def add_part(trainings: Trainings, training_id: str, event: TrainEvent, interrupted: bool) -> Training:
    """Keep one part of a training that was stopped and resumed (its phase, seconds, last update, tokens seen),
    its time added to the training's: the summary of a resumed training covers all its parts."""
    training = trainings.get_training(training_id)
    seconds = float(event.metrics.get("seconds") or 0.0)
    part = {"phase": event.phase, "seconds": round(seconds, 2), "updates": event.step,
            "tokens": int(event.metrics.get("tokens") or 0), "interrupted": interrupted}
    metrics = {**training.metrics, "parts": [*training.metrics.get("parts", []), part]}
    return trainings.update_training(training_id, metrics=metrics, train_seconds=training.train_seconds + seconds)


def part_figures(metrics: dict, result: TrainResult) -> dict:
    """Throughput over every part of the phase (the resumed trainer's counts include the parts before it, its
    clock does not), and how many parts were interrupted."""
    from s3gym_tui.training.learning_signal import PRIOR_PHASES

    # a prior phase's parts (the format warm start) have figures of their own
    parts = [p for p in metrics.get("parts", []) if p.get("interrupted") and p.get("phase") not in PRIOR_PHASES]
    if not parts:
        return {}
    seconds = result.seconds + sum(float(p["seconds"]) for p in parts)
    return {"examples_per_s": result.examples / seconds if seconds > 0 else None,
            "tokens_per_s": result.tokens / seconds if seconds > 0 else None, "seconds_all_parts": round(seconds, 2),
            "interrupted_parts": len(parts)}


def mark_stopped(trainings: Trainings, training_id: str, phase: str, exc: BaseException) -> None:
    """Record why a training stopped: interrupted (resumable: Ctrl-C, SIGTERM, a requested stop) or
    failed (with the one-line error). A study's training is resumed through its study. The phase is the
    one the stop reached (stop.current_phase(): the warm start, a GRPO update, ...) when it is known."""
    if isinstance(exc, (KeyboardInterrupt, SystemExit)) or type(exc).__name__ == "CancelledError":
        from s3gym_tui.training import stop

        reason = getattr(exc, "reason", None) or stop.requested() or "interrupted"
        phase = stop.current_phase() or phase
        study = trainings.get_training(training_id).study_id
        trainings.update_training(training_id, status="interrupted",
                                  error=f"{reason} during {phase}: {resume_hint(study or training_id)}")
    else:
        trainings.update_training(training_id, status="failed", error=f"{phase}: {one_line(exc)}"[:500])


async def evaluate_all(store, training: Training, hooks: Hooks) -> Training:
    """Play every evaluation run of the training (resumable), holding the training's lease; repaired
    replies are stored with their steps (repair runs only), so nothing is counted in memory."""
    from s3gym_tui.training import stop

    with driving_training(store, training.id):
        store.trainings.update_training(training.id, status="evaluating")
        stop.set_phase("evaluation")
        for _, run, _ in eval_runs(store.trainings, store.runs, training):
            hooks.run_created(run)
            try:
                await evaluate_training(store, run, hooks.eval_event)
            except BaseException as exc:
                mark_stopped(store.trainings, training.id, "evaluation", exc)
                raise
        return store.trainings.update_training(training.id, status="finished", error=None)


def _outcome(store, training: Training, build=None, exported=None) -> TrainingOutcome:
    run = own_eval_run(store.trainings, store.runs, training)
    if run is None:
        raise TrainingError(f"training {training.id!r} has no evaluation run")
    return TrainingOutcome(training, store.runs.get_run(run.id), training_report(store, store.runs.get_run(run.id)),
                           build, exported)


def _ensure_eval_run(store, training: Training, source: Run, options: ExpertRecipe) -> None:
    """The evaluation run scoring every checkpoint's replies as written; for local checkpoints also its twin
    under the game's grammar (`grammar_eval`: the baseline of a format gain) and, with --repair, its twin
    that repairs replies breaking the answer contract."""
    xs = [c.x for c in store.trainings.training_checkpoints(training.id)]
    if not store.trainings.training_evals(training.id):
        create_eval_run(store, training, source.config, xs, eval_episodes=options.eval_episodes,
                        step_cap=options.step_cap, run_id=training.id)
    wanted = [d for d, on in (("grammar", options.grammar_eval), ("repair", options.repair)) if on]
    for decoding in wanted if training.backend == "local" else ():
        if own_eval_run(store.trainings, store.runs, training, decoding=decoding) is None:
            create_eval_run(store, training, source.config, xs, eval_episodes=options.eval_episodes,
                            step_cap=options.step_cap, run_id=f"{training.id}-{decoding}", decoding=decoding)


# ----- SFT -----------------------------------------------------------------------------------------
def _train_sft_local(store, training: Training, options_train: SftConfig, hooks: Hooks, resume: bool) -> Training:
    from s3gym_tui.training.backend import train_lora

    from s3gym_tui.training import stop

    examples = training_examples(store, training.dataset_id)
    stop.set_phase("loading the base model")
    try:
        result = together(train_lora, examples, Path(training.base), Path(training.directory) / "adapters",
                          options_train, progress=recording(store.trainings, training.id, hooks.train_event),
                          resume=resume)
    except BaseException as exc:
        mark_stopped(store.trainings, training.id, "training", exc)
        raise
    gc.collect()  # the trainer's copy of the model goes before the served one loads
    return record_local(store.trainings, training, result)


async def _train_sft_remote(store, training: Training, exported: Exported, options: SftConfig,
                            hooks: Hooks) -> Training:
    from s3gym_tui.training import stop
    from s3gym_tui.training.remote import RemoteTrainingError, fine_tune_remote

    stop.set_phase("the remote job")
    try:
        result = await fine_tune_remote(exported.messages, options.remote_model, epochs=options.epochs,
                                        progress=hooks.remote_status)
    except RemoteTrainingError as exc:
        store.trainings.update_training(training.id, status="failed", error=str(exc))
        raise TrainingError(str(exc)) from None
    except BaseException as exc:
        mark_stopped(store.trainings, training.id, "the remote job", exc)
        raise
    if not result.fine_tuned_model:
        store.trainings.update_training(training.id, status="failed", error=f"job {result.job_id} named no model")
        raise TrainingError(f"fine-tuning job {result.job_id} succeeded but named no model")
    for x, model in ((0, result.base_model), (options.epochs, result.fine_tuned_model)):
        store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=training.id, x=x, model=model))
    return store.trainings.update_training(training.id, remote_job=result.job_id, base=result.base_model,
                                           epochs=options.epochs, train_seconds=result.seconds, status="evaluating")


async def _sft_from_run(store, source: Run, options: SftConfig, hooks: Hooks, out_dir: Optional[Path],
                        cache_dir: Optional[Path]) -> TrainingOutcome:
    from s3gym_tui.training.lengths import TokenCounter, context_window, effective_limit, load_tokenizer

    training_id = new_training_id(f"{source.config.game}-sft")
    directory = Path(out_dir or training_root()) / training_id
    base_dir, measure, limit = None, None, None
    if options.backend == "local":
        base_dir = _base_dir(options.base, cache_dir)
        measure = TokenCounter(load_tokenizer(str(base_dir)))
        limit = effective_limit(options.max_length, context_window(base_dir))
    build = await build_dataset(store, source.id, threshold=options.threshold, correction=options.correction,
                                max_examples=options.max_examples, progress=hooks.dataset_progress,
                                measure=measure, max_length=limit)
    exported = export_jsonl(store, build.dataset.id, directory)
    hooks.dataset_built(build, exported)
    if exported.count == 0:
        raise TrainingError(f"dataset {build.dataset.id} has no examples (every step was dropped): lower "
                            f"--threshold, add --correction reference or raise --max-length")
    training = store.trainings.add_training(Training(
        id=training_id, method="sft", games=(source.config.game,), source_run=source.id,
        dataset_id=build.dataset.id, backend=options.backend, base=str(base_dir or options.remote_model),
        directory=str(directory), status="training", examples=exported.count,
        settings={**options.dump(), "length_limit": limit},
        metrics={"too_long": len(build.too_long), "longest": build.longest}))
    store.trainings.add_training_sources(training.id, [TrainingSource(kind="dataset", ref=build.dataset.id,
                                                             game=source.config.game, n=exported.count)])
    hooks.training_created(training)
    with driving_training(store, training.id):
        if options.backend == "local":
            training = _train_sft_local(store, training, options, hooks, resume=False)
        else:
            training = await _train_sft_remote(store, training, exported, options, hooks)
        _ensure_eval_run(store, training, source, options)
        training = await evaluate_all(store, training, hooks)
    return _outcome(store, training, build, exported)


# ----- GRPO ----------------------------------------------------------------------------------------
def _train_grpo(store, training: Training, source: Run, hooks: Hooks, resume: bool) -> Training:
    from s3gym_tui.training.grpo import train_grpo
    from s3gym_tui.training.rollout_store import RolloutStore

    settings = training.settings
    grpo = stored_recipe(settings, training.method)  # an older training's settings read as its recipe
    episodes = RolloutStore(store, training.id, source.config.game, settings["seeds"], grpo.rollout_step_cap,
                            grpo.temperature)

    def on_rollout(game: str, seed: int, steps: int) -> None:
        store.trainings.add_training_sources(training.id, [TrainingSource(kind="rollout", game=game, seed=seed,
                                                                 mode="explore", n=steps)])
        hooks.rollout(game, seed, steps)

    def on_episode(rollout) -> None:
        rollout.episode_id = episodes(rollout).id  # TASPO records each rollout's credit with it
        hooks.rollout(rollout.game, rollout.seed, len(rollout.steps))

    from s3gym_tui.training import stop

    stop.set_phase("loading the base model")
    trainer_class = None
    if isinstance(grpo, TaspoConfig):
        from s3gym_tui.training.taspo import taspo_trainer

        trainer_class = taspo_trainer(grpo, analyzer=grpo.analyzer or source.config.model, store=store,
                                      training_id=training.id)
    try:
        result = together(train_grpo, source.config.game, settings["seeds"], Path(training.base),
                          Path(training.directory) / "adapters", grpo,
                          progress=recording(store.trainings, training.id, hooks.train_event), on_rollout=on_rollout,
                          resume=resume, on_episode=on_episode, trainer_class=trainer_class)
    except BaseException as exc:
        mark_stopped(store.trainings, training.id, "GRPO training", exc)
        raise
    finally:
        episodes.close()
    gc.collect()
    return record_local(store.trainings, training, result)


async def _grpo_from_run(store, source: Run, options: GrpoConfig, hooks: Hooks, out_dir: Optional[Path],
                         cache_dir: Optional[Path]) -> TrainingOutcome:
    grpo = options
    training_id = new_training_id(f"{source.config.game}-{options.method}")
    directory = Path(out_dir or training_root()) / training_id
    base_dir = _base_dir(options.base, cache_dir)
    seeds = exploration_seeds(source, grpo.episodes)
    training = store.trainings.add_training(Training(
        id=training_id, method=options.method, games=(source.config.game,), source_run=source.id, base=str(base_dir),
        reward=grpo.reward, directory=str(directory), status="training",
        settings={**options.dump(), "seeds": seeds}))
    hooks.training_created(training)
    with driving_training(store, training.id):
        training = _train_grpo(store, training, source, hooks, resume=False)
        _ensure_eval_run(store, training, source, options)
        training = await evaluate_all(store, training, hooks)
    return _outcome(store, training)


# ----- entry points --------------------------------------------------------------------------------
def _starter(recipe: ExpertRecipe) -> Callable[..., Any]:
    """The pipeline of the recipe's method: the registry below, by the recipe's class (TASPO's is GRPO's)."""
    for cls in type(recipe).__mro__:
        if cls in STARTERS:
            return STARTERS[cls]
    raise TrainingError(f"no pipeline for {type(recipe).__name__}")


async def train_from_run(store, run_id: str, recipe: Optional[ExpertRecipe] = None, hooks: Optional[Hooks] = None, *,
                         out_dir: Optional[Path] = None, cache_dir: Optional[Path] = None) -> TrainingOutcome:
    """Train an expert from run `run_id` as `recipe` says (config.SftConfig by default, GrpoConfig,
    TaspoConfig), evaluate every checkpoint, record it all. `out_dir`: where the training's folder goes
    (default training_root()); `cache_dir`: where the converted default base is kept."""
    hooks = hooks or Hooks()
    recipe = recipe if recipe is not None else SftConfig()
    source = store.runs.get_run(run_id)
    _check(source, recipe)
    return await _starter(recipe)(store, source, recipe, hooks, out_dir, cache_dir)


async def resume_training(store, training_id: str, hooks: Optional[Hooks] = None,
                          repair: Optional[bool] = None) -> TrainingOutcome:
    """Continue an interrupted expert training: the trainer from its last checkpoint when no adapter
    was recorded yet, then the evaluation from its last finished episode. `repair` (None: as the
    training was started) adds the evaluation that repairs replies breaking the answer contract."""
    hooks = hooks or Hooks()
    training = store.trainings.get_training(training_id)
    if training.role != "expert":
        raise TrainingError(f"{training_id} is part of study {training.study_id}: `s3gym resume {training.study_id}`")
    with driving_training(store, training_id, "s3gym resume"):
        recipe = stored_recipe(training.settings, training.method)
        if repair and not recipe.repair:
            if training.backend != "local":
                raise TrainingError(f"{training_id} was trained remotely: only local checkpoints can be repaired")
            training = store.trainings.update_training(training.id,
                                                       settings=_with(training.settings, recipe, repair=True))
            if training.status == "finished":
                training = store.trainings.update_training(training.id, status="evaluating")
        return await _resume(store, training, hooks)


async def _resume(store, training: Training, hooks: Hooks) -> TrainingOutcome:
    training_id = training.id
    if training.status != "finished":
        source = store.runs.get_run(training.source_run)
        if len(store.trainings.training_checkpoints(training.id)) <= (0 if training.backend == "remote" else 1):
            if training.backend != "local":
                raise TrainingError(f"remote training {training_id} stopped before its job finished: start a new one")
            require_extra()
            training = store.trainings.update_training(training.id, status="training", error=None)
            hooks.training_created(training)
            recipe = stored_recipe(training.settings, training.method)
            if isinstance(recipe, GrpoConfig):
                training = _train_grpo(store, training, source, hooks, resume=True)
            else:
                training = _train_sft_local(store, training, recipe, hooks, resume=True)
        _ensure_eval_run(store, training, source, stored_recipe(training.settings, training.method))
        training = await evaluate_all(store, training, hooks)
    return _outcome(store, training)


STARTERS: dict[type, Callable[..., Any]] = {SftConfig: _sft_from_run, GrpoConfig: _grpo_from_run}


def _with(settings: dict[str, Any], recipe: ExpertRecipe, **changes: Any) -> dict[str, Any]:
    """A training's stored settings with its recipe changed (stored as a version-2 dump from then on)."""
    return {**settings, **recipe.model_copy(update=changes).dump()}
