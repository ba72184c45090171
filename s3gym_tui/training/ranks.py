"""Data-parallel training across processes (`torchrun --nproc_per_node N` or `accelerate launch`):
which process this is, and how the first one (rank 0) leads the others.

Every process runs the same `s3gym train` / `s3gym distill` / `s3gym resume` command. Rank 0 alone
runs the pipeline: it reads and writes the store (dataset, training row, loss points, checkpoints),
serves the checkpoints and evaluates them. Whenever it calls a trainer it first hands the same call
(the trainer's name and arguments, pickled) to every other rank (`together`); the others (`follow`)
receive it, run the same trainer with it (the transformers Trainer then forms the data-parallel
group: the global batch is split across ranks, gradients averaged) and wait for the next one, until
rank 0 says the command ended. They never open the store, so nothing is written twice, and a rank on
another machine needs no copy of the database.

The process group is formed here, before anything else (accelerate's PartialState: gloo on the CPU,
NCCL on CUDA GPUs; DeepSpeed and FSDP through accelerate's own config), with a long timeout: the
waiting ranks sit in a broadcast while rank 0 builds datasets and evaluates, which takes hours with
real budgets ($S3GYM_DIST_TIMEOUT_S, default a day). Without WORLD_SIZE > 1 in the environment
nothing of this happens: one process, as before.
"""

from __future__ import annotations

import contextlib
import importlib
import os
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional, TypeVar

TIMEOUT_ENV = "S3GYM_DIST_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 24 * 3600
_STOP = "stop"
T = TypeVar("T")


def _env_int(names: tuple[str, ...], default: int) -> int:
    for name in names:
        value = os.environ.get(name, "").strip()
        if value.isdigit():
            return int(value)
    return default


@dataclass(frozen=True)
class World:
    rank: int = 0
    size: int = 1
    local_rank: int = 0
    local_size: int = 1

    @property
    def main(self) -> bool:
        return self.rank == 0

    @property
    def distributed(self) -> bool:
        return self.size > 1


def world() -> World:
    """This process's place, read from the launcher's environment (torchrun, accelerate, mpirun):
    the same variables accelerate reads."""
    return World(rank=_env_int(("RANK", "PMI_RANK", "OMPI_COMM_WORLD_RANK", "MV2_COMM_WORLD_RANK"), 0),
                 size=_env_int(("WORLD_SIZE", "PMI_SIZE", "OMPI_COMM_WORLD_SIZE", "MV2_COMM_WORLD_SIZE"), 1),
                 local_rank=_env_int(("LOCAL_RANK", "MPI_LOCALRANKID", "OMPI_COMM_WORLD_LOCAL_RANK"), 0),
                 local_size=_env_int(("LOCAL_WORLD_SIZE", "MPI_LOCALNRANKS", "OMPI_COMM_WORLD_LOCAL_SIZE"), 1))


def timeout_s() -> int:
    return _env_int((TIMEOUT_ENV,), DEFAULT_TIMEOUT_S)


def start(use_cpu: Optional[bool] = None) -> World:
    """Form the process group once (a no-op in a single process). Every rank must call it first."""
    here = world()
    if not here.distributed:
        return here
    import torch.distributed as dist

    if not dist.is_initialized():
        from datetime import timedelta

        from accelerate import PartialState

        from s3gym_tui.training.device import pick_device

        # the Trainer's own TrainingArguments later reuse this group (accelerate does not form a second)
        PartialState(cpu=pick_device(use_cpu).use_cpu, timeout=timedelta(seconds=timeout_s()))
    return here


def _active() -> bool:
    if not world().distributed:
        return False
    import torch.distributed as dist

    return dist.is_initialized()


def _broadcast(job: Any) -> Any:
    import torch.distributed as dist

    box = [job]
    dist.broadcast_object_list(box, src=0)
    return box[0]


def together(fn: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """Rank 0 calls a trainer: with other ranks, each is handed the same call first (callbacks stay
    here: `progress`, `on_rollout` and other callables are left out of what is sent; the other ranks
    use the trainer's no-op defaults)."""
    if _active() and world().main:
        sent = {k: v for k, v in kwargs.items() if not callable(v)}
        _broadcast((fn.__module__, fn.__qualname__, args, sent))
    return fn(*args, **kwargs)


def follow() -> int:
    """A rank other than 0: run every trainer call rank 0 hands over, until it says the command ended.
    Returns the number of trainings run."""
    runs = 0
    while True:
        job = _broadcast(None)
        if job == _STOP:
            return runs
        module, name, args, kwargs = job
        target: Any = importlib.import_module(module)
        for part in name.split("."):
            target = getattr(target, part)
        from s3gym_tui.training.stopped import TrainingStopped

        try:
            target(*args, **kwargs)
        except TrainingStopped:  # a requested stop: every rank stopped at the same step (hf.StopCallback),
            pass  # and rank 0 says what comes next (the end of the command); a second Ctrl-C still interrupts
        runs += 1


def finish() -> None:
    """Rank 0, when its command ends (however): the other ranks stop following and exit."""
    if _active() and world().main:
        _broadcast(_STOP)
