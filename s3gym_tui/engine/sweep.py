"""Run (or resume) a stored sweep: its unfinished runs concurrently, a few per model at a time,
each driven by the ordinary ProtocolRunner, under shared call limits (engine.limits), in this
process or in several worker processes (engine.sweep_workers)."""

from __future__ import annotations

import asyncio
from collections import deque
from dataclasses import dataclass
from typing import Callable, Optional, Union

from s3gym_tui.engine import events as ev
from s3gym_tui.engine.limits import CallLimits, use_limits
from s3gym_tui.engine.pools import ConnectionPool, bounds
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.engine.sweep_workers import WorkerLost, WorkerPool
from s3gym_tui.models import Run, Sweep
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.leases import RunBusy


@dataclass(frozen=True)
class SweepRunStarted:
    run: Run


@dataclass(frozen=True)
class SweepRunEvent:
    """An engine event (engine.events) of one of the sweep's runs."""

    run_id: str
    event: ev.Event


@dataclass(frozen=True)
class SweepRunEnded:
    run: Run
    error: Optional[str] = None


@dataclass(frozen=True)
class SweepEnded:
    sweep: Sweep
    reason: str  # "finished", "budget", "model failed", "store failed", "worker failed", "runs busy", "interrupted"


SweepEvent = Union[SweepRunStarted, SweepRunEvent, SweepRunEnded, SweepEnded]


def _ignore(_: SweepEvent) -> None:
    """The default sink."""


class SweepRunner:
    """Drives every unfinished run of a sweep; stops cleanly on a spent budget or a failing model."""

    def __init__(self, store, sweep: Sweep, on_event: Callable[[SweepEvent], None] = _ignore,
                 backoff_base_s: float = 0.5, workers: int = 1) -> None:
        self.store = store
        self.sweep = sweep
        self.on_event = on_event
        self.backoff_base_s = backoff_base_s
        config = sweep.config
        usage = store.sweeps.sweep_usage(sweep.id)
        self.limits = CallLimits(concurrency=config.concurrency, budget_usd=config.budget_usd,
                                 spent_usd=float(usage["cost"]))
        self.failed_models: dict[str, str] = {}
        self.budget_hit = False
        self.busy: list[str] = []  # runs another process drives (left alone)
        self.stop_reason: Optional[str] = None  # set by stop(): Ctrl-C, SIGTERM, a person
        self.store_error: Optional[str] = None  # the store failed a write (disk full): every run stopped
        self.worker_error: Optional[str] = None  # a worker process died or could not start
        self.workers = workers  # processes driving the runs (1: this one; more: engine.sweep_workers)
        self.pool: Optional[WorkerPool] = None
        self._active: dict[str, ProtocolRunner] = {}
        # per model, provider arguments that were not stored (secrets): given again in this process
        self.model_args: dict[str, dict] = {}

    def stop(self, reason: str = "stopped") -> None:
        """Stop cleanly: every active run stops (resumable, `reason` stored), no new run starts."""
        if self.stop_reason is None:
            self.stop_reason = reason
        for runner in list(self._active.values()):
            runner.stop(reason)
        if self.pool is not None:
            self.pool.stop(reason)

    def pending(self) -> list[Run]:
        return [r for r in self.store.sweeps.sweep_runs(self.sweep.id) if r.status != "finished"]

    async def _drive(self, run: Run) -> None:
        self.on_event(SweepRunStarted(run))
        try:
            final, error = await self._execute(run)
        except RunBusy as exc:  # another process drives this run: leave it to that process
            self.busy.append(run.id)
            self.on_event(SweepRunEnded(run, str(exc)))
            return
        except StoreError as exc:  # the disk filled up, the store refused a write: the runs share the
            self._store_failed(f"store: {exc}")  # file, so every run stops (stored, resumable)
            self.on_event(SweepRunEnded(run, f"store: {exc}"))
            return
        except WorkerLost as exc:  # its worker process was killed: what it stored is whole, resumable
            self.on_event(SweepRunEnded(self.store.runs.get_run(run.id), str(exc)))
            return
        if final.status != "finished" and self.stop_reason is None and self.store_error is None:
            if self.limits.budget_usd is not None and self.limits.spent_usd >= self.limits.budget_usd:
                self.budget_hit = True
            else:
                self.failed_models.setdefault(run.config.model, error or f"run {run.id} {final.status}")
        self.on_event(SweepRunEnded(final, error))

    async def _execute(self, run: Run) -> tuple[Run, Optional[str]]:
        """Drive one run to its end, in this process or in a worker's; (the run as it ended, its
        error). Raises RunBusy when another process drives it, StoreError when the store failed."""
        if self.pool is not None:
            return await self.pool.drive(run, lambda event: self.on_event(SweepRunEvent(run.id, event)))
        error: dict[str, Optional[str]] = {"error": None}

        def forward(event: ev.Event) -> None:
            if isinstance(event, ev.RunFinished):
                error["error"] = event.error
            self.on_event(SweepRunEvent(run.id, event))

        if self.model_args.get(run.config.model):
            from s3gym_tui.engine.decoding import with_runtime_args

            run = run.model_copy(update={"config": with_runtime_args(run.config, self.model_args[run.config.model])})
        runner = ProtocolRunner(self.store, run, forward, self.backoff_base_s)
        self._active[run.id] = runner
        try:
            final = await runner.run_protocol(command=f"s3gym sweep {self.sweep.id}")
        finally:
            self._active.pop(run.id, None)
        return final, error["error"]

    def worker_failed(self, reason: str) -> None:
        """A worker process ended under its runs or could not start: no new run starts (the others
        end as they would), the sweep stops resumable with `reason`."""
        if self.worker_error is None:
            self.worker_error = reason

    def _store_failed(self, reason: str) -> None:
        if self.store_error is None:
            self.store_error = reason
        for runner in list(self._active.values()):
            runner.stop(reason)
        if self.pool is not None:
            self.pool.stop(reason)

    async def _worker(self, queue: deque) -> None:
        while (queue and not self.budget_hit and self.stop_reason is None and self.store_error is None
               and self.worker_error is None):
            run = queue[0]
            if run.config.model in self.failed_models:
                return
            queue.popleft()
            await self._drive(run)

    def worker_count(self, runs: int) -> int:
        """The processes to drive `runs` runs with: the ones asked for, but no more than the runs nor
        than the calls in flight per model (each worker needs at least one)."""
        return max(1, min(self.workers, runs, self.limits.concurrency))

    async def run(self) -> Sweep:
        """Run the sweep to its end (or a clean stop) and return it with its final status."""
        queues: dict[str, deque] = {}
        for run in self.pending():
            queues.setdefault(run.config.model, deque()).append(run)
        self.store.sweeps.set_sweep_status(self.sweep.id, "running", note="")
        per_model = self.sweep.config.runs_per_model
        self.limits.pool = ConnectionPool(bounds((r.config for q in queues.values() for r in q),
                                                 self.sweep.config.concurrency))
        try:
            with use_limits(self.limits):
                processes = self.worker_count(sum(len(q) for q in queues.values()))
                if processes > 1:
                    self.pool = WorkerPool(self, processes)
                    self.pool.start()
                try:
                    await asyncio.gather(*(self._worker(q) for q in queues.values()
                                           for _ in range(min(per_model, len(q)))))
                finally:
                    if self.pool is not None:
                        await self.pool.close()
        except asyncio.CancelledError:
            self.sweep = self.store.sweeps.set_sweep_status(self.sweep.id, "stopped", note="interrupted")
            self.on_event(SweepEnded(self.sweep, "interrupted"))
            raise
        except BaseException as exc:
            self.sweep = self.store.sweeps.set_sweep_status(self.sweep.id, "failed",
                                                            note=f"{type(exc).__name__}: {exc}"[:300])
            raise
        finally:
            await self.limits.pool.close()
        left = self.pending()
        if not left:
            status, reason, note = "finished", "finished", ""
        elif self.store_error is not None:
            status, reason, note = "stopped", "store failed", f"{self.store_error}"[:400] + f"; {len(left)} run(s) left"
        elif self.stop_reason is not None:
            status, reason, note = "stopped", "interrupted", f"{self.stop_reason}; {len(left)} run(s) left"
        elif self.worker_error is not None:
            status, reason = "stopped", "worker failed"
            note = f"{self.worker_error}"[:400] + f"; {len(left)} run(s) left"
        elif self.budget_hit:
            status, reason = "stopped", "budget"
            note = (f"budget of ${self.limits.budget_usd:.2f} spent (${self.limits.spent_usd:.4f}); "
                    f"{len(left)} run(s) left")
        elif self.failed_models:
            status, reason = "stopped", "model failed"
            note = "; ".join(f"{model}: {error}" for model, error in self.failed_models.items())[:500]
        else:
            status, reason = "stopped", "runs busy"
            note = f"{len(self.busy)} run(s) driven by another process: {', '.join(self.busy)[:400]}"
        self.sweep = self.store.sweeps.set_sweep_status(self.sweep.id, status, note=note)
        self.on_event(SweepEnded(self.sweep, reason))
        return self.sweep
