"""How many CPU threads this process's model work (torch, llama.cpp) may use."""

from __future__ import annotations

import os

MAX_THREADS = 8


def cpu_threads(cap: int = MAX_THREADS) -> int:
    """The cores this process may run on (at most `cap`), shared with the other processes a launcher
    (torchrun, accelerate launch) started on this machine (LOCAL_WORLD_SIZE), and never more than an
    explicit OMP_NUM_THREADS: threads beyond the free cores spin at their barriers and slow every
    step (llama.cpp with 2 threads on an overloaded 2-core machine took 3.5x the CPU time of 1)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # pragma: no cover - macOS
        cores = os.cpu_count() or 1
    local = os.environ.get("LOCAL_WORLD_SIZE", "").strip()
    share = int(local) if local.isdigit() and int(local) > 0 else 1
    limit = os.environ.get("OMP_NUM_THREADS", "").strip()
    if limit.isdigit() and int(limit) > 0:
        cap = min(cap, int(limit))
    return max(1, min(cores // share, cap))
