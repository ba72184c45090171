"""A sweep's runs driven in several worker processes writing the one store: the parent's SweepRunner
keeps the queue, the limits' bookkeeping and the progress; each worker drives the runs it is handed
(ProtocolRunner, as in one process) and sends back their events, the cost of each call and how
each run ended.

A worker is a fresh interpreter running engine.sweep_worker.serve(FD) (not a fork: the
parent has threads and SQLite connections; not multiprocessing's spawn, which re-runs the parent's
main script), talking over a socket pair with multiprocessing's framing. Its settings (and the
models' runtime arguments, secrets included) are the first message, never on a command line.
Messages, parent to worker: ("drive", run), ("stop", reason),
("others", dollars the other workers spent), ("close",); worker to parent: ("event", run_id,
event), ("spent", cost), ("ended", run_id, run, error, kind) with kind None, "busy", "store" or
"error" (an engine fault: the sweep fails, as in one process), and
("failed", message) when the worker cannot start. The budget is the sweep's: each worker adds the
others' spend (relayed by the parent, at most STALE_S late) to its own before every call.
"""

from __future__ import annotations

import asyncio
import math
import os
import socket
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from multiprocessing.connection import Connection
from typing import Any, Callable, Optional

from s3gym_tui.engine import events as ev
from s3gym_tui.models import Run
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.leases import RunBusy

WORKER_MAIN = "import sys; from s3gym_tui.engine.sweep_worker import serve; serve(int(sys.argv[1]))"
STALE_S = 0.02  # the others' spend reaches a worker at most this late (budget set)
STOP_GRACE_S = 10.0  # after a stop, a worker still alive then is terminated (SIGTERM: it stops too)
KILL_AFTER_S = 5.0  # and killed this long after that (its runs stay resumable: their leases die with it)


class WorkerLost(Exception):
    """The worker driving a run ended without saying how the run ended (killed, crashed)."""


def split(total: int, parts: int) -> list[int]:
    """`total` calls in flight shared by `parts` workers: as even as possible, the sum is `total`."""
    return [total // parts + (i < total % parts) for i in range(parts)]


def forwarded(event: ev.Event) -> ev.Event:
    """An event as the parent receives it: a step without its prompt (stored already; the parent's
    progress reads the reply), so the pipe and the parent do not carry whole histories."""
    if isinstance(event, ev.StepDone):
        return ev.StepDone(event.episode, event.step.model_copy(update={"prompt": ""}))
    return event


def _finite_cost(cost: Optional[float]) -> float:
    return cost if cost is not None and math.isfinite(cost) and cost >= 0 else 0.0


# ----- the parent's side ----------------------------------------------------------------------
@dataclass
class _Worker:
    index: int
    process: Any
    conn: Any
    share: int  # calls in flight per model
    active: dict[str, tuple[asyncio.Future, Callable[[ev.Event], None], str]] = field(default_factory=dict)
    spent_usd: float = 0.0
    alive: bool = True
    driven: int = 0  # runs handed to it

    def load(self, model: str) -> tuple[float, int, int]:
        """The dispatch order: fewest runs of `model` per share, then fewest runs, then the first."""
        same = sum(1 for _, _, m in self.active.values() if m == model)
        return same / self.share, len(self.active), self.index

    def describe(self) -> str:
        code = self.process.poll()
        how = "still running" if code is None else (f"killed by signal {-code}" if code < 0 else f"exit code {code}")
        return f"sweep worker {self.index + 1} (PID {self.process.pid}, {how})"


class WorkerPool:
    """Worker processes for one SweepRunner (parent side): hands runs out, relays events and spend."""

    def __init__(self, runner, count: int) -> None:
        self.runner = runner
        self.count = count
        self.workers: list[_Worker] = []
        self.stopping: Optional[str] = None
        self._flush: Optional[asyncio.TimerHandle] = None
        self._escalation: Optional[asyncio.Task] = None

    def start(self) -> None:
        limits = self.runner.limits
        loop = asyncio.get_running_loop()
        for index, share in enumerate(split(limits.concurrency, self.count)):
            mine, theirs = socket.socketpair()
            process = subprocess.Popen(
                [sys.executable, "-c", WORKER_MAIN, str(theirs.fileno())],
                pass_fds=(theirs.fileno(),), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONPATH": _import_path()})
            theirs.close()
            conn = Connection(mine.detach())
            worker = _Worker(index, process, conn, share)
            self.workers.append(worker)
            self._send(worker, (str(self.runner.store.path), self.runner.sweep.id, share, limits.budget_usd,
                                limits.spent_usd, self.runner.backoff_base_s, dict(self.runner.model_args)))
            loop.add_reader(conn.fileno(), self._readable, worker)

    def live(self) -> list[_Worker]:
        return [w for w in self.workers if w.alive]

    async def drive(self, run: Run, sink: Callable[[ev.Event], None]) -> tuple[Run, Optional[str]]:
        """Drive `run` in the least loaded worker; (the run as it ended, its error). Raises RunBusy or
        StoreError as the run's own driving would, WorkerLost when the worker died under it."""
        live = self.live()
        if not live:
            raise WorkerLost("no sweep worker is left (see the error above); the run is resumable")
        worker = min(live, key=lambda w: w.load(run.config.model))
        future = asyncio.get_running_loop().create_future()
        worker.active[run.id] = (future, sink, run.config.model)
        worker.driven += 1
        self._send(worker, ("drive", run))
        return await future

    def stop(self, reason: str) -> None:
        """Every worker stops its runs cleanly (stored, resumable); one that does not end within
        STOP_GRACE_S is terminated, then killed."""
        if self.stopping is not None:
            return
        self.stopping = reason
        for worker in self.live():
            self._send(worker, ("stop", reason))
        self._escalation = asyncio.get_running_loop().create_task(self._escalate())

    async def _escalate(self) -> None:
        await asyncio.sleep(STOP_GRACE_S)
        for worker in self.live():
            worker.process.terminate()
        await asyncio.sleep(KILL_AFTER_S)
        for worker in self.live():
            worker.process.kill()

    async def close(self) -> None:
        """Let every worker end (their runs are over by now) and wait for their processes."""
        if self._flush is not None:
            self._flush.cancel()
        for worker in self.live():
            self._send(worker, ("close",))
        loop = asyncio.get_running_loop()
        for worker in self.workers:
            try:
                await loop.run_in_executor(None, worker.process.wait, STOP_GRACE_S)
            except subprocess.TimeoutExpired:
                worker.process.kill()
                await loop.run_in_executor(None, worker.process.wait)
            self._lost(worker)
        if self._escalation is not None:
            self._escalation.cancel()

    def _send(self, worker: _Worker, message: tuple) -> None:
        try:
            worker.conn.send(message)
        except (OSError, ValueError):  # the worker is gone: its reader sees the end and says so
            pass

    def _readable(self, worker: _Worker) -> None:
        try:
            while worker.alive and worker.conn.poll():
                self._receive(worker, worker.conn.recv())
        except (EOFError, OSError):
            self._lost(worker)

    def _receive(self, worker: _Worker, message: tuple) -> None:
        kind = message[0]
        if kind == "event":
            entry = worker.active.get(message[1])
            if entry is not None:
                entry[1](message[2])
        elif kind == "spent":
            self.runner.limits.record(message[1])
            worker.spent_usd += _finite_cost(message[1])
            if self.runner.limits.budget_usd is not None and self._flush is None:
                self._flush = asyncio.get_running_loop().call_later(STALE_S, self._share_spend)
        elif kind == "ended":
            _, run_id, run, error, how = message
            entry = worker.active.pop(run_id, None)
            if entry is not None and not entry[0].done():
                if how == "busy":
                    entry[0].set_exception(RunBusy(error))
                elif how == "store":
                    entry[0].set_exception(StoreError(error))
                elif how == "error":
                    entry[0].set_exception(RuntimeError(f"in {worker.describe()}: {error}"))
                else:
                    entry[0].set_result((run, error))
        elif kind == "failed":
            self.runner.worker_failed(f"sweep worker {worker.index + 1} failed: {message[1]}")

    def _share_spend(self) -> None:
        self._flush = None
        total = sum(w.spent_usd for w in self.workers)
        for worker in self.live():
            self._send(worker, ("others", total - worker.spent_usd))

    def _lost(self, worker: _Worker) -> None:
        if not worker.alive:
            return
        worker.alive = False
        asyncio.get_running_loop().remove_reader(worker.conn.fileno())
        worker.conn.close()
        try:
            worker.process.wait(timeout=1)  # its exit code, for the line below
        except subprocess.TimeoutExpired:
            pass
        if worker.active:
            lost = WorkerLost(f"{worker.describe()} ended while driving it; the run is resumable")
            self.runner.worker_failed(str(lost).replace(" it;", f" {len(worker.active)} run(s);"))
            for future, _, _ in worker.active.values():
                if not future.done():
                    future.set_exception(lost)
            worker.active.clear()


# ----- the worker's side ----------------------------------------------------------------------
def _import_path() -> str:
    """PYTHONPATH for a worker: this s3gym_tui's folder first, so it runs the parent's code."""
    here = str(Path(__file__).resolve().parents[2])
    return os.pathsep.join([here, *([os.environ["PYTHONPATH"]] if os.environ.get("PYTHONPATH") else [])])
