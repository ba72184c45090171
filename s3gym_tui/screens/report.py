"""Report: the protocol tables of chosen runs (curve metrics, Summary-vs-History Delta NABA,
self-judging, coupling) and their checkpoint curves; every number comes from engine.report."""

from __future__ import annotations

from typing import Optional, Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, VerticalScroll
from textual.widgets import Label, SelectionList, Static
from textual.widgets.selection_list import Selection

from s3gym_tui.engine.glossary import (DASH, NMAE_SCALE, OUT_OF_RANGE_MARK, UNDEFINED, definitions, fmt_metric,
                                      fmt_share, fmt_signed, reasons, why_text)
from s3gym_tui.engine.judging import range_text
from s3gym_tui.engine.report import RunReport, on_game_scales, run_report, summary_vs_history
from s3gym_tui.engine.report_tables import cache_why
from s3gym_tui.messages import ReportBuilt
from s3gym_tui.models import Run
from s3gym_tui.screens.analysis_common import AnalysisScreen
from s3gym_tui.screens.live import LiveScreenMixin
from s3gym_tui.widgets.checkpoint_plot import Curve, CurvePlot
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.fit_table import FitTable
from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.verdicts import mark_colour
from s3gym_tui.widgets.thread_work import thread_work

RUN_LIST_LIMIT = 500
SETTLE_S = 1.0  # how long the report keeps the table it was opened at in place while its tables settle


def num(value, signed: bool = False) -> Text:
    """A metric cell: the one number format, right-aligned."""
    return Text(fmt_signed(value) if signed else fmt_metric(value), justify="right")


def table_note(table: str, undefined: bool = True) -> Text:
    """What the columns of a report table mean (engine.glossary), shown under the table, and why a
    figure of it can be undefined (the reasons its `why —` column names)."""
    text = Text()
    for k, (name, meaning) in enumerate(definitions(table)):
        if k:
            text.append("  ·  ")
        text.append(name, style="bold")
        text.append(f" {meaning}")
    if undefined:
        text.append(f"\n{UNDEFINED}: ")
        for k, (name, meaning) in enumerate(reasons(table)):
            if k:
                text.append("  ·  ")
            text.append(name, style="bold italic")
            text.append(f": {meaning}")
    return text


def why(value) -> Text:
    """A row's `why —` cell: its undefined figures and their reason (blank when all are defined)."""
    return Text(value or "", style="italic")


def build_reports(store, run_ids: Sequence[str]) -> tuple[list[RunReport], list]:
    """The engine's reports for these runs (in the given order, NMAE on one scale per game) and their
    Delta NABA rows."""
    reports = on_game_scales([run_report(store, store.runs.get_run(run_id)) for run_id in run_ids])
    return reports, summary_vs_history(reports)


# each table's columns: (header, drop order: 0 always shown, else the highest first; narrowest a long
# text may be shortened to). The figures themselves (y0 aside) never give way; the why column first.
TABLES = (
    ("curve", (("run", 0, 0), ("game", 5, 0), ("pathway", 0, 0), ("model", 6, 14), ("ckpts", 7, 0),
               ("y0", 3, 0), ("Avg", 0, 0), ("Max", 0, 0), ("AUC+", 0, 0), ("NABA", 0, 0), ("why —", 9, 0))),
    ("delta", (("game", 0, 0), ("pairs", 3, 0), ("wins", 0, 0), ("losses", 0, 0), ("ties", 0, 0),
               ("mean ΔNABA", 0, 0), ("skipped", 2, 0), ("why —", 9, 0))),
    ("judging", (("run", 0, 0), ("phase", 0, 0), ("n", 3, 0), ("missing", 4, 0), ("agreement", 0, 0),
                 ("NMAE", 0, 0), ("over", 2, 0), ("under", 2, 0), ("out of range", 0, 0), ("out %", 5, 0),
                 ("why —", 9, 0))),
    ("coupling", (("run", 0, 0), ("blocks", 3, 0), ("used", 2, 0), ("corr(A, g)", 0, 0), ("corr(−E, g)", 0, 0),
                  ("why —", 9, 0))),
    ("usage", (("run", 0, 0), ("calls", 4, 0), ("tok in", 3, 0), ("tok out", 3, 0), ("cached tok", 5, 0),
               ("cached", 0, 0), ("cost $", 0, 0), ("why —", 9, 0))),
)
TITLES = {"curve": "Curve metrics (per run)", "delta": "Summary vs History: Delta NABA (Summary − History)",
          "judging": "Self-judging (exploration and evaluation steps)",
          "coupling": "Judgement-improvement coupling (exploration blocks)",
          "usage": "Model calls (per run): tokens, prompt cache, cost"}
NO_PAIR = "no Summary/History pair of the same model and game among these runs"

CURVE_NAMES = {"y0": "y0", "avg": "Avg", "max": "Max", "auc_plus": "AUC+", "naba": "NABA"}
JUDGING_NAMES = {"agreement": "agreement", "nmae": "NMAE", "over": "over", "under": "under",
                 "out_of_range_share": "out %"}
COUPLING_NAMES = {"corr_agreement": "corr(A, g)", "corr_neg_nmae": "corr(−E, g)"}


class ReportScreen(LiveScreenMixin, AnalysisScreen):
    """Protocol tables and curves for a chosen set of runs."""

    DEFAULT_CSS = """
    ReportScreen #report-main { height: 1fr; }
    ReportScreen #report-runs { width: 36; height: 1fr; border: round $primary-darken-2; }
    ReportScreen.-hide-runs #report-runs { display: none; }
    ReportScreen #report-body { width: 1fr; scrollbar-gutter: stable; }  /* no width change (and replot) when the bar comes */
    ReportScreen #report-status { height: auto; padding: 0 1; background: $boost; }
    ReportScreen #report-plot { height: 16; border: round $primary-darken-2; }
    ReportScreen #report-curves { width: 1fr; height: 1fr; }
    ReportScreen #report-legend { width: 34; height: 1fr; padding: 0 1; border-left: vkey $foreground 20%; }
    ReportScreen .report-title { margin-top: 1; padding: 0 1; text-style: bold; width: 1fr; height: auto; }
    ReportScreen #report-body DataTable { height: auto; max-height: 20; margin: 0 1; }
    ReportScreen .report-note { height: auto; margin: 0 2; color: $text-muted; }
    ReportScreen.-short #report-plot { height: 11; }
    ReportScreen.-narrow #report-legend { width: 24; }
    """
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    BINDINGS = [
        Binding("a", "toggle_runs", "Add/remove runs", id="report_runs"),
        Binding("f5", "refresh", "Refresh", id="report_refresh"),
        Binding("s", "stop_run", "Stop run", id="report_stop", show=False),
    ]

    def action_stop_run(self) -> None:
        """Stop the run shown while it runs (screens.run_control: the way Ctrl-C stops it)."""
        from s3gym_tui.screens.run_control import live_lease, stop_run

        for run_id in self.run_ids:
            if live_lease(self.app, run_id) is not None or len(self.run_ids) == 1:
                stop_run(self.app, run_id)

    def __init__(self, run_ids: Sequence[str] = (), at: Optional[str] = None) -> None:
        super().__init__()
        self.run_ids: list[str] = list(dict.fromkeys(run_ids))
        self.at = at  # a table (TABLES' name) to scroll to and focus once the report is first shown
        self._placing = False
        self.reports: list[RunReport] = []
        self._asked = 0  # builds asked for; the latest one shown is _shown
        self._shown = 0
        self.deltas: list = []
        self.all_runs: list[Run] = []

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="report-main"):
            yield SelectionList[str](id="report-runs")
            with VerticalScroll(id="report-body"):
                yield Static(id="report-status")
                with Horizontal(id="report-plot"):
                    yield CurvePlot("Checkpoint curves", "exploration episodes x", "mean eval score",
                                    legend="beside", id="report-curves")
                    yield Static(id="report-legend")
                for name, _columns in TABLES:
                    yield Label(TITLES[name], id=f"report-{name}-title", classes="report-title")
                    yield FitTable(id=f"report-{name}-table", cursor_type="row", zebra_stripes=True)
                    yield Static(table_note(name), classes="report-note")
                    if name == "judging":
                        yield Static(id="report-scale", classes="report-note")
        yield KeyHints()

    def on_mount(self) -> None:
        self.sub_title = "report"
        self.query_one("#report-runs").border_title = "Runs (space toggles)"
        self.query_one("#report-plot").border_title = "Checkpoint curves"
        for name, columns in TABLES:
            table = self.query_one(f"#report-{name}-table", FitTable)
            for label, drop, shorten in columns:
                table.add_column(label, key=label, drop=drop, shorten=shorten)
        self._fill_run_list()
        if self.run_ids:  # runs were chosen: tables first; `a` shows the list to add or remove runs
            self.add_class("-hide-runs")
        self.refresh_report()

    def _fill_run_list(self) -> None:
        try:
            self.all_runs = self.app.store.runs.list_runs(limit=RUN_LIST_LIMIT, damaged=[])
        except Exception as exc:  # noqa: BLE001
            self.notify(f"Cannot list runs: {exc}", severity="error")
            self.all_runs = []
        known = {r.id for r in self.all_runs}
        for run_id in self.run_ids:  # a chosen run older than the list's window
            if run_id not in known:
                try:
                    self.all_runs.append(self.app.store.runs.get_run(run_id))
                except Exception:  # noqa: BLE001
                    pass
        shown = tuple((r.id, r.id in self.run_ids) for r in self.all_runs)
        if shown == getattr(self, "_shown_runs", None):
            return  # unchanged (a live refresh): keep the list and its cursor
        self._shown_runs = shown
        runs = self.query_one("#report-runs", SelectionList)
        runs.clear_options()
        runs.add_options([Selection(safe_text(f"{r.id} ({r.config.game}/{r.config.pathway})", one_line=True), r.id,
                                    r.id in self.run_ids)
                          for r in self.all_runs])

    # ----- data -------------------------------------------------------------------------
    def refresh_from_store(self) -> None:
        """Follow the store quietly (no "computing…"): new checkpoints of live runs, new runs."""
        self._fill_run_list()
        self._build(list(self.run_ids))

    def refresh_report(self) -> None:
        missing = [r for r in self.run_ids if r not in {run.id for run in self.all_runs}]
        for run_id in missing:
            self.notify(f"No run {run_id}.", severity="warning")
            self.run_ids.remove(run_id)
        self.query_one("#report-status", Static).update(Text("computing…", style="italic"))
        self._build(list(self.run_ids))

    @property
    def busy(self) -> bool:
        """True while a build that was asked for has not been shown yet (or the report, opened at a table,
        is being put in place)."""
        return self._shown < self._asked or self.at is not None

    def _build(self, run_ids: list[str]) -> None:
        self._asked += 1
        self._build_worker(run_ids, self._asked)

    @thread_work(exclusive=True, group="report")
    def _build_worker(self, run_ids: list[str], generation: int) -> None:
        try:
            store = self.app.store.for_thread()
            try:
                with store.snapshot():  # one consistent state, whatever a live run writes meanwhile
                    reports, deltas = build_reports(store, run_ids)
            finally:
                store.close()
        except Exception as exc:  # noqa: BLE001
            self.post_message(ReportBuilt([], [], error=f"{type(exc).__name__}: {exc}", generation=generation))
            return
        self.post_message(ReportBuilt(reports, deltas, generation=generation))

    def on_report_built(self, message: ReportBuilt) -> None:
        if message.generation < self._asked:
            return  # an older build (the runs or the store changed since): the latest one follows
        self._shown = message.generation
        if message.error:
            self.notify(f"Cannot build the report: {message.error}", severity="error")
        self.reports, self.deltas = list(message.reports), list(message.deltas)
        self._render_report()
        if self.at is not None and not self._placing:
            self._placing = True
            self.call_after_refresh(self._go_to_table)
            self.set_timer(SETTLE_S, self._placed)

    def _placed(self) -> None:
        """The tables have settled: the last placement, then the report is the person's to scroll."""
        self._go_to_table()
        self.at = None

    def _go_to_table(self) -> None:
        """Scroll the body so that table `at` starts at the top, and focus it. Asked again while the
        tables above it are fitted to their rows (their heights change), for SETTLE_S."""
        if self.at is None or not self.is_mounted:
            return
        title = self.query_one(f"#report-{self.at}-title")
        body = self.query_one("#report-body", VerticalScroll)
        body.scroll_to(y=title.virtual_region.y, animate=False, immediate=True)
        table = self.query_one(f"#report-{self.at}-table")
        if self.focused is not table:
            table.focus(scroll_visible=False)

    @on(SelectionList.SelectedChanged, "#report-runs")
    def _runs_changed(self, event: SelectionList.SelectedChanged) -> None:
        selected = set(event.selection_list.selected)
        ordered = [r for r in self.run_ids if r in selected]
        ordered += [r.id for r in self.all_runs if r.id in selected and r.id not in ordered]
        if ordered != self.run_ids:
            self.run_ids = ordered
            self.refresh_report()

    def action_toggle_runs(self) -> None:
        self.toggle_class("-hide-runs")
        if not self.has_class("-hide-runs"):
            self.query_one("#report-runs").focus()

    def action_refresh(self) -> None:
        self._fill_run_list()
        self.refresh_report()

    # ----- rendering --------------------------------------------------------------------
    def _render_report(self) -> None:
        status = Text()
        if not self.reports:
            status.append("No run chosen: press a and pick runs with space.", style="italic")
        else:
            status.append(f"{len(self.reports)} run(s)", style="bold")
            games_ = sorted({r.run.config.game for r in self.reports})
            status.append(f" · {', '.join(games_)} · AUC+ compares only within a game")
            failures = sum(r.replicas.failures for r in self.reports)
            if failures:
                failovers = sum(r.replicas.failovers for r in self.reports)
                status.append(f" · replica faults {failures}, failovers {failovers}", style="yellow")
            labels: dict[str, int] = {}
            try:
                for r in self.reports:
                    for mark in self.app.store.annotations.list(run_id=r.run.id):
                        labels[mark.label] = labels.get(mark.label, 0) + 1
            except Exception:  # noqa: BLE001 - annotations never stop a report
                labels = {}
            if labels:  # what people marked on these runs (/ finds them: label:<name>)
                status.append(" · marked: " + ", ".join(f"{k} {v}" for k, v in sorted(labels.items())),
                              style="yellow")
        self.query_one("#report-status", Static).update(safe_text(status))
        curves = [Curve(r.run.id if len(r.run.id) <= 30 else "…" + r.run.id[-29:], r.points)
                  for r in self.reports]
        plot = self.query_one(CurvePlot)
        plot.show(curves, empty_text="no checkpoints")
        self.query_one("#report-legend", Static).update(plot.legend_text())

        table = self.query_one("#report-curve-table", FitTable)
        table.clear()
        for r in self.reports:
            c, cfg = r.curve, r.run.config
            model = cfg.model + (" · grammar" if cfg.decoding == "grammar" else "")  # it changes what is measured
            table.add_row(r.run.id, cfg.game, cfg.pathway, model, f"{c.n}/{len(r.points)}", num(c.y0),
                          num(c.avg), num(c.max), num(c.auc_plus), num(c.naba),
                          why(why_text(c.why, CURVE_NAMES, CURVE_NAMES)), key=r.run.id)

        table = self.query_one("#report-delta-table", FitTable)
        table.clear()
        self._title("delta", table)
        for row in self.deltas:
            table.add_row(Text(row.game, style="bold" if row.game == "overall" else ""), str(row.n),
                          str(row.wins), str(row.losses), str(row.ties), num(row.mean_delta, signed=True),
                          str(row.skipped), why(why_text(row.why, {"mean_delta": "mean ΔNABA"})), key=row.game)

        table = self.query_one("#report-judging-table", FitTable)
        table.clear()
        for r in self.reports:
            for phase, j in (("explore", r.judging), ("eval", r.judging_eval)):
                table.add_row(r.run.id, phase, str(j.n), str(j.missing), num(j.agreement), num(j.nmae),
                              num(j.over), num(j.under), self._out_of_range_cell(j.out_of_range),
                              Text(fmt_share(j.out_of_range_share), justify="right"),
                              why(why_text(j.why, JUDGING_NAMES, JUDGING_NAMES)), key=f"{r.run.id}:{phase}")
        self.query_one("#report-scale", Static).update(self._scale_text())

        table = self.query_one("#report-coupling-table", FitTable)
        table.clear()
        for r in self.reports:
            cp = r.coupling
            table.add_row(r.run.id, str(len(cp.blocks)), str(cp.n_used), num(cp.corr_agreement),
                          num(cp.corr_neg_nmae), why(why_text(cp.why, COUPLING_NAMES)), key=r.run.id)

        table = self.query_one("#report-usage-table", FitTable)
        table.clear()
        for r in self.reports:
            u = r.usage
            priced = u.calls > u.unpriced
            table.add_row(r.run.id, Text(f"{u.calls:,}", justify="right"), Text(f"{u.tokens_in:,}", justify="right"),
                          Text(f"{u.tokens_out:,}", justify="right"),
                          Text(f"{u.tokens_cached:,}" if u.cache_calls else DASH, justify="right"),
                          Text(fmt_share(u.cache_share), justify="right"),
                          Text(f"{u.cost:.4f}" if priced else DASH, justify="right"), why(cache_why(r)),
                          key=r.run.id)

    @on(FitTable.Fitted)
    def _fitted(self, event: FitTable.Fitted) -> None:
        name = (event.table.id or "").removeprefix("report-").removesuffix("-table")
        if name in TITLES:
            self._title(name, event.table)
        if self.at is not None and self._placing:
            self.call_after_refresh(self._go_to_table)  # a table's height changed: the place moved

    def _title(self, name: str, table: FitTable) -> None:
        """A table's title, with the columns it leaves out at this width named (as the CLI does)."""
        text = Text(TITLES[name], style="bold")
        if name == "delta" and not self.deltas:
            text.append(f" · {NO_PAIR}", style="dim italic")
        if table.dropped:
            text.append(f" · {table.note()} (a wider terminal, or s3gym report)", style="not bold italic")
        self.query_one(f"#report-{name}-title", Label).update(text)

    def _out_of_range_cell(self, count) -> Text:
        """How many self-scores were out of range: bold in the mark's colour when any was."""
        if count is None:
            return Text(DASH, justify="right")
        return Text(f"{count:,}", justify="right", style=f"bold {mark_colour(self.app)}" if count else "")

    def _scale_text(self) -> Text:
        """The NMAE scale of each game shown (the engine's, carried by every report), and what one step of
        each can pay (the self-scores outside it are the table's `out of range`)."""
        text = Text()
        text.append("NMAE scale", style="bold")
        text.append(f": {NMAE_SCALE}.")
        scales = {r.run.config.game: r.scale for r in self.reports if r.scale is not None}
        for game, scale in sorted(scales.items()):
            bounds = (f"s {fmt_metric(scale.s[0])}..{fmt_metric(scale.s[1])}, "
                      f"r {fmt_metric(scale.r[0])}..{fmt_metric(scale.r[1])} over {scale.n} steps"
                      if scale.s is not None else "no self-scored step")
            text.append(f"\n  {game}: {bounds}")
        games_ = sorted({r.run.config.game for r in self.reports})
        if games_:
            text.append("\nOut of range", style="bold")
            text.append(": the self-score states the step's immediate reward, so one outside what one step of the "
                        f"game can pay cannot be right (marked {OUT_OF_RANGE_MARK} on Play and Compare). One step pays:")
            for game in games_:
                text.append(f"\n  {game}: {range_text(game)}")
        return text
