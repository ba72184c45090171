"""Home's recent-runs panel: the runs table and the highlighted run's details; the store-change token."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.coordinate import Coordinate
from textual.widgets import Static

from s3gym_tui.engine.glossary import DASH, fmt_metric
from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.fit_table import FitTable, shorten_middle

# the runs table's columns: (key, drop order, narrowest a shortened model may be); a long model id
# (a served GGUF path) is cut in the middle, pathway and status always stay
RUN_COLUMNS = (("id", 0, 0), ("game", 2, 0), ("model", 0, 16), ("pathway", 0, 0), ("status", 0, 0),
               ("created", 3, 0))
KEYS_NOTE = ("enter/o protocol · s stop · r resume · m summaries · g report · e episodes · "
             "t training · w sweeps · a ASPIRE · del delete")  # c (pairs, not of one run): footer, ? help


def store_token(store) -> Optional[tuple]:
    """Changes whenever the database does: SQLite's data_version (another connection committed)
    with this connection's own change count. None when it cannot be read (then reload)."""
    try:
        conn = store.conn
        return conn.execute("PRAGMA data_version").fetchone()[0], conn.total_changes
    except Exception:  # noqa: BLE001
        return None


def curve_line(config, checkpoints) -> str:
    """AUC+ and NABA of a run's scored checkpoints (engine.metrics), with why either is undefined."""
    from s3gym_tui.engine.glossary import why_text
    from s3gym_tui.engine.metrics import game_curve_metrics

    by_x = {cp.x: cp.mean for cp in checkpoints}
    xs = config.checkpoints()
    curve = game_curve_metrics([(x, by_x.get(x)) for x in xs], config.game)
    reason = why_text(curve.why, {"auc_plus": "AUC+", "naba": "NABA"}, ("auc_plus", "naba"))
    return (f"  AUC+ {fmt_metric(curve.auc_plus)} · NABA {fmt_metric(curve.naba)} "
            f"({curve.n} of {len(xs)} checkpoints scored{'; ' + reason if reason else ''})\n")


class RunsTable(FitTable):
    """The runs: a click chooses a run (its details show beside); enter or a double click opens it."""

    def on_click(self, event) -> None:
        # Textual calls this before DataTable's own click handler, which opens the run on a single
        # click of the highlighted row: a single click on a cell only chooses the run. A double click
        # (on the row the first click chose) or a header click goes on to DataTable's.
        meta = event.style.meta
        if event.chain < 2 and meta.get("row", -1) >= 0 and meta.get("column", -1) >= 0:
            event.prevent_default()
            self.cursor_coordinate = Coordinate(meta["row"], meta["column"])  # chosen, not opened
            event.stop()


def short_created(iso: str) -> str:
    return iso[:16].replace("T", " ")


class RunsPanel(Horizontal):
    """Recent runs (id, game, model, pathway, status, created: the columns that fit, the model id
    shortened in the middle) and, beside them, the highlighted run's settings and what the store
    holds for it (read, never computed). Where the details are hidden (narrow), the highlighted
    run's model is named whole under the table when its cell is shortened."""

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._shown: Optional[list] = None
        self._runs: list = []

    def compose(self) -> ComposeResult:
        yield RunsTable(id="runs", cursor_type="row", zebra_stripes=True)
        yield Static("", id="run-details")

    def on_mount(self) -> None:
        self.border_title = "Recent runs"
        self.border_subtitle = KEYS_NOTE
        table = self.query_one("#runs", FitTable)
        for key, drop, shorten in RUN_COLUMNS:
            table.add_column(key, key=key, drop=drop, shorten=shorten)

    @property
    def selected_run_id(self) -> Optional[str]:
        table = self.query_one("#runs", FitTable)
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key((table.cursor_row, 0))
        return row_key.value

    def show_runs(self, runs: list) -> None:
        """Show `runs` (with who drives them); the table is rebuilt only when they changed, the
        highlighted run is kept. The details are re-read either way (they follow the store)."""
        from s3gym_tui.store.leases import shown_status

        self._runs = list(runs)
        try:
            leases = self.app.store.leases.live_leases()
        except Exception:  # noqa: BLE001 - the status column is still right without drivers
            leases = {}
        statuses = {r.id: shown_status(r.status, leases.get(r.id)) for r in runs}
        shown = [(r.id, statuses[r.id]) for r in runs]
        if shown == self._shown:
            self.show_run_details(self.selected_run_id)
            return
        self._shown = shown
        table = self.query_one("#runs", FitTable)
        selected = self.selected_run_id
        table.clear()
        for run in runs:
            table.add_row(run.id, run.config.game, run.config.model, run.config.pathway, statuses[run.id],
                          short_created(run.created_at), key=run.id)
        if selected is not None and any(r.id == selected for r in runs):
            table.move_cursor(row=table.get_row_index(selected))
        self.border_title = f"Recent runs ({len(runs)})"
        self.show_run_details(self.selected_run_id)

    @on(FitTable.RowHighlighted, "#runs")
    def _highlighted(self, event: FitTable.RowHighlighted) -> None:
        self.show_run_details(event.row_key.value if event.row_key is not None else None)

    @on(FitTable.Fitted, "#runs")
    def _fitted(self, _event: FitTable.Fitted) -> None:
        self.show_run_details(self.selected_run_id)

    def _name_in_full(self, run_id: Optional[str]) -> None:
        """The highlighted run's whole model id where the table shortens it (also its tooltip), and
        the columns left out; else the keys of the panel."""
        table = self.query_one("#runs", FitTable)
        model = table.full_cell(run_id, "model") if run_id is not None else None
        shown = table.get_cell(run_id, "model") if run_id is not None and table.row_count else None
        cut = model is not None and str(shown) != str(model)
        table.tooltip = safe_text(f"{run_id}: {model}", one_line=True) if cut else None
        parts = [f"not shown: {', '.join(table.dropped)}"] if table.dropped else []
        if cut and not self.query_one("#run-details").display:
            room = self.size.width - 8 - sum(len(p) + 3 for p in parts) - len("model: ")
            parts.append(f"model: {shorten_middle(str(model), max(12, room))}")
        self.border_subtitle = safe_text(" · ".join(parts), one_line=True) if parts else KEYS_NOTE

    def show_run_details(self, run_id: Optional[str]) -> None:
        self._name_in_full(run_id)
        target = self.query_one("#run-details", Static)
        if run_id is None:
            target.update(Text("No runs yet: f6 starts one.", style="italic"))
            return
        from s3gym_tui.store.leases import shown_status

        try:
            with self.app.store.snapshot() as store:
                run = store.runs.get_run(run_id)
                episodes = store.episodes.list(run_id)
                checkpoints = store.checkpoints.list(run_id)
                summaries = store.summaries.list(run_id) if run.config.pathway == "summary" else []
                current = store.summaries.current_summary(run_id) if summaries else None
                lease = store.leases.lease(run_id)
        except Exception as exc:  # noqa: BLE001
            target.update(safe_text(f"Cannot read run {run_id}: {exc}"))
            return
        c = run.config
        explore = sum(1 for e in episodes if e.phase == "explore" and e.status == "finished")
        text = Text()
        text.append(f"{run.id}\n", style="bold")
        text.append(f"{shown_status(run.status, lease)} · created {short_created(run.created_at)}\n")
        if lease is not None and lease.alive():
            text.append(f"driven by {lease.describe()}\n", style="yellow")
        elif run.status_reason:
            text.append(f"{run.status_reason}\n", style="italic")
        text.append(f"{c.model} · {c.game} · pathway {c.pathway}\n")
        text.append(f"explore {explore}/{c.explore_episodes} · eval {c.eval_episodes} per checkpoint\n")
        text.append(f"seeds explore {c.explore_seed_base}.. · eval {c.eval_seed_base}..\n")
        text.append(f"history budget {c.history_budget:,} · step cap {c.step_cap}\n")
        if c.oracle_feedback:
            text.append("oracle feedback ablation (rewards shown)\n", style="bold")
        if checkpoints:
            text.append("\ncheckpoint means\n", style="bold")
            for cp in checkpoints:
                mean = f"{DASH} (no eval episodes)" if cp.mean is None else f"{cp.mean:.2f}"
                text.append(f"  x={cp.x:<3} {mean}\n")
            text.append(curve_line(c, checkpoints))
        if summaries:
            text.append(f"\nsummaries: {len(summaries)} version(s)\n", style="bold")
            if current is not None:
                pinned = " (pinned)" if current.pinned else ""
                text.append(f"  in use: v{current.version} by {current.author}{pinned}\n")
        if run.note:
            text.append(f"\n{run.note}\n", style="italic")
        target.update(safe_text(text, max_chars=4000, max_lines=60))  # ids, models, notes, reasons: stored text
