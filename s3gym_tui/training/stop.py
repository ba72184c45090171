"""A requested stop of a training (Ctrl-C, SIGTERM, or a caller): one flag for the whole process.

Training runs synchronously inside the event loop of `asyncio.run`, so the loop's own signal handling
(engine/interrupt.py, asyncio's SIGINT handler) would only act at the next await, after the trainer
has finished. Here the first SIGINT / SIGTERM is caught by a plain `signal.signal` handler, which
runs between two bytecodes of the training: it sets the flag (the trainer's StopCallback, hf.py, ends
the optimizer step in progress, saves the trainer state and stops; no later phase, ablation or
evaluation starts) and cancels the task that drives the training (an evaluation waiting on a model
call stops at once, nothing half-done is stored). The handlers are then put back to the defaults:
a second Ctrl-C raises KeyboardInterrupt wherever the process is, a second SIGTERM kills it.

No torch here: the CLI imports this module before the train extra is known to be installed.
"""

from __future__ import annotations

import asyncio
import signal
import threading
from contextlib import contextmanager
from typing import Any, Awaitable, Callable, Iterator, Optional, TypeVar

from s3gym_tui.engine.interrupt import SIGNALS
from s3gym_tui.training.stopped import TrainingStopped  # noqa: F401 (raised here; imported from here too)

T = TypeVar("T")


_lock = threading.Lock()
_reason: Optional[str] = None
_task: Optional[asyncio.Task] = None
_phase: Optional[str] = None  # what the training is doing now, in words (the stored reason names it)
_on_request: list[Callable[[str, Optional[str]], None]] = []  # told (reason, phase) when a stop is requested


def set_phase(text: Optional[str]) -> None:
    """What the training is doing now ('the format warm start', 'GRPO update 3: rollouts'...): a stop's
    stored reason and the terminal's note name it."""
    global _phase
    _phase = text


def current_phase() -> Optional[str]:
    return _phase


def on_request(callback: Callable[[str, Optional[str]], None]) -> Callable[[], None]:
    """Call `callback(reason, phase)` once when a stop is requested (the terminal says what it is finishing);
    returns the function that removes it."""
    _on_request.append(callback)
    return lambda: _on_request.remove(callback) if callback in _on_request else None


def request(reason: str = "stopped") -> None:
    """Ask the training in progress to stop (the first reason given is kept)."""
    global _reason
    with _lock:
        first = _reason is None
        if first:
            _reason = reason
        task = _task
    if first:
        for callback in list(_on_request):
            try:
                callback(reason, _phase)
            except Exception:  # noqa: BLE001 - a note that cannot be shown never blocks the stop
                pass
    if task is not None and not task.done():
        loop = task.get_loop()
        if loop.is_closed():
            return
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:  # the loop's own thread (a signal handler, a trainer callback): as asyncio's
            task.cancel()  # own SIGINT handler does, then wake the loop if it sleeps in select()
            loop.call_soon_threadsafe(lambda: None)
        else:
            loop.call_soon_threadsafe(task.cancel)


def requested() -> Optional[str]:
    """The reason of the requested stop, or None."""
    return _reason


def clear() -> None:
    """Forget a stop request (a new command, a new test)."""
    global _reason, _phase
    with _lock:
        _reason = None
        _phase = None


def check() -> None:
    """Raise TrainingStopped if a stop was requested (between two phases: nothing new starts)."""
    reason = _reason
    if reason is not None:
        raise TrainingStopped(reason)


def check_between(what: Optional[str] = None) -> None:
    """Inside a step (between two rollouts, two warm-start drafts): raise TrainingStopped if a stop was
    requested, in a single process only (data-parallel ranks stop together at a step's end: hf.StopCallback);
    `what` names the work in progress for the stored reason."""
    if _reason is None:
        return
    from s3gym_tui.training.ranks import world

    if world().size == 1:
        if what:
            set_phase(what)
        raise TrainingStopped(_reason)


@contextmanager
def stop_on_signals() -> Iterator[None]:
    """While inside: the first SIGINT / SIGTERM requests a stop; the second one acts as if this were not
    installed (KeyboardInterrupt, or death by SIGTERM). Outside the main thread: nothing is installed."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous: dict[int, Any] = {}

    def handle(sig: int, frame: Any) -> None:
        for other in list(previous):  # a second signal is not ours any more
            signal.signal(other, signal.default_int_handler if other == signal.SIGINT else signal.SIG_DFL)
        request(SIGNALS.get(sig, "stopped"))

    for sig in SIGNALS:
        previous[sig] = signal.signal(sig, handle)
    try:
        yield
    finally:
        for sig, old in previous.items():
            signal.signal(sig, old)


async def _driven(factory: Callable[[], Awaitable[T]]) -> T:
    global _task
    task = asyncio.current_task()
    with _lock:
        _task = task
    try:
        return await factory()
    except asyncio.CancelledError:
        if _reason is not None:  # our own cancel: a requested stop, said as one
            raise TrainingStopped(_reason) from None
        raise
    finally:
        with _lock:
            if _task is task:
                _task = None


def run(factory: Callable[[], Awaitable[T]]) -> T:
    """`asyncio.run(factory())` as a stoppable training: signals request a stop (above), and the stop
    ends it with TrainingStopped once what was done is stored. A stop request left over from an
    earlier command in this process is forgotten first."""
    clear()
    with stop_on_signals():
        try:
            return asyncio.run(_driven(factory))
        finally:
            reason = _reason
            if reason is not None:  # (a TrainingStopped carries it out)
                clear()
