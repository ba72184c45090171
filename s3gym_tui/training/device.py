"""Where training and serving run: a CUDA GPU, an Apple GPU (MPS) or the CPU, picked the same way
everywhere (nothing CUDA-only), with the dtype that suits it; and the process's peak memory."""

from __future__ import annotations

import os
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


def cpu_threads() -> int:
    """Threads for CPU training: the cores this process may use (at most 8), shared with the other
    processes a launcher (torchrun, accelerate launch) started on this machine (LOCAL_WORLD_SIZE)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        cores = os.cpu_count() or 1
    local = os.environ.get("LOCAL_WORLD_SIZE", "").strip()
    share = int(local) if local.isdigit() and int(local) > 0 else 1
    return max(1, min(cores // share, 8))


def peak_rss_mb() -> float:
    """The process's peak resident memory so far, in MB (a high-water mark: it never goes down)."""
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
