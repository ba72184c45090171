"""What a local training is asked (TrainConfig), what it reports while it runs (TrainEvent) and what it
gives back (TrainResult): torch-free, imported by the backend and by the trainers' shared callback
(hf.py) alike."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from s3gym_tui.store import LossPoint


@dataclass(frozen=True)
class TrainConfig:
    epochs: int = 2
    learning_rate: float = 5e-4  # TRL's 2e-5 default is far too low for LoRA
    lora_r: int = 8
    lora_alpha: int = 16
    lora_dropout: float = 0.0  # > 0 keeps a dropped-out copy of every adapted layer's input: more RAM
    target_modules: Any = "all-linear"  # a list or "all-linear" (a plain string module name is refused)
    # batch 1 (no padding) x 4 accumulated, with gradient checkpointing: peak RSS 2.2 GB in
    # benchmarks/train.py (16 Trust examples, ~590 tokens; 7.6 GB at batch 2 without checkpointing,
    # measured before the fused LM head was made compact on the CPU: see hf.compact_lm_head)
    batch_size: int = 1
    grad_accum: int = 4  # effective batch = batch_size * grad_accum
    max_steps: int = -1  # > 0 caps the optimizer steps (HF semantics: it overrides epochs)
    max_length: Optional[int] = None  # None: follow the data (nothing is truncated); see lengths.py
    gradient_checkpointing: bool = True  # ~35% slower on CPU; off only if RAM allows
    seed: int = 0
    use_cpu: Optional[bool] = None  # None: the GPU when one is present, else the CPU

    def as_dict(self) -> dict[str, Any]:
        return {k: getattr(self, k) for k in self.__dataclass_fields__}


@dataclass(frozen=True)
class TrainEvent:
    """Progress: kind 'load' (base ready), 'step' (an optimizer step, with its loss), 'checkpoint'
    (an adapter saved) or 'done'."""

    kind: str
    step: int = 0
    max_steps: int = 0
    epoch: float = 0.0
    loss: Optional[float] = None
    adapter_dir: Optional[Path] = None
    x: int = 0  # checkpoint number of a 'checkpoint' event
    metrics: dict[str, float] = field(default_factory=dict)
    phase: str = "sft"
    # a 'step' without learning signal: why (learning_signal.py); a 'load': a setting that will not work as meant
    warning: Optional[str] = None


@dataclass
class TrainResult:
    base_dir: Path
    out_dir: Path
    adapters: dict[int, Path] = field(default_factory=dict)  # checkpoint x -> adapter directory
    steps_at: dict[int, int] = field(default_factory=dict)  # checkpoint x -> optimizer steps behind it
    losses: list[LossPoint] = field(default_factory=list)
    examples: int = 0  # examples (or prompts) seen, repeats counted
    tokens: int = 0  # tokens trained on (prompt + completion), repeats counted
    steps: int = 0
    seconds: float = 0.0
    peak_rss_mb: float = 0.0
    peak_rss_scope: str = "process so far"  # device.PHASE_SCOPE when the phase's own peak was measured
    peak_gpu_mb: Optional[float] = None
    resumed_from: Optional[str] = None
    notes: dict[str, Any] = field(default_factory=dict)  # trainer-specific counts (e.g. rollout states)

    @property
    def examples_per_s(self) -> Optional[float]:
        return self.examples / self.seconds if self.seconds > 0 else None

    @property
    def tokens_per_s(self) -> Optional[float]:
        return self.tokens / self.seconds if self.seconds > 0 else None

    def figures(self) -> dict[str, Any]:
        return {"peak_rss_mb": round(self.peak_rss_mb, 1), "peak_rss_scope": self.peak_rss_scope,
                "peak_gpu_mb": self.peak_gpu_mb,
                "examples_per_s": self.examples_per_s, "tokens_per_s": self.tokens_per_s, "tokens": self.tokens,
                "seconds": round(self.seconds, 2), "resumed_from": self.resumed_from, **self.notes}
