"""Sweeps: every stored sweep, and the chosen one's runs with their progress, followed live (the
sweep itself usually runs headless: `s3gym sweep` in another terminal or on another machine)."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from s3gym_tui.messages import SweepsRead
from s3gym_tui.screens.analysis_common import AnalysisScreen
from s3gym_tui.screens.live import LiveScreenMixin
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.fit_table import FitTable
from s3gym_tui.widgets.table import DataTable
from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.thread_work import thread_work
STATUS_STYLE = {"finished": "green", "running": "bold cyan", "stopped": "yellow", "failed": "red",
                "created": "dim"}


def bar(done: int, total: int, width: int = 12) -> Text:
    """A text progress bar `█████░░░ 5/8` (width 0: just `5/8`, for a narrow terminal)."""
    if width <= 0:
        return Text(f"{done}/{total}")
    filled = 0 if total <= 0 else min(width, round(width * done / total))
    return Text.assemble(("█" * filled, "green"), ("░" * (width - filled), "dim"), f" {done}/{total}")


class SweepScreen(LiveScreenMixin, AnalysisScreen):
    """The stored sweeps (left; on top when narrow) and the highlighted sweep's runs, following the
    store live like every other screen (StoreChanged, at most once a second)."""

    DEFAULT_CSS = """
    SweepScreen #sweep-main { height: 1fr; }
    SweepScreen #sweep-list { width: 44; border: round $primary-darken-2; }
    SweepScreen #sweep-right { width: 1fr; }
    SweepScreen #sweep-status { height: auto; padding: 0 1; background: $boost; }
    SweepScreen #sweep-runs { height: 1fr; border: round $primary-darken-2; }
    SweepScreen.-narrow #sweep-main { layout: vertical; }
    SweepScreen.-narrow #sweep-list { width: 1fr; height: 7; }
    """
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (150, "-wide")]  # stacked below 150: the runs table needs ~110
    BINDINGS = [
        Binding("enter", "open_run", "Protocol view", id="sweep_open_run", show=False),
        Binding("o", "open_run", "Protocol view", id="sweep_protocol"),
        Binding("g", "report", "Report", id="sweep_report"),
        Binding("f8", "refresh", "Refresh", id="sweep_refresh", show=False),
    ]

    def __init__(self, sweep_id: Optional[str] = None) -> None:
        super().__init__()
        self.sweep_id = sweep_id
        self.sweeps: list = []
        self.progress: list = []
        self.usage: Optional[dict] = None
        self._shown_sweeps: Optional[list] = None
        self._shown_runs: Optional[list] = None
        self.reads = 0  # completed reads of the store (tests wait on it)

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="sweep-main"):
            yield DataTable(id="sweep-list", cursor_type="row", zebra_stripes=True)
            with Vertical(id="sweep-right"):
                yield Static(id="sweep-status")
                yield FitTable(id="sweep-runs", cursor_type="row", zebra_stripes=True, note_in_subtitle=True)
        yield KeyHints()

    def on_mount(self) -> None:
        self.sub_title = "sweeps"
        self.query_one("#sweep-list").border_title = "Sweeps"
        self.query_one("#sweep-runs").border_title = "Runs"
        sweeps = self.query_one("#sweep-list", DataTable)
        for label in ("sweep", "status", "runs"):
            sweeps.add_column(label, key=label)
        runs = self.query_one("#sweep-runs", DataTable)
        # the model gives way first (shortened in the middle), then the game; status and progress stay
        for label, drop, shorten in (("run", 0, 0), ("game", 2, 0), ("pathway", 0, 0), ("model", 3, 14),
                                     ("status", 0, 0), ("episodes", 0, 0), ("checkpoints", 1, 0)):
            runs.add_column(label, key=label, drop=drop, shorten=shorten)
        self.query_one("#sweep-status", Static).update(Text("reading the store…", style="italic"))
        self.action_refresh()

    def refresh_from_store(self) -> None:
        """Any process committed (a run of the sweep stored a step, an episode, a checkpoint)."""
        self.action_refresh()

    # ----- reading (a thread worker with its own connection) ------------------------------
    def action_refresh(self) -> None:
        self._read(self.sweep_id)

    @thread_work(exclusive=True, group="sweep-read")
    def _read(self, sweep_id: Optional[str]) -> None:
        try:
            store = self.app.store.for_thread()
            try:
                sweeps = store.sweeps.list_sweeps(limit=200)
                chosen = sweep_id if any(s.id == sweep_id for s in sweeps) else (sweeps[0].id if sweeps else None)
                progress = store.sweeps.sweep_progress(chosen) if chosen else []
                usage = store.sweeps.sweep_usage(chosen) if chosen else None
            finally:
                store.close()
        except Exception as exc:  # noqa: BLE001 - a message, not a crash
            self.post_message(SweepsRead([], sweep_id, [], None, error=str(exc)))
            return
        self.post_message(SweepsRead(sweeps, chosen, progress, usage))

    def on_sweeps_read(self, message: SweepsRead) -> None:
        self.reads += 1
        if message.error:
            self.query_one("#sweep-status", Static).update(safe_text(f"Cannot read the sweeps: {message.error}",
                                                                     style="red"))
            return
        self.sweeps = message.sweeps
        if self.sweep_id is None or self.sweep_id == message.sweep_id:
            self.sweep_id = message.sweep_id
            self.progress = message.progress or []
            self.usage = message.usage
        self._show()

    # ----- rendering --------------------------------------------------------------------
    def _show(self) -> None:
        sweeps_table = self.query_one("#sweep-list", DataTable)
        shown = [(s.id, s.status) for s in self.sweeps]
        if shown != self._shown_sweeps:
            self._shown_sweeps = shown
            sweeps_table.clear()
            for s in self.sweeps:
                size = len(s.config.games) * len(s.config.pathways) * len(s.config.models)
                sweeps_table.add_row(s.id, Text(s.status, style=STATUS_STYLE.get(s.status, "")), str(size),
                                     key=s.id)
            if self.sweep_id is not None and any(s.id == self.sweep_id for s in self.sweeps):
                sweeps_table.move_cursor(row=sweeps_table.get_row_index(self.sweep_id))
        self._render_runs()

    def _render_runs(self) -> None:
        status = self.query_one("#sweep-status", Static)
        sweep = next((s for s in self.sweeps if s.id == self.sweep_id), None)
        if sweep is None:
            status.update(Text("No sweep yet: start one with `s3gym sweep` (it shows up here live).",
                               style="italic"))
            return
        done = sum(p.status == "finished" for p in self.progress)
        eps = sum(p.episodes_done for p in self.progress)
        total = sum(p.episodes_total for p in self.progress)
        text = Text()
        text.append(f"{sweep.id} ", style="bold")
        text.append(sweep.status, style=STATUS_STYLE.get(sweep.status, ""))
        text.append(f" · runs {done}/{len(self.progress)} · episodes {eps}/{total}")
        if self.usage:
            text.append(f" · {int(self.usage['calls']):,} calls · ${float(self.usage['cost']):,.4f}")
            if sweep.config.budget_usd:
                text.append(f" of ${sweep.config.budget_usd:,.2f}")
        if sweep.note:
            text.append(f"\n{sweep.note}", style="yellow")
        status.update(safe_text(text, max_chars=4000, max_lines=12))  # the note quotes providers' errors
        rows = [(p.id, p.status, p.episodes_done, p.checkpoints_done) for p in self.progress]
        table = self.query_one("#sweep-runs", DataTable)
        if rows == self._shown_runs:
            return
        self._shown_runs = rows
        selected = self._selected_run()
        table.clear()
        for p in self.progress:
            cfg = p.config
            table.add_row(p.id, cfg.game, cfg.pathway, cfg.model, Text(p.status, style=STATUS_STYLE.get(p.status, "")),
                          bar(p.episodes_done, p.episodes_total, 0 if self.has_class("-narrow") else 12), f"{p.checkpoints_done}/{len(cfg.checkpoints())}",
                          key=p.id)
        if selected is not None and any(p.id == selected for p in self.progress):
            table.move_cursor(row=table.get_row_index(selected))
        self.query_one("#sweep-runs").border_title = f"Runs ({done}/{len(self.progress)} finished)"

    # ----- choosing -------------------------------------------------------------------------
    @on(DataTable.RowHighlighted, "#sweep-list")
    def _sweep_highlighted(self, event: DataTable.RowHighlighted) -> None:
        chosen = event.row_key.value if event.row_key is not None else None
        if chosen is not None and chosen != self.sweep_id:
            self.sweep_id = chosen
            self._shown_runs = None
            self.progress = []
            self.action_refresh()

    def _selected_run(self) -> Optional[str]:
        table = self.query_one("#sweep-runs", DataTable)
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key((table.cursor_row, 0))
        return row_key.value

    @on(DataTable.RowSelected, "#sweep-runs")
    def _run_chosen(self, _event: DataTable.RowSelected) -> None:
        self.action_open_run()

    def action_open_run(self) -> None:
        run_id = self._selected_run()
        if run_id is None:
            return
        from s3gym_tui.screens.protocol import ProtocolScreen

        # follow it: the sweep's own process runs it
        self.app.push_screen(ProtocolScreen(run_id))

    def action_report(self) -> None:
        if self.progress:
            self.app.open_report([p.id for p in self.progress])
