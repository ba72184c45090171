"""Starting, resuming and stopping protocol runs from any screen. A run is a process of its own (the
`s3gym run` / `s3gym resume` a person would type, engine/detached.py); screens only follow it through the
store, and stop it the way the command line honours (Ctrl-C to the process holding its lease)."""

from __future__ import annotations

import os
from typing import Callable, Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Label, Static

from s3gym_tui.screens.dialogs import ConfirmDialog, DialogScreen
from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.thread_work import thread_work


def children(app):
    """The run processes this app started (created on first use)."""
    from s3gym_tui.engine.detached import ChildRuns

    if getattr(app, "child_runs", None) is None:
        app.child_runs = ChildRuns(app.db_path)
    return app.child_runs


def start_new_run(app, config):
    """`s3gym run …` for `config` as a child process; the ChildRun, or None with the reason said."""
    from s3gym_tui.engine.detached import run_argv

    from s3gym_tui.config import ConfigError, load_settings

    try:
        file_args = load_settings().model_settings(config.model).model_args  # what the command reads itself
    except ConfigError:
        file_args = {}
    try:
        argv = run_argv(config, app.db_path, file_args)
        return children(app).start(argv, f"run-{config.game}-{config.pathway}")
    except (OSError, ValueError) as exc:
        app.notify(f"Cannot start the run: {exc}", severity="error")
        return None


def start_resume(app, run_id: str):
    """`s3gym resume RUN` as a child process; the ChildRun, or None with the reason said."""
    from s3gym_tui.engine.detached import resume_argv

    try:
        child = children(app).start(resume_argv(run_id, app.db_path), f"resume-{run_id}")
    except OSError as exc:
        app.notify(f"Cannot resume {run_id}: {exc}", severity="error")
        return None
    child.run_id = run_id
    app.notify(f"Resuming {run_id} as its own process (PID {child.pid}); it keeps running when you "
               f"leave this screen or quit. Log: {child.log}")
    return child


def check_children(app) -> bool:
    """Say once when a run process this app started ended on a problem (its last log lines): a
    refused model, a full disk. A finished run or a requested stop says nothing (the store says it).
    True when one ended since the last look."""
    ended = False
    for child in children(app).children if getattr(app, "child_runs", None) else []:
        if child.run_id is None and not child.reported:
            child.find_run_id(app.store)
        if child.alive or child.reported:
            continue
        child.reported = ended = True
        if child.returncode not in (0, 130) and not child.stop_sent:  # (stopped while starting: -2)
            what = child.run_id or "the new run"
            app.notify(f"{child.log_tail() or 'no output'}\n(log: {child.log})",
                       title=f"Run process of {what} ended (exit {child.returncode})", severity="error",
                       timeout=30)
    return ended


def live_lease(app, run_id: str):
    try:
        lease = app.store.leases.lease(run_id)
    except Exception:  # noqa: BLE001 - a broken store: nothing to stop from here
        return None
    return lease if lease is not None and lease.alive() else None


def stop_run(app, run_id: str) -> None:
    """Stop a running run: Ctrl-C to the process holding its lease (it stores 'stopped' with the
    reason and stays resumable). A process this app started is stopped at once; another one (a
    terminal's `s3gym run`, a sweep driving several runs) after a confirmation."""
    lease = live_lease(app, run_id)
    starting = children(app).of_run(run_id)
    if lease is None and starting is None:
        app.notify(f"{run_id} is not running.")
        return
    if lease is None or (starting is not None and lease.pid == starting.pid):
        starting.stop()
        app.notify(f"Stopping {run_id} (Ctrl-C to PID {starting.pid}): it stops cleanly and stays "
                   f"resumable (r).")
        return
    ask_to_stop_driver(app, run_id, lease, f"Run {run_id} is driven by {lease.describe()}.\nSend that process "
                       f"Ctrl-C? It stops every run it drives; they stay resumable.")


def ask_to_stop_driver(app, what: str, lease, question: str) -> None:
    """Ctrl-C, after a confirmation, to a live process of this machine that drives `what` (its lease);
    a driver on another machine cannot be signalled from here: one line says so."""
    import signal

    from s3gym_tui.store.leases import HOST

    if lease.host != HOST:
        app.notify(f"{what} is driven by {lease.describe()} on another machine: stop it there.", severity="warning")
        return

    def confirmed(yes: Optional[bool]) -> None:
        if yes:
            try:
                os.kill(lease.pid, signal.SIGINT)
                app.notify(f"Sent Ctrl-C to PID {lease.pid}: it stops cleanly, resumable.")
            except OSError as exc:
                app.notify(f"Cannot stop PID {lease.pid}: {exc}", severity="error")

    app.push_screen(ConfirmDialog(question, yes="Stop it", no="Keep running"), confirmed)


def offer_resume(app, run_id: str, started: Optional[Callable[[object], None]] = None) -> None:
    """Resume is asked, never implied: a dialog with the estimate of what is left, then `s3gym resume`."""
    try:
        run = app.store.runs.get_run(run_id)
    except Exception as exc:  # noqa: BLE001
        app.notify(f"Cannot resume {run_id}: {exc}", severity="error")
        return
    if live_lease(app, run_id) is not None or children(app).of_run(run_id) is not None:
        app.notify(f"{run_id} is running already.")
        return
    if run.status == "finished":
        app.notify(f"{run_id} is finished: nothing left to run.")
        return
    if run.config.pathway == "trained":
        app.notify("A trained run resumes from its Training screen.", severity="warning")
        return

    def answer(yes: Optional[bool]) -> None:
        if yes:
            child = start_resume(app, run_id)
            if child is not None and started is not None:
                started(child)

    app.push_screen(ResumeDialog(run), answer)


class ResumeDialog(DialogScreen):
    """Resume a run? With what is left of it (engine.estimate, computed off the UI thread)."""

    CANCEL_VALUE = False
    BINDINGS = DialogScreen.BINDINGS + [Binding("y", "yes", "Resume", id="resume_yes")]
    DEFAULT_CSS = "ResumeDialog #resume-estimate { height: auto; padding: 0 1; background: $boost; }"

    def __init__(self, run) -> None:
        super().__init__()
        self.run = run
        self.estimate = None

    def compose(self) -> ComposeResult:
        run = self.run
        with Vertical(classes="dialog dialog-wide"):
            yield Label(safe_text(f"Resume {run.id}?", one_line=True), classes="dialog-title")
            reason = f"It is {run.status}" + (f": {run.status_reason}" if run.status_reason else "") + "."
            yield Static(safe_text(f"{run.config.game} · {run.config.model} · pathway {run.config.pathway}. "
                                   f"{reason} It runs as its own process (`s3gym resume`), and keeps "
                                   "running when you leave this screen or quit.", max_lines=6),
                         classes="dialog-text")
            yield Static(Text("estimating what is left…", style="italic"), id="resume-estimate")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Resume (y)", variant="primary", id="yes", compact=True)
                yield Button("Cancel (esc)", id="no", compact=True)

    def on_mount(self) -> None:
        self._estimate()

    @thread_work(exclusive=True, group="resume-estimate")
    def _estimate(self) -> None:
        from s3gym_tui.engine.estimate import estimate_run

        try:
            with self.app.store.for_thread() as store:
                episodes = store.episodes.list(self.run.id)
                done_x = frozenset(c.x for c in store.checkpoints.list(self.run.id))
            explore = frozenset(e.index for e in episodes if e.phase == "explore" and e.status == "finished")
            estimate = estimate_run(self.run.config, explore, done_x)
            text = Text("What is left\n", style="bold")
            text.append("\n".join(estimate.lines()))
        except Exception as exc:  # noqa: BLE001 - resuming does not need the estimate
            estimate, text = None, Text(f"no estimate: {exc}", style="italic")
        self.app.call_from_thread(self._show, estimate, text)

    def _show(self, estimate, text: Text) -> None:
        self.estimate = estimate
        if self.is_mounted:
            self.query_one("#resume-estimate", Static).update(safe_text(text))

    def action_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class QuitDialog(DialogScreen):
    """Quitting while runs this app started are running: leave them running, or stop them."""

    BINDINGS = DialogScreen.BINDINGS + [Binding("l", "choose('leave')", "Leave running", id="quit_leave"),
                                        Binding("s", "choose('stop')", "Stop", id="quit_stop")]

    def __init__(self, runs: list[str]) -> None:
        super().__init__()
        self.runs = runs

    def compose(self) -> ComposeResult:
        names = ", ".join(self.runs)
        with Vertical(classes="dialog"):
            yield Static(safe_text(f"Run {names} is running (started from this app).\nLeave it running? It is "
                                   f"its own process: the app follows it again when you open it. Or stop it "
                                   f"now (it stays resumable).", max_lines=12), classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Leave running (l)", variant="primary", id="leave", compact=True)
                yield Button("Stop (s)", variant="warning", id="stop", compact=True)
                yield Button("Cancel (esc)", id="cancel", compact=True)

    def action_choose(self, choice: str) -> None:
        self.dismiss(choice)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(None if event.button.id == "cancel" else event.button.id)
