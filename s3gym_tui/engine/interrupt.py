"""Ctrl-C and SIGTERM as a requested stop: the first signal asks the runs to stop cleanly (their
state stays resumable, the reason is stored); a second one restores the default and interrupts."""

from __future__ import annotations

import asyncio
import signal
import warnings
from contextlib import contextmanager
from typing import Callable, Iterator, Optional

SIGNALS = {signal.SIGINT: "interrupted (Ctrl-C)", signal.SIGTERM: "terminated (SIGTERM)"}

# litellm builds a custom provider's coroutine before awaiting it: a call cancelled in between
# leaves a never-awaited coroutine, reported at garbage collection. Expected when we stop a run.
warnings.filterwarnings("ignore", message=r"coroutine '.*acompletion' was never awaited",
                        category=RuntimeWarning)


class StopRequest:
    """What the signal handler saw: the reason of the first signal, if any."""

    def __init__(self) -> None:
        self.reason: Optional[str] = None


@contextmanager
def stop_on_signals(stop: Callable[[str], None]) -> Iterator[StopRequest]:
    """Inside a running event loop: SIGINT / SIGTERM call `stop(reason)` once."""
    loop = asyncio.get_running_loop()
    request = StopRequest()
    installed: list[int] = []

    def handle(sig: int) -> None:
        request.reason = SIGNALS[sig]
        for other in installed:  # a second signal is not ours any more: it interrupts at once
            loop.remove_signal_handler(other)
        installed.clear()
        stop(request.reason)

    for sig in SIGNALS:
        try:
            loop.add_signal_handler(sig, handle, sig)
            installed.append(sig)
        except (NotImplementedError, RuntimeError, ValueError):  # not the main thread, Windows
            pass
    try:
        yield request
    finally:
        for sig in installed:
            loop.remove_signal_handler(sig)
