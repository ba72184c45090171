"""Wait until the app is quiet: no worker running, the top screen mounted and not busy.

A screen that fills itself in a worker started from on_mount may not have started that worker
yet after one pause (a loaded machine), so waiting for workers alone is not enough: a screen with
a `busy` property (True until its data is shown) is also waited for."""

from __future__ import annotations


def _quiet(app) -> bool:
    screen = app.screen
    return (not any(w.is_running for w in app.workers) and screen.is_mounted
            and not getattr(screen, "busy", False) and not getattr(screen, "thinking", False))


async def settle(pilot, rounds: int = 200) -> None:
    for _ in range(rounds):
        await pilot.app.workers.wait_for_complete()
        await pilot.pause()
        if _quiet(pilot.app):
            await pilot.pause()
            if _quiet(pilot.app):
                return
    raise AssertionError("the app did not settle (a worker still runs or the screen is busy)")


async def until(pilot, predicate, timeout: float = 60.0, what: str = "condition", step: float = 0.05):
    """Pause the app until `predicate()` is truthy (returned), or fail after `timeout` seconds naming
    `what`: for what happens in another process (a run's own process, a fake server)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await pilot.pause(step)
    raise AssertionError(f"timed out waiting for {what}")
