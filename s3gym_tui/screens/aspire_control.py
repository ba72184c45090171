"""Starting, resuming and stopping ASPIRE runs from the app. An ASPIRE run is a process of its own (the
`s3gym aspire …` a person would type, started detached by engine/detached.py); the screen follows it
through the store and stops it the way the command line honours (Ctrl-C to its process)."""

from __future__ import annotations

from typing import Callable, Optional

from s3gym_tui.screens.run_control import ask_to_stop_driver, children

ASPIRE_KIND = "aspire"


def aspire_child(app, aspire_id: Optional[str]):
    """The newest living ASPIRE process this app started for `aspire_id` (None: one whose run is not
    known yet, i.e. still starting)."""
    if getattr(app, "child_runs", None) is None:
        return None
    for child in reversed(children(app).children):
        if child.kind == ASPIRE_KIND and child.alive and child.run_id == aspire_id:
            return child
    return None


def driver_line(store, run) -> str:
    """Who drives `run` right now (its live lease described), or ''."""
    lease = store.leases.aspire_lease(run.id)
    return lease.describe() if lease is not None and lease.alive() else ""


def start_aspire(app, argv: list[str], name: str):
    """`s3gym aspire …` as a child process; the ChildRun, or None with the reason said."""
    try:
        child = children(app).start(argv, name, kind=ASPIRE_KIND)
    except (OSError, ValueError) as exc:
        app.notify(f"Cannot start the ASPIRE run: {exc}", severity="error")
        return None
    app.notify(f"ASPIRE run started as its own process (PID {child.pid}); it keeps running when you leave "
               f"this screen or quit. Log: {child.log}")
    return child


def new_aspire_run(app, started: Optional[Callable[[object], None]] = None) -> None:
    """The new-run dialog (goal, model, protocol, explicit control, budget), then `s3gym aspire`."""
    from s3gym_tui.screens.aspire_dialog import AspireDialog

    def answer(argv: Optional[list[str]]) -> None:
        if argv:
            child = start_aspire(app, argv, "aspire")
            if child is not None and started is not None:
                started(child)

    app.push_screen(AspireDialog(app.db_path, app.settings.default_model), answer)


def resume_aspire(app, run, started: Optional[Callable[[object], None]] = None) -> None:
    """Resume an interrupted ASPIRE run as its own process (asked, never implied)."""
    from s3gym_tui.engine.detached import aspire_resume_argv
    from s3gym_tui.screens.dialogs import ConfirmDialog
    from s3gym_tui.store import StoreError

    try:
        driven = driver_line(app.store, run)
    except StoreError as exc:
        app.notify(f"Cannot resume {run.id}: {exc}", severity="error")
        return
    if driven or aspire_child(app, run.id) is not None:
        app.notify(f"{run.id} is running already.")
        return
    if run.status in ("finished", "failed"):
        app.notify(f"{run.id} is {run.status}: nothing left to run.")
        return

    def answer(yes: Optional[bool]) -> None:
        if yes:
            child = start_aspire(app, aspire_resume_argv(run.id, app.db_path), f"aspire-resume-{run.id}")
            if child is not None:
                child.run_id = run.id
                if started is not None:
                    started(child)

    app.push_screen(ConfirmDialog(f"Resume ASPIRE run {run.id}?\nIt continues from its last decision, "
                                  f"with what is left of its budget, as its own process (`s3gym aspire "
                                  f"--resume`).", yes="Resume", no="Cancel"), answer)


def stop_aspire(app, aspire_id: str) -> None:
    """Ctrl-C to the process driving it (it stores the stop and stays resumable). A process this app
    started is stopped at once; another one after a confirmation."""
    mine = aspire_child(app, aspire_id)
    try:
        lease = app.store.leases.aspire_lease(aspire_id)
    except Exception:  # noqa: BLE001 - a broken store: only this app's own process can be stopped
        lease = None
    lease = lease if lease is not None and lease.alive() else None
    if mine is not None and (lease is None or lease.pid == mine.pid):
        mine.stop()
        app.notify(f"Stopping {aspire_id} (Ctrl-C to PID {mine.pid}): it stops cleanly and stays resumable (r).")
        return
    if lease is None:
        app.notify(f"{aspire_id} is not running.")
        return
    ask_to_stop_driver(app, aspire_id, lease, f"ASPIRE run {aspire_id} is driven by {lease.describe()}.\nSend "
                       f"that process Ctrl-C? It stays resumable.")
