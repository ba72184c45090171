"""Where training and serving run: a CUDA GPU, an Apple GPU (MPS) or the CPU, picked the same way
everywhere (nothing CUDA-only), with the dtype that suits it; and the process's peak memory."""

from __future__ import annotations

import resource
import sys
from dataclasses import dataclass
from typing import Any, Optional


@dataclass(frozen=True)
class Device:
    kind: str  # cuda | mps | cpu
    bf16: bool  # train / serve in bfloat16 (a CUDA GPU that supports it)

    @property
    def use_cpu(self) -> bool:
        return self.kind == "cpu"

    def dtype(self) -> Any:
        import torch

        return torch.bfloat16 if self.bf16 else torch.float32


def pick_device(use_cpu: Optional[bool] = None) -> Device:
    """CPU when asked (or when no GPU is present), else the GPU torch sees (CUDA first, then MPS)."""
    import torch

    if not use_cpu:
        if torch.cuda.is_available():
            return Device("cuda", bool(torch.cuda.is_bf16_supported()))
        mps = getattr(torch.backends, "mps", None)
        if mps is not None and mps.is_available():
            return Device("mps", False)
    return Device("cpu", False)


def precision_flags(device: Device, precision: str) -> tuple[bool, bool]:
    """(bf16, fp16) of a trainer for the recipe's `precision` on `device`: auto is the device's own choice
    (bf16 on a CUDA GPU that has it, else fp32); bf16 and fp16 are refused where the device cannot
    (ValueError, one line): fp16 needs a GPU, bf16 a CUDA GPU that supports it or the CPU (autocast)."""
    if precision == "auto":
        return device.bf16, False
    if precision == "fp32":
        return False, False
    if precision == "bf16":
        if device.kind == "mps":
            raise ValueError("--precision bf16: not on an Apple GPU (MPS); use auto or fp32")
        if device.kind == "cuda" and not device.bf16:
            raise ValueError("--precision bf16: this CUDA GPU has no bf16; use fp16 or fp32")
        return True, False
    if precision == "fp16":
        if device.kind == "cpu":
            raise ValueError("--precision fp16 needs a GPU: on the CPU use bf16 or fp32")
        return False, True
    raise ValueError(f"unknown precision {precision!r}: auto, fp32, bf16 or fp16")


# What a training's "peak_rss_mb" figure is (stored next to it as "peak_rss_scope")
PHASE_SCOPE = "phase"  # the high-water mark was reset when the phase started: this phase's own peak
PROCESS_SCOPE = "process so far"  # could not be reset: the process's peak since it started
SCOPE_LABELS = {PHASE_SCOPE: "peak RSS of this phase (resident memory held before it included)",
                PROCESS_SCOPE: "peak RSS of the process so far (earlier phases included)"}
_phase_reset = False


def start_phase_memory() -> bool:
    """Reset the process's resident-memory high-water mark (Linux: /proc/self/clear_refs "5") and the
    GPU's peak counter, so that what is read when the phase ends is this phase's own peak. False where
    the mark cannot be reset (then the figure is the process's peak so far, and says so)."""
    global _phase_reset
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        _phase_reset = True
    except OSError:
        _phase_reset = False
    try:
        import torch

        if torch.cuda.is_available():
            torch.cuda.reset_peak_memory_stats()
    except ImportError:  # pragma: no cover
        pass
    return _phase_reset


def rss_scope(metrics: dict) -> Optional[str]:
    """The scope of a stored training's peak RSS figure (trainings stored before the scope was kept
    measured the process's peak so far); None without a figure."""
    if not isinstance(metrics.get("peak_rss_mb"), (int, float)):
        return None
    return metrics.get("peak_rss_scope") or PROCESS_SCOPE


def phase_peak_rss() -> tuple[float, str]:
    """(peak resident MB, its scope): the phase's own peak when start_phase_memory() could reset the
    mark, else the process's peak so far."""
    return peak_rss_mb(), PHASE_SCOPE if _phase_reset else PROCESS_SCOPE


def phase_peak_gpu_mb() -> Optional[float]:
    """The GPU's peak since start_phase_memory() (its counter is always reset), None without one."""
    return peak_gpu_mb()


def peak_rss_mb() -> float:
    """The process's peak resident memory in MB since it started, or since the mark was last reset.

    Linux: VmHWM from /proc/self/status, the very mark clear_refs "5" resets (proc(5)); getrusage's
    ru_maxrss is also the larger of it and a process-wide figure the kernel keeps apart, which no reset
    lowers. Memory freed into malloc's free lists stays resident and counts in the next phase's mark."""
    try:
        with open("/proc/self/status", encoding="ascii") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024  # kB
    except (OSError, ValueError, IndexError):
        pass
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak / (1024 * 1024) if sys.platform == "darwin" else peak / 1024


def peak_gpu_mb() -> Optional[float]:
    """Peak memory allocated on the CUDA GPU by this process, in MB (None without one)."""
    try:
        import torch
    except ImportError:  # pragma: no cover
        return None
    if torch.cuda.is_available():
        return torch.cuda.max_memory_allocated() / (1024 * 1024)
    return None
