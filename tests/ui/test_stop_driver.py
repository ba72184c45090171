"""Stopping a process that drives a run or an ASPIRE run (its lease) from the app: on this machine after
a confirmation (a real Ctrl-C to a real process), on another machine never (one line says so)."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

from s3gym_tui.screens.dialogs import ConfirmDialog
from s3gym_tui.screens.run_control import ask_to_stop_driver
from s3gym_tui.store.lease_row import Lease
from s3gym_tui.store.leases import HOST


class FakeApp:
    def __init__(self) -> None:
        self.notes: list[tuple[str, str]] = []
        self.pushed: list = []

    def notify(self, text: str, severity: str = "information", **_) -> None:
        self.notes.append((severity, text))

    def push_screen(self, screen, callback=None) -> None:
        self.pushed.append((screen, callback))


def _lease(pid: int, host: str) -> Lease:
    return Lease("asp-1", "t", pid, host, "s3gym aspire", "2026-01-01T00:00:00+00:00", time.time())


def test_a_driver_here_gets_ctrl_c_only_once_the_person_confirms():
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        app = FakeApp()
        ask_to_stop_driver(app, "asp-1", _lease(driver.pid, HOST), "Stop asp-1?")
        (dialog, answer), = app.pushed
        assert isinstance(dialog, ConfirmDialog) and driver.poll() is None
        answer(False)  # "Keep running"
        assert driver.poll() is None and app.notes == []
        answer(True)
        assert driver.wait(timeout=10) == -signal.SIGINT
        assert app.notes[-1] == ("information", f"Sent Ctrl-C to PID {driver.pid}: it stops cleanly, resumable.")
    finally:
        driver.kill()
        driver.wait()


def test_a_driver_on_another_machine_is_named_and_left_alone():
    app = FakeApp()
    ask_to_stop_driver(app, "asp-1", _lease(4242, "elsewhere"), "Stop asp-1?")
    assert app.pushed == []
    (severity, text), = app.notes
    assert severity == "warning" and text.startswith("asp-1 is driven by PID 4242 on elsewhere")
    assert text.endswith("on another machine: stop it there.")
