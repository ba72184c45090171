"""A sweep's worker process (engine.sweep_workers starts it): drives the runs the parent hands over
with the sweep's own SweepRunner and reports their events, each call's cost and how each run ended."""

from __future__ import annotations

import asyncio
import signal
import threading
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, Callable, Optional

from s3gym_tui.engine.limits import CallLimits
from s3gym_tui.engine.sweep_workers import forwarded
from s3gym_tui.models import Run
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.leases import RunBusy


class SharedLimits(CallLimits):
    """A worker's call limits: each call's cost also goes to the parent; the other workers' spend
    (as the parent last relayed it) counts against the sweep's budget too."""

    def __init__(self, report: Callable[[Optional[float]], None], **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.report = report
        self.others_usd = 0.0

    def record(self, cost: Optional[float]) -> None:
        super().record(cost)
        self.report(cost)

    def others(self, dollars: float) -> None:
        self.spent_usd += dollars - self.others_usd
        self.others_usd = dollars


def serve(fd: int) -> None:
    """A worker process: drive the runs the parent hands over until it says close (or is gone)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the whole process group: the parent decides
    conn = Connection(fd)
    try:
        from s3gym_tui.providers import configured_litellm

        configured_litellm()
        asyncio.run(_serve(conn, *conn.recv()))
    except Exception as exc:  # noqa: BLE001 - said to the parent in one line, which stops the sweep
        try:
            conn.send(("failed", f"{type(exc).__name__}: {exc}"[:400]))
        except (OSError, ValueError):
            pass
    finally:
        conn.close()


async def _serve(conn, db: str, sweep_id: str, share: int, budget_usd: Optional[float], spent_usd: float,
                 backoff_base_s: float, model_args: dict) -> None:
    from s3gym_tui.engine.limits import use_limits
    from s3gym_tui.engine.sweep import SweepRunEvent, SweepRunner
    from s3gym_tui.store import Store

    loop = asyncio.get_running_loop()
    done = asyncio.Event()
    tasks: set[asyncio.Task] = set()
    with Store(Path(db)) as store:
        def send(message: tuple) -> None:
            try:
                conn.send(message)
            except (OSError, ValueError):  # the parent is gone (killed): its runs stop, stored, resumable
                loop.call_soon(handle, None)

        def on_event(event) -> None:  # the run's events (SweepRunner._execute wraps them)
            if isinstance(event, SweepRunEvent):
                send(("event", event.run_id, forwarded(event.event)))

        runner = SweepRunner(store, store.sweeps.get_sweep(sweep_id), on_event, backoff_base_s)
        runner.model_args = model_args
        runner.limits = SharedLimits(lambda cost: send(("spent", cost)), concurrency=share,
                                     budget_usd=budget_usd, spent_usd=spent_usd)

        async def drive(run: Run) -> None:
            if runner.stop_reason is not None:  # handed over as the stop crossed it: not started
                send(("ended", run.id, store.runs.get_run(run.id), None, None))
                return
            try:
                with use_limits(runner.limits):  # this task's own context (made from the reader's)
                    final, error = await runner._execute(run)
                send(("ended", run.id, final, error, None))
            except RunBusy as exc:
                send(("ended", run.id, None, str(exc), "busy"))
            except StoreError as exc:
                send(("ended", run.id, None, str(exc), "store"))
            except Exception as exc:  # noqa: BLE001 - a fault of the engine: the sweep fails, as in one process
                send(("ended", run.id, None, f"{type(exc).__name__}: {exc}", "error"))

        def handle(message: Optional[tuple]) -> None:
            if message is None:  # the parent is gone: stop, stored and resumable, and end
                runner.stop("the sweep's process is gone")
                done.set()
            elif message[0] == "drive":
                task = loop.create_task(drive(message[1]))
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            elif message[0] == "stop":
                runner.stop(message[1])
            elif message[0] == "others":
                runner.limits.others(message[1])
            elif message[0] == "close":  # the sweep is over (or its process interrupted): nothing goes on
                runner.stop("the sweep's process ended")
                done.set()

        def read() -> None:  # a thread always reads, so the parent's sends never wait on this loop
            while True:
                try:
                    message = conn.recv()
                except (EOFError, OSError):
                    loop.call_soon_threadsafe(handle, None)
                    return
                loop.call_soon_threadsafe(handle, message)
                if message[0] == "close":
                    return

        threading.Thread(target=read, name="sweep-worker-reader", daemon=True).start()
        loop.add_signal_handler(signal.SIGTERM, runner.stop, "terminated (SIGTERM)")  # the parent's last word
        await done.wait()
        if tasks:
            await asyncio.gather(*tasks, return_exceptions=True)
