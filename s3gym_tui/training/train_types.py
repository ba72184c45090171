"""What a local training reports while it runs (TrainEvent) and what it gives back (TrainResult):
torch-free, imported by the backend and by the trainers' shared callback (hf.py) alike (what it is asked
is its recipe: config.py)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from s3gym_tui.store import LossPoint


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
