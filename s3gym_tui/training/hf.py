"""What the three local trainers (SFT, GRPO, on-policy distillation) share: the LoRA setup, the
progress callback that records losses and saves one adapter per checkpoint, resuming from the last
trainer checkpoint, and throughput figures. Imported only when training (needs the train extra)."""

from __future__ import annotations

import contextlib
import importlib
import time
from pathlib import Path
from typing import Any, Callable, Iterator, Optional
from unittest import mock

from transformers import TrainerCallback
from transformers.trainer_callback import PrinterCallback, ProgressCallback
from transformers.trainer_utils import get_last_checkpoint

from s3gym_tui.store import LossPoint
from s3gym_tui.training import stop
from s3gym_tui.training.train_types import TrainEvent, TrainResult
from s3gym_tui.training.device import phase_peak_gpu_mb, phase_peak_rss
from s3gym_tui.training.learning_signal import NO_SIGNAL_KEY, WATCHED_PHASES, no_signal_reason, signal_metrics
from s3gym_tui.training.provenance import portable_adapter

TRAINER_DIR = "trainer"  # HF checkpoints (adapter + optimizer + RNG): what a resume starts from


LOGS_DIR = "logs"  # beside the training's adapters: where --report-to writes (tensorboard, trackio, wandb)


def logs_dir(adapters: Path, phase: str) -> Path:
    """<training>/logs/<phase>, for a trainer whose adapters go to <training>/adapters."""
    return Path(adapters).parent / LOGS_DIR / phase


def lora_config(cfg: Any) -> Any:
    """The recipe's LoRA adapter (peft), None for a full fine-tune (`full_finetune`)."""
    if getattr(cfg, "full_finetune", False):
        return None
    from peft import LoraConfig

    return LoraConfig(r=cfg.lora_r, lora_alpha=cfg.lora_alpha, lora_dropout=cfg.lora_dropout,
                      target_modules=cfg.target_modules, task_type="CAUSAL_LM")


def adapted(model: Any, cfg: Any) -> Any:
    """`model` with the recipe's LoRA adapter attached (peft), or as it is for a full fine-tune.

    The adapter's random initialisation is drawn after seeding with the recipe's seed (as TRL's SFTTrainer
    does before it attaches one): the trainer seeds only once the adapter exists, so it was drawn from
    whatever the process had used the generator for before, and two trainings of one recipe in one
    process (a twin and a resumed run, a study's experts) started from different weights."""
    peft = lora_config(cfg)
    if peft is None:
        return model
    from peft import get_peft_model
    from transformers import set_seed

    set_seed(cfg.seed)
    return get_peft_model(model, peft)


def trainer_args(cfg: Any, device: Any, output_dir: Path, logs: Path) -> dict[str, Any]:
    """The TrainingArguments every trainer shares, from the recipe (config.TrainerSettings): schedule,
    seed, precision (device.precision_flags), activation checkpointing and `report_to`, whose logs go
    to `logs` (logs_dir(): beside the training's adapters; the integrations read their directories from
    the environment in transformers 5)."""
    import os

    from s3gym_tui.training.device import precision_flags

    bf16, fp16 = precision_flags(device, getattr(cfg, "precision", "auto"))
    report = getattr(cfg, "report_to", "none") or "none"
    if report != "none":
        Path(logs).mkdir(parents=True, exist_ok=True)
        for name in ("TENSORBOARD_LOGGING_DIR", "TRACKIO_DIR", "WANDB_DIR"):
            os.environ[name] = str(logs)
    return {"output_dir": str(output_dir), "learning_rate": cfg.learning_rate,
            "lr_scheduler_type": getattr(cfg, "lr_scheduler_type", "linear"),
            "warmup_steps": float(getattr(cfg, "warmup_ratio", 0.0) or 0), "seed": cfg.seed, "bf16": bf16,
            "fp16": fp16, "use_cpu": device.use_cpu, "activation_checkpointing": cfg.gradient_checkpointing,
            "report_to": report, "logging_steps": 1, "disable_tqdm": True, "dataloader_num_workers": 0,
            "ddp_find_unused_parameters": False}


# The TRL modules whose fused LM-head losses (SFT and GRPO; on-policy distillation) choose, per device,
# between projecting only the positions that are scored and projecting every position
_FUSED_HEAD_MODULES = ("trl.trainer.utils", "trl.trainer.distillation_trainer")
EAGER_DEVICES = ("cpu", "mps")


@contextlib.contextmanager
def compact_lm_head() -> Iterator[None]:
    """Make TRL's fused LM head project only the positions that have a label on the CPU and MPS too.

    TRL 1.16 does so on Triton devices (CUDA, XPU) only; elsewhere it projects every position, the
    prompt included, to keep tile shapes fixed for compilers (Neuron). Nothing is compiled here, and
    the prompt is most of every example: on the CPU the fp32 tiles [positions x 32,768 vocabulary columns]
    of the backward (several alive at once) were the peak of SFT's RSS. The loss and the gradients
    are the same (an unscored position contributes zero either way); only less is computed."""
    with contextlib.ExitStack() as stack:
        for name in _FUSED_HEAD_MODULES:
            module = importlib.import_module(name)
            original = getattr(module, "_use_triton", None)
            if original is None:  # a TRL without the switch: nothing to change
                continue

            def compact(device, _original=original):
                return device.type in EAGER_DEVICES or _original(device)

            stack.enter_context(mock.patch.object(module, "_use_triton", compact))
        yield


LOGGED = ("reward", "reward_std", "kl", "entropy", "mean_token_accuracy", "grad_norm", "verifier_reward",
          "parsed_replies", "parsed_free_replies", "frac_reward_zero_std", "source_reward_std",
          "source_zero_std_share")


class Reporter(TrainerCallback):
    """Records every logged loss (and a few metrics), saves the adapter at each epoch end or every
    `save_every` steps (checkpoint x = 1, 2, ...), and reports both to `progress`."""

    def __init__(self, result: TrainResult, progress: Callable[[TrainEvent], None], phase: str,
                 save_every: int = 0, first_x: int = 1, saves: bool = True) -> None:
        self.result, self.progress, self.phase = result, progress, phase
        self.saves = saves  # False: a preparatory phase (GRPO's format warm start) saves no checkpoint
        self.save_every = save_every
        self.next_x = first_x
        self.started = time.perf_counter()

    def on_log(self, args, state, control, logs=None, **kwargs):
        """TRL's logged figures of an update (the public callback), with its learning-signal verdict
        (learning_signal.py): an update without signal is stored as such and reported at once."""
        if logs and "loss" in logs:
            metrics = {k: float(logs[k]) for k in LOGGED if isinstance(logs.get(k), (int, float))}
            metrics.update(signal_metrics(self.phase, logs))
            reason = no_signal_reason(self.phase, metrics) if self.phase in WATCHED_PHASES else None
            if self.phase in WATCHED_PHASES:
                metrics[NO_SIGNAL_KEY] = 1.0 if reason else 0.0
            point = LossPoint(step=state.global_step, epoch=float(state.epoch or 0.0), loss=float(logs["loss"]),
                              phase=self.phase, metrics=metrics)
            self.result.losses.append(point)
            self.progress(TrainEvent("step", state.global_step, state.max_steps, point.epoch, point.loss,
                                     metrics=metrics, phase=self.phase, warning=reason))

    def _save(self, state, model) -> None:
        if not self.saves:
            return
        target = self.result.out_dir / f"checkpoint-{self.next_x}"
        if not state.is_world_process_zero:  # data parallel (ranks.py): the weights are equal, rank 0 writes
            self.next_x += 1
            return
        model.save_pretrained(target)
        portable_adapter(target, self.result.base_dir)  # its base named by hub id where there is one
        self.result.adapters[self.next_x] = target
        self.result.steps_at[self.next_x] = state.global_step
        self.progress(TrainEvent("checkpoint", state.global_step, state.max_steps, float(state.epoch or 0.0),
                                 adapter_dir=target, x=self.next_x, phase=self.phase))
        self.next_x += 1

    def on_train_begin(self, args, state, control, **kwargs):
        self.started = time.perf_counter()

    def on_step_end(self, args, state, control, model=None, **kwargs):
        if self.save_every and state.global_step % self.save_every == 0:
            self._save(state, model)

    def on_epoch_end(self, args, state, control, model=None, **kwargs):
        # a requested stop inside an epoch saves no adapter: the resumed training saves it when the epoch ends
        if not self.save_every and not (stopped_early(state) and not epoch_complete(state)):
            self._save(state, model)

    def on_train_end(self, args, state, control, model=None, **kwargs):
        # this part of the training (a stopped one, or the last): its time and where it got, so a resumed
        # training's figures cover every part (pipeline.recording stores the stopped ones)
        self.progress(TrainEvent("end", state.global_step, state.max_steps, float(state.epoch or 0.0),
                                 phase=self.phase, metrics={
                                     "seconds": time.perf_counter() - self.started,
                                     "tokens": float(state.num_input_tokens_seen or 0),
                                     "stopped": 1.0 if stopped_early(state) else 0.0}))
        # a run that stops between two saves (max_steps not a multiple) still ends on a checkpoint;
        # one stopped on request does not (its resumed twin saves where the uninterrupted one does)
        if stopped_early(state):
            return
        if self.save_every and (not self.result.steps_at or max(self.result.steps_at.values()) < state.global_step):
            self._save(state, model)


def stopped_early(state) -> bool:
    """A stop was requested before the trainer reached its last step."""
    return stop.requested() is not None and state.global_step < state.max_steps


def epoch_complete(state) -> bool:
    epoch = float(state.epoch or 0.0)
    return epoch > 0 and abs(epoch - round(epoch)) < 1e-6


class StopCallback(TrainerCallback):
    """Reads the stop flag (training/stop.py) after every micro-batch and optimizer step (and its log): on a
    requested stop the trainer ends the step in progress (a partly accumulated step is dropped: the
    resumed training does it again from its start), saves its state (adapter, optimizer, scheduler,
    RNG: what `s3gym resume` continues from) and stops. Public TrainerCallback hooks only."""

    def _stop(self, args, state, control, shared: bool = True) -> None:
        if control.should_training_stop:
            return
        if _ranks() > 1:  # data parallel (ranks.py): every rank stops at the same step, or none does
            if not shared or not _any_rank_stopping():
                return
        elif stop.requested() is None:
            return
        control.should_training_stop = True
        # nothing to save before the first step (a resume then starts afresh), nor twice the same step
        saved = Path(args.output_dir) / f"checkpoint-{state.global_step}"
        control.should_save = state.global_step > 0 and not saved.is_dir()

    def on_substep_end(self, args, state, control, **kwargs):
        self._stop(args, state, control)

    def on_step_end(self, args, state, control, **kwargs):
        self._stop(args, state, control)

    def on_log(self, args, state, control, **kwargs):  # asked for while the update was being logged
        self._stop(args, state, control, shared=False)  # (not a step every rank logs: one process only)

    def on_epoch_end(self, args, state, control, **kwargs):
        stopping = _any_rank_stopping() if _ranks() > 1 else stop.requested() is not None
        if stopping:  # no next epoch; the save asked for above happens now, once
            control.should_training_stop = True
            saved = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            control.should_save = state.global_step > 0 and not saved.is_dir()


def _ranks() -> int:
    import torch.distributed as dist

    return dist.get_world_size() if dist.is_available() and dist.is_initialized() else 1


def _any_rank_stopping() -> bool:
    """Whether a stop was requested in any rank (a collective: every rank calls it at the same hook)."""
    import torch
    import torch.distributed as dist

    device = torch.device("cuda", torch.cuda.current_device()) if dist.get_backend() == "nccl" else "cpu"
    flag = torch.tensor([0 if stop.requested() is None else 1], dtype=torch.int32, device=device)
    dist.all_reduce(flag, op=dist.ReduceOp.MAX)
    if flag.item() and stop.requested() is None:
        stop.request("stopped by another rank")
    return bool(flag.item())


# what each phase's updates are called in a stop's stored reason and the terminal's note
PHASE_NAMES = {"sft": "SFT", "grpo": "GRPO", "warm-start": "the format warm start", "distill-off": "phase 1",
               "distill-on": "phase 2"}


class PhaseCallback(TrainerCallback):
    """Tells training/stop.py what the trainer is doing (`<phase> update N`): a stop's reason names it."""

    def __init__(self, phase: str) -> None:
        self.name = PHASE_NAMES.get(phase, phase)

    def on_step_begin(self, args, state, control, **kwargs):
        stop.set_phase(f"{self.name} update {state.global_step + 1}")


def run_trainer(trainer: Any, checkpoint: Optional[str], phase: str = "") -> None:
    """`trainer.train()` (from `checkpoint` when resuming) that honours a requested stop: none starts
    once one is requested; one requested during a step (between two micro-batches, two rollouts, two
    drafts) ends it there, the state of the last finished update is saved (keep_finished) and
    TrainingStopped is raised."""
    stop.check()
    trainer.add_callback(StopCallback())
    trainer.add_callback(PhaseCallback(phase))
    try:
        trainer.train(resume_from_checkpoint=checkpoint)
    except stop.TrainingStopped:
        keep_finished(trainer)
        # stopped inside a step (a rollout, a draft): the trainer's own end hooks have not run
        trainer.callback_handler.on_train_end(trainer.args, trainer.state, trainer.control)
        raise
    if stopped_early(trainer.state):
        keep_finished(trainer)
        raise stop.TrainingStopped(stop.requested() or "stopped")


def keep_finished(trainer: Any) -> None:
    """After a stop inside a step: save the trainer's state as of its last finished update (the weights, the
    optimizer and the scheduler have not moved since; a partly accumulated gradient is dropped), unless that
    update is saved already, so `s3gym resume` goes on from it. Uses Trainer._save_checkpoint (what the
    Trainer itself calls to save; tests/training/test_stop.py fails if it stops doing so)."""
    state = trainer.state
    if state.global_step <= 0:
        return
    if (Path(trainer.args.output_dir) / f"checkpoint-{state.global_step}").is_dir():
        return
    trainer._save_checkpoint(trainer.model, trial=None)


def quiet_trainer(trainer: Any) -> Any:
    for noisy in (PrinterCallback, ProgressCallback):  # our progress callback reports instead
        trainer.remove_callback(noisy)
    return trainer


def resume_point(trainer_dir: Path) -> Optional[str]:
    """The last HF checkpoint under `trainer_dir` (a resume continues from it), if any."""
    if not Path(trainer_dir).is_dir():
        return None
    return get_last_checkpoint(str(trainer_dir))


def finish(result: TrainResult, trainer: Any, started: float) -> TrainResult:
    result.steps = trainer.state.global_step
    result.seconds = time.perf_counter() - started
    result.peak_rss_mb, result.peak_rss_scope = phase_peak_rss()
    result.peak_gpu_mb = phase_peak_gpu_mb()
    return result


def existing_adapters(out_dir: Path) -> dict[int, Path]:
    """Adapters already saved by an interrupted run of the same training (checkpoint-<x> dirs)."""
    found = {}
    for path in Path(out_dir).glob("checkpoint-*"):
        suffix = path.name.rsplit("-", 1)[-1]
        if suffix.isdigit() and (path / "adapter_config.json").is_file():
            found[int(suffix)] = path
    return dict(sorted(found.items()))
