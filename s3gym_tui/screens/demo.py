"""Home's demo entry (d): the guided tour on a demo database; else open the demo database, or build it
first (`s3gym demo` as a process of its own, its progress followed here), then switch to it."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Static

from s3gym_tui.screens.dialogs import ConfirmDialog, DialogScreen
from s3gym_tui.textgate import safe_text

POLL_S = 0.5
LOG_LINES = 6  # of the build's progress shown


def demo_state(app) -> tuple[str, Optional[Path], object]:
    """What d does here: ("tour", None, mark) on a finished demo database, ("open", path, mark) when one is
    ready elsewhere, ("build", path, None) when it can be built, ("refuse", path, reason) otherwise."""
    from s3gym_tui.engine.demo import building_elsewhere, default_demo_path, mark_of_file, read_mark

    mark = read_mark(app.store.conn)
    if mark is not None and mark.status == "ready":
        return "tour", None, mark
    if mark is not None:
        return "refuse", Path(app.db_path), ("this demo database is incomplete (its build stopped): quit and run "
                                             "`s3gym demo` to build it again")
    target = default_demo_path()
    if target.resolve() == Path(app.db_path).resolve():
        return "build", target, None
    if not target.exists():
        return "build", target, None
    other = mark_of_file(target)
    if other is None:
        return "refuse", target, f"{target} is not a demo database: `s3gym demo --db PATH` builds one elsewhere"
    if other.status == "ready":
        return "open", target, other
    if building_elsewhere(other):
        return "refuse", target, f"the demo database is being built by PID {other.pid}: d again once it is done"
    return "build", target, None


def open_demo(app) -> None:
    """Home's d (see the module docstring)."""
    what, target, detail = demo_state(app)
    if what == "tour":
        app.open_tour()
        return
    if what == "refuse":
        app.notify(str(detail), severity="warning", timeout=12)
        return

    async def switch(yes: Optional[bool]) -> None:
        if yes:
            await app.open_database(target, tour=True)

    if what == "open":
        app.push_screen(ConfirmDialog(f"Open the demo database?\n{target}\n(built in {detail.wall_s or 0:.0f} s). "
                                      f"The app switches to it; your database {app.db_path} stays as it is "
                                      f"(`s3gym --db {app.db_path}` opens it again).", yes="Open it (y)",
                                      no="Cancel"), switch)
        return

    def build(yes: Optional[bool]) -> None:
        if yes:
            app.push_screen(DemoBuildDialog(target), switch)

    from s3gym_tui.engine.demo import schedule

    plan = schedule()
    sweep = plan.sweep()
    contrast = f" and one short run of {plan.contrast.model}" if plan.contrast is not None else ""
    app.push_screen(ConfirmDialog(
        f"Build the demo database?\nThe glass-box learner on {len(sweep.games)} games x "
        f"{', '.join(sweep.pathways)}{contrast}, offline (a few minutes on 2 cores), into\n{target}\nThen the "
        f"app switches to it and opens the tour (your database stays as it is).", yes="Build it (y)",
        no="Cancel"), build)


class DemoBuildDialog(DialogScreen):
    """`s3gym demo --no-open` running as its own process: its latest progress lines; dismisses True once the
    database is ready, False when it stopped (esc stops it: the demo database stays incomplete)."""

    CANCEL_VALUE = False
    BINDINGS = DialogScreen.BINDINGS
    DEFAULT_CSS = """
    DemoBuildDialog #demo-log { height: auto; min-height: 3; padding: 0 1; background: $boost; }
    """

    def __init__(self, target: Path) -> None:
        super().__init__()
        self.target = Path(target)
        self.child = None
        self.started = time.monotonic()

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label("Building the demo database", classes="dialog-title")
            yield Static(safe_text(str(self.target), one_line=True), classes="dialog-text")
            yield Static(Text("starting `s3gym demo`…", style="italic"), id="demo-log")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Stop (esc)", id="stop", compact=True)

    def on_mount(self) -> None:
        from s3gym_tui.engine.detached import ChildRuns, demo_argv

        try:
            self.child = ChildRuns(self.target).start(demo_argv(self.target), "demo", kind="demo")
        except OSError as exc:
            self.query_one("#demo-log", Static).update(safe_text(f"✗ cannot start `s3gym demo`: {exc}",
                                                                 style="bold red"))
            return
        self.set_interval(POLL_S, self._follow)

    def _follow(self) -> None:
        child = self.child
        if child is None:
            return
        text = Text(f"{time.monotonic() - self.started:.0f} s · PID {child.pid} · log {child.log}\n", style="dim")
        text.append(child.log_tail(LOG_LINES))
        if not child.alive:
            if child.returncode == 0:
                self.dismiss(True)
                return
            text.append(f"\n✗ `s3gym demo` ended (exit {child.returncode}): the lines above say why",
                        style="bold red")
            self.query_one("#stop", Button).label = "Close (esc)"
            self.child = None
        self.query_one("#demo-log", Static).update(safe_text(text, max_lines=LOG_LINES + 3))

    def action_cancel(self) -> None:
        if self.child is not None and self.child.alive:
            self.child.stop()  # Ctrl-C: the sweeps stop cleanly; the demo database stays incomplete
        self.dismiss(False)

    @on(Button.Pressed, "#stop")
    def _stop(self) -> None:
        self.action_cancel()
