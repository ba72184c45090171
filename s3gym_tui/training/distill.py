"""Two-phase consolidation of single-game experts into one multi-game student (after arXiv 2606.30044:
off-policy distillation alone degrades in multi-task settings, forward KL being mode-covering;
on-policy distillation is mode-seeking but needs a good start; so off-policy first, then on-policy).

A study, step by step (each step is stored, and `resume_study` continues from the first unfinished):
1. expert rollouts: each expert plays exploration episodes of its own game (explore mode, its source
   run's exploration seeds) through the ordinary engine: an ordinary, resumable run;
2. datasets: the experts' own steps (every reply, or self-score > threshold), measured in tokens;
3. phase 1 (off-policy): SFT of a LoRA student on all experts' trajectories;
4. phase 2 (on-policy): from the phase-1 student, reverse-KL distillation (onpolicy.py) on the same
   games' prompts, each prompt taught by its own game's expert;
5. ablations (optional), same experts, seeds and total update budget: off-policy only, on-policy only
   from the base, mixed multi-task SFT on the experts' source runs' self-judged data;
6. evaluation: every row (each expert, each student) on every game, strict mode, the game's expert's
   evaluation seeds; the base row is x = 0 of each expert's own evaluation run (matrix.py).
"""

from __future__ import annotations

import contextlib
import gc
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Optional, Sequence

from s3gym_tui.engine.lease import driving_training
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Study, Training, TrainingSource
from s3gym_tui.training import require_extra
from s3gym_tui.training.config import RECIPE_VERSION, DistillConfig, SftConfig
from s3gym_tui.training.dataset import build_dataset, training_examples
from s3gym_tui.training.experts import expert_adapter, resolve_experts
from s3gym_tui.training.pipeline import Hooks, TrainingError, mark_stopped, record_local, recording
from s3gym_tui.training.ranks import together
from s3gym_tui.training.runs import new_training_id, training_root
from s3gym_tui.training.study_eval import evaluate_cells

STUDENT_ROLES: tuple[str, ...] = ("phase1", "phase2", "off-only", "on-only", "mixed-sft")
ROLE_METHOD = {"phase1": "distill-off", "phase2": "distill-on", "off-only": "distill-off",
               "on-only": "distill-on", "mixed-sft": "sft"}


@dataclass
class DistillHooks(Hooks):
    stage: Callable[[str, str], None] = lambda stage, info: None  # a step of the study started


# ----- the study -----------------------------------------------------------------------------------
async def distill(store, specs: Sequence[str], options: DistillConfig = DistillConfig(),
                  hooks: Optional[DistillHooks] = None, out_dir: Optional[Path] = None) -> Study:
    """Create a study for the experts and run it to the end (see the module docstring)."""
    experts = resolve_experts(store, specs)
    require_extra()
    base = store.trainings.get_training(experts[0].training_id).base
    study = store.trainings.add_study(Study(id=new_training_id("study"), games=tuple(e.game for e in experts),
                                            experts=tuple(experts),
                                            settings={**options.dump(), "base": base,
                                            "out_dir": str(out_dir or training_root())}))
    return await run_study(store, study.id, hooks)


# a study stored before recipes: its DistillOptions fields, by the recipe's names
_LEGACY = {"phase2_updates": "updates", "phase2_batch": "batch", "phase2_learning_rate": "learning_rate"}


def study_options(study: Study) -> DistillConfig:
    """The study's recipe: the stored dump, or the options an older s3gym stored (phase1 as a dict)."""
    settings = study.settings
    if settings.get("version") == RECIPE_VERSION and isinstance(settings.get("recipe"), dict):
        return DistillConfig(**settings["recipe"])
    data = dict(settings.get("options") or {})
    phase1 = dict(data.pop("phase1", None) or {})
    values = {_LEGACY.get(k, k): v for k, v in data.items() if _LEGACY.get(k, k) in DistillConfig.model_fields}
    for key, name in (("epochs", "epochs"), ("max_steps", "phase1_steps"), ("learning_rate", "phase1_learning_rate"),
                      ("batch_size", "batch_size"), ("grad_accum", "grad_accum"), ("seed", "seed"),
                      ("lora_r", "lora_r"), ("lora_alpha", "lora_alpha"), ("lora_dropout", "lora_dropout"),
                      ("gradient_checkpointing", "gradient_checkpointing")):
        if key in phase1:
            values[name] = phase1[key]
    return DistillConfig.model_construct(**{**DistillConfig().model_dump(), **values})


async def resume_study(store, study_id: str, hooks: Optional[DistillHooks] = None) -> Study:
    require_extra()
    return await run_study(store, study_id, hooks)


class _Study:
    """One run through the steps of a study; every step skips what is already stored."""

    def __init__(self, store, study: Study, hooks: DistillHooks) -> None:
        self.store, self.study, self.hooks = store, study, hooks
        # the study's trainings stay driven by this process until the study ends (a finished phase 1
        # waits for its evaluation while phase 2 and the ablations train: it is not interrupted)
        self.leases = contextlib.ExitStack()
        self.held: set[str] = set()
        self.options = study_options(study)
        self.base = Path(study.settings["base"])
        self.root = Path(study.settings["out_dir"])

    def save(self, **changes: Any) -> None:
        self.study = self.store.trainings.set_study_settings(self.study.id, {**self.study.settings, **changes})

    # ----- 1. rollouts ------------------------------------------------------------------------
    async def rollouts(self) -> dict[str, str]:
        from s3gym_tui.engine.runner import ProtocolRunner

        runs = dict(self.study.settings.get("rollout_runs") or {})
        for expert in self.study.experts:
            run_id = runs.get(expert.game)
            if run_id is None:
                source = self.store.runs.get_run(self.store.trainings.get_training(expert.training_id).source_run)
                cfg = source.config
                config = RunConfig(model=expert.model, game=expert.game, pathway="none",
                                   explore_episodes=self.options.rollout_episodes,
                                   eval_every=max(1, self.options.rollout_episodes),
                                   eval_episodes=0, explore_seed_base=cfg.explore_seed_base,
                                   eval_seed_base=cfg.eval_seed_base, history_budget=0, max_tokens=cfg.max_tokens,
                                   temperature=cfg.temperature, decoding_seed=cfg.decoding_seed,
                                   step_cap=self.options.rollout_step_cap or cfg.step_cap,
                                   timeout_s=max(cfg.timeout_s, 600.0), max_retries=cfg.max_retries)
                run_id = self.store.runs.create_run(config, note=f"expert rollouts for study {self.study.id}").id
                runs[expert.game] = run_id
                self.save(rollout_runs=runs)
            run = self.store.runs.get_run(run_id)
            if run.status != "finished":
                self.hooks.stage("rollouts", f"{expert.game}: {expert.model} plays {run.config.explore_episodes} "
                                             f"exploration episodes")
                self.hooks.run_created(run)
                await ProtocolRunner(self.store, run, self.hooks.eval_event).run_protocol()
        return runs

    # ----- 2. datasets ------------------------------------------------------------------------
    def _measure(self):
        from s3gym_tui.training.lengths import TokenCounter, context_window, load_tokenizer

        return TokenCounter(load_tokenizer(str(self.base))), context_window(self.base)

    async def datasets(self, key: str, runs: dict[str, str], threshold: Optional[float]) -> dict[str, str]:
        found = dict(self.study.settings.get(key) or {})
        measure, window = None, None
        for game, run_id in runs.items():
            if game in found:
                continue
            if measure is None:
                measure, window = self._measure()
            self.hooks.stage("datasets", f"{game}: steps of run {run_id}")
            build = await build_dataset(self.store, run_id, threshold=threshold, measure=measure, max_length=window,
                                        progress=self.hooks.dataset_progress)
            found[game] = build.dataset.id
            self.save(**{key: found})
        return found

    def _examples(self, datasets: dict[str, str]) -> list[dict]:
        examples = []
        for dataset_id in datasets.values():
            examples += training_examples(self.store, dataset_id)
        if not examples:
            raise TrainingError(f"study {self.study.id}: the experts' datasets have no examples")
        return examples

    def _prompts(self, datasets: dict[str, str]) -> tuple[list[dict], list[TrainingSource]]:
        rows, per_episode = [], {}
        for game, dataset_id in datasets.items():
            for row in self.store.datasets.dataset_rows(dataset_id):
                if row.kind == "dropped":
                    continue
                rows.append({"prompt": [dict(m) for m in row.messages[:-1]], "game": game})
                per_episode[(game, row.episode_id)] = per_episode.get((game, row.episode_id), 0) + 1
        sources = [TrainingSource(kind="prompt", ref=episode, game=game, mode="explore", n=n)
                   for (game, episode), n in per_episode.items()]
        return rows, sources

    # ----- 3-5. trainings ---------------------------------------------------------------------
    def _training(self, role: str, **fields: Any) -> Training:
        existing = self.store.trainings.list(study_id=self.study.id, role=role)
        if existing:
            return self._drive(existing[0])
        training_id = new_training_id(f"{self.study.id}-{role}")
        return self._drive(self.store.trainings.add_training(Training(
            id=training_id, method=ROLE_METHOD[role], role=role, games=self.study.games, study_id=self.study.id,
            base=str(self.base), directory=str(self.root / training_id), status="created", **fields)))

    def _drive(self, training: Training) -> Training:
        if training.id not in self.held:
            self.leases.enter_context(driving_training(self.store, training.id, "s3gym distill"))
            self.held.add(training.id)
        return training

    def _trained(self, training: Training) -> bool:
        return any(c.adapter for c in self.store.trainings.training_checkpoints(training.id))

    def _run_sft(self, training: Training, examples: list[dict], config: SftConfig) -> Training:
        from s3gym_tui.training.backend import train_lora

        resume = training.status in ("interrupted", "failed", "training")
        training = self.store.trainings.update_training(training.id, status="training", error=None,
                                                        examples=len(examples), settings=config.dump())
        self.hooks.training_created(training)
        try:
            result = together(train_lora, examples, self.base, Path(training.directory) / "adapters", config,
                              progress=recording(self.store.trainings, training.id, self.hooks.train_event),
                              resume=resume)
        except BaseException as exc:
            mark_stopped(self.store.trainings, training.id, f"{training.role} training", exc)
            raise
        gc.collect()
        return record_local(self.store.trainings, training, result)

    def _run_onpolicy(self, training: Training, rows: list[dict], updates: int,
                      init: Optional[Path]) -> Training:
        from s3gym_tui.training.onpolicy import train_onpolicy

        o = self.options
        resume = training.status in ("interrupted", "failed", "training")
        settings = {"updates": updates, "batch": o.batch, "learning_rate": o.learning_rate,
                    "beta": o.beta, "max_completion_length": o.max_completion_length, "temperature": o.temperature,
                    "init_adapter": str(init) if init else None,
                    "teachers": {e.game: e.model for e in self.study.experts}}
        training = self.store.trainings.update_training(training.id, status="training", error=None, examples=len(rows),
                                                        settings=settings)
        self.hooks.training_created(training)
        experts = {e.game: expert_adapter(self.store, e) for e in self.study.experts}
        try:
            result, routed = together(
                train_onpolicy, rows, self.base, experts, Path(training.directory) / "adapters", updates=updates,
                batch=o.batch, learning_rate=o.learning_rate,
                max_completion_length=o.max_completion_length, temperature=o.temperature, beta=o.beta,
                save_every=o.save_every, lora=o, init_adapter=init,
                progress=recording(self.store.trainings, training.id, self.hooks.train_event),
                resume=resume, phase=training.method)
        except BaseException as exc:
            mark_stopped(self.store.trainings, training.id, f"{training.role} training", exc)
            raise
        gc.collect()
        training = self.store.trainings.update_training(training.id, metrics={**training.metrics, "routed": routed})
        return record_local(self.store.trainings, training, result)

    def _sources(self, training: Training, sources: list[TrainingSource]) -> None:
        if not self.store.trainings.training_sources(training.id):
            self.store.trainings.add_training_sources(training.id, sources)

    def _dataset_sources(self, datasets: dict[str, str]) -> list[TrainingSource]:
        return [TrainingSource(kind="dataset", ref=d, game=g) for g, d in datasets.items()]

    def _teacher_sources(self) -> list[TrainingSource]:
        return [TrainingSource(kind="teacher", ref=e.model, game=e.game) for e in self.study.experts]

    def phase1(self, datasets: dict[str, str]) -> Training:
        training = self._training("phase1")
        self._sources(training, self._dataset_sources(datasets) + self._teacher_sources())
        if not self._trained(training):
            self.hooks.stage("phase 1", "off-policy SFT on the experts' trajectories")
            training = self._run_sft(training, self._examples(datasets), self.options.phase1())
        return self.store.trainings.get_training(training.id)

    def last_adapter(self, training: Training) -> Path:
        cps = [c for c in self.store.trainings.training_checkpoints(training.id) if c.adapter]
        return Path(max(cps, key=lambda c: c.x).adapter)

    def phase2(self, datasets: dict[str, str], phase1: Training) -> Training:
        from s3gym_tui.training.experts import require_signal

        for expert in self.study.experts:  # a study made before the check (resumed): refused here
            cp = next((c for c in self.store.trainings.training_checkpoints(expert.training_id) if c.x == expert.x),
                      None)
            require_signal(self.store, expert.training_id, cp.step if cp else None)
        rows, prompt_sources = self._prompts(datasets)
        training = self._training("phase2", parent_id=phase1.id)
        self._sources(training, prompt_sources + self._teacher_sources())
        if not self._trained(training):
            self.hooks.stage("phase 2", "on-policy reverse-KL distillation, each prompt to its game's expert")
            training = self._run_onpolicy(training, rows, self.options.updates, self.last_adapter(phase1))
        return self.store.trainings.get_training(training.id)

    async def ablations(self, datasets: dict[str, str], phase1: Training) -> list[Training]:
        budget = phase1.steps + self.options.updates  # the two-phase student's optimizer steps
        out = []
        off = self._training("off-only")
        self._sources(off, self._dataset_sources(datasets) + self._teacher_sources())
        if not self._trained(off):
            self.hooks.stage("ablation", f"off-policy only: SFT for {budget} steps")
            off = self._run_sft(off, self._examples(datasets), self.options.phase1(max_steps=budget))
        out.append(off)
        rows, prompt_sources = self._prompts(datasets)
        on = self._training("on-only")
        self._sources(on, prompt_sources + self._teacher_sources())
        if not self._trained(on):
            self.hooks.stage("ablation", f"on-policy only, from the base: {budget} updates")
            on = self._run_onpolicy(on, rows, budget, None)
        out.append(on)
        mixed_sets = await self.mixed_datasets()
        mixed = self._training("mixed-sft")
        self._sources(mixed, self._dataset_sources(mixed_sets))
        if not self._trained(mixed):
            self.hooks.stage("ablation", f"mixed multi-task SFT on the source runs' self-judged data: {budget} steps")
            mixed = self._run_sft(mixed, self._examples(mixed_sets), self.options.phase1(max_steps=budget))
        out.append(mixed)
        return [self.store.trainings.get_training(t.id) for t in out]

    async def mixed_datasets(self) -> dict[str, str]:
        """Each expert's own SFT dataset, or (GRPO experts) one built from its source run (self-score > 0)."""
        found = dict(self.study.settings.get("mixed_datasets") or {})
        pending = {}
        for expert in self.study.experts:
            training = self.store.trainings.get_training(expert.training_id)
            if expert.game in found:
                continue
            if training.dataset_id:
                found[expert.game] = training.dataset_id
            else:
                pending[expert.game] = training.source_run
        self.save(mixed_datasets=found)
        if pending:
            found.update(await self.datasets("mixed_datasets", pending, 0.0))
        return found


async def run_study(store, study_id: str, hooks: Optional[DistillHooks] = None) -> Study:
    hooks = hooks or DistillHooks()
    study = store.trainings.set_study_status(study_id, "training")
    s = _Study(store, study, hooks)
    try:
        with s.leases:
            await _steps(store, s, hooks)
    except BaseException as exc:
        interrupted = isinstance(exc, KeyboardInterrupt) or type(exc).__name__ == "CancelledError"
        store.trainings.set_study_status(study_id, "interrupted" if interrupted else "failed")
        raise
    return store.trainings.set_study_status(study_id, "finished")


async def _steps(store, s: "_Study", hooks: DistillHooks) -> None:
    """The steps of the study in order, each skipping what is already stored."""
    from s3gym_tui.training import serve

    runs = await s.rollouts()
    datasets = await s.datasets("datasets", runs, s.options.threshold)
    serve.HANDLER.release()  # the served experts leave room for the trainings
    phase1 = s.phase1(datasets)
    students = [phase1, s.phase2(datasets, phase1)]
    if s.options.ablations:
        students += await s.ablations(datasets, phase1)
    serve.HANDLER.release()
    await evaluate_cells(store, s.study, s.options, students, hooks, s.save)
