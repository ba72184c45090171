"""Training: a run's SFT datasets (kept, corrected and dropped steps with self-score, verifier reward and
drop reason, the selection's precision), the checkpoint curves and loss curves of the trainings made
from it (SFT and GRPO experts, distillation students), with negative transfer flagged, and the
consolidation matrix of a distillation study they belong to. Every number comes from
s3gym_tui.training.view."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Static

from s3gym_tui.messages import TrainingViewBuilt
from s3gym_tui.screens.analysis_common import AnalysisScreen, fmt, fmt_score, fmt_signed
from s3gym_tui.widgets.verdicts import judgement_text
from s3gym_tui.screens.live import LiveScreenMixin
from s3gym_tui.widgets.checkpoint_plot import Curve, CurvePlot
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.fit_table import FitTable
from s3gym_tui.widgets.table import DataTable
from s3gym_tui.textgate import safe_text
from s3gym_tui.training.device import SCOPE_LABELS, rss_scope
from s3gym_tui.training.learning_signal import signal_summaries
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.thread_work import thread_work

KIND_STYLE = {"kept": "bold green", "corrected": "bold yellow", "dropped": "dim"}


class TrainingScreen(LiveScreenMixin, AnalysisScreen):
    """Datasets and training checkpoints of one run (an exploring run, or a training run's source)."""

    DEFAULT_CSS = """
    TrainingScreen #training-status { height: auto; padding: 0 1; background: $boost; }
    TrainingScreen #training-main { height: 1fr; }
    TrainingScreen #training-left { width: 4fr; }
    TrainingScreen #training-right { width: 3fr; min-width: 36; }
    TrainingScreen #training-dataset { height: auto; padding: 0 1; border: round $primary-darken-2; }
    TrainingScreen #training-rows { height: 1fr; border: round $primary-darken-2; }
    TrainingScreen #training-curve { height: 1fr; min-height: 10; border: round $primary-darken-2; }
    TrainingScreen #training-checkpoints { height: auto; max-height: 12; border: round $primary-darken-2; }
    TrainingScreen #training-flags { height: auto; padding: 0 1; }
    TrainingScreen #training-loss { height: 1fr; min-height: 8; border: round $primary-darken-2; }
    TrainingScreen #training-matrix { height: auto; max-height: 12; border: round $primary-darken-2; }
    TrainingScreen #training-matrix-context { height: auto; padding: 0 1; }
    TrainingScreen.-short #training-curve, TrainingScreen.-short #training-loss { min-height: 6; }
    """

    BINDINGS = [
        Binding("d", "next_dataset", "Next dataset", id="training_next_dataset"),
        Binding("D", "previous_dataset", "Previous dataset", id="training_previous_dataset", show=False),
        Binding("t", "report", "Report", id="training_report"),
        Binding("f5", "refresh", "Refresh", id="training_refresh"),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.view = None
        self.dataset_index = 0
        self.error: Optional[str] = None

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static(id="training-status")
        with Horizontal(id="training-main"):
            with Vertical(id="training-left"):
                yield Static(id="training-dataset")
                yield FitTable(id="training-rows", cursor_type="row", zebra_stripes=True, note_in_subtitle=True)
            with Vertical(id="training-right"):
                yield CurvePlot("Checkpoint curve (strict mode)", "epoch", "mean eval score", id="training-curve")
                yield FitTable(id="training-checkpoints", cursor_type="row", zebra_stripes=True,
                               note_in_subtitle=True)
                yield Static(id="training-flags")
                yield CurvePlot("Training loss", "update", "loss", id="training-loss")
                yield DataTable(id="training-matrix", cursor_type="row", zebra_stripes=True)
                yield Static(id="training-matrix-context")
        yield KeyHints()

    def on_mount(self) -> None:
        self.sub_title = f"training · {self.run_id}"
        self.query_one("#training-rows").border_title = "Dataset rows"
        self.query_one("#training-curve").border_title = "Checkpoint curves"
        self.query_one("#training-checkpoints").border_title = "Checkpoints"
        self.query_one("#training-loss").border_title = "Loss curves"
        self.query_one("#training-matrix").border_title = "Consolidation matrix"
        # (label, drop order, narrowest a long text may become): the figures stay, words give way
        for label, drop, shorten in (("ep", 0, 0), ("step", 0, 0), ("kind", 3, 0), ("action", 0, 10),
                                     ("corrected to", 1, 10), ("self", 0, 0), ("reward", 0, 0), ("judgement", 2, 0)):
            self.query_one("#training-rows", FitTable).add_column(label, key=label, drop=drop, shorten=shorten)
        for label, drop, shorten in (("training", 0, 10), ("x", 0, 0), ("mean", 0, 0), ("Δ vs 0", 0, 0),
                                     ("transfer", 2, 0), ("unparsed", 3, 0), ("R mean", 4, 0), ("R repaired", 5, 0),
                                     ("G mean", 1, 0), ("gain", 1, 0)):
            self.query_one("#training-checkpoints", FitTable).add_column(label, key=label, drop=drop,
                                                                           shorten=shorten)
        self.query_one("#training-status", Static).update(Text("loading…", style="italic"))
        self.refresh_view()

    # ----- data -------------------------------------------------------------------------
    def refresh_view(self) -> None:
        self._build(self.run_id)

    def refresh_from_store(self) -> None:
        """Follow the store: datasets and epoch evaluations of a training driven elsewhere."""
        self._build(self.run_id)

    @thread_work(exclusive=True, group="training")
    def _build(self, run_id: str) -> None:
        from s3gym_tui.training.view import training_view

        try:
            store = self.app.store.for_thread()
            try:
                with store.snapshot():
                    view = training_view(store, run_id)
            finally:
                store.close()
        except Exception as exc:  # noqa: BLE001 - a bad id or a broken store is a message, not a crash
            self.post_message(TrainingViewBuilt(None, error=f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(TrainingViewBuilt(view))

    def on_training_view_built(self, message: TrainingViewBuilt) -> None:
        self.error = message.error
        if message.error:
            self.notify(f"Cannot show training data for {self.run_id}: {message.error}", severity="error")
        self.view = message.view
        if self.view is not None:
            self.dataset_index = min(self.dataset_index, max(len(self.view.datasets) - 1, 0))
        self._render_all()

    # ----- actions ----------------------------------------------------------------------
    def action_next_dataset(self) -> None:
        self._step_dataset(1)

    def action_previous_dataset(self) -> None:
        self._step_dataset(-1)

    def _step_dataset(self, delta: int) -> None:
        if self.view is None or len(self.view.datasets) < 2:
            self.notify("No other dataset for this run.")
            return
        self.dataset_index = (self.dataset_index + delta) % len(self.view.datasets)
        self._render_dataset()

    def action_report(self) -> None:
        if self.view is None or not self.view.trainings:
            self.notify("No training run yet: `s3gym train RUN` makes one.")
            return
        self.app.open_report([t.run.id for t in self.view.trainings])

    def action_refresh(self) -> None:
        self.refresh_view()

    # ----- rendering --------------------------------------------------------------------
    def _render_all(self) -> None:
        self._render_status()
        self._render_dataset()
        self._render_trainings()
        self._render_losses()
        self._render_matrix()

    def _render_status(self) -> None:
        status = self.query_one("#training-status", Static)
        if self.view is None:
            status.update(safe_text(f"Run {self.run_id}: {self.error or 'not found'}", style="bold red"))
            return
        source = self.view.source or self.view.run
        text = Text()
        text.append(source.id, style="bold")
        text.append(f"  {source.config.game} · {source.config.pathway} · {source.config.model}")
        if self.view.source is None:
            text.append("  (a distillation student: no source run)", style="dim")
        elif self.view.run.id != source.id:
            text.append(f"  (opened from training run {self.view.run.id})", style="dim")
        text.append(f"  · {len(self.view.datasets)} dataset(s) · {len(self.view.trainings)} training run(s)")
        status.update(safe_text(text))

    def _render_dataset(self) -> None:
        info = self.query_one("#training-dataset", Static)
        table = self.query_one("#training-rows", DataTable)
        table.clear()
        if self.view is None or not self.view.datasets:
            info.border_title = "Dataset"
            info.update(Text("No dataset for this run yet: `s3gym train RUN` builds one from its exploration "
                             "steps.", style="italic"))
            return
        dv = self.view.datasets[self.dataset_index]
        q, rule = dv.quality, dv.dataset.rule
        info.border_title = safe_text(f"Dataset {self.dataset_index + 1}/{len(self.view.datasets)} · {dv.dataset.id}",
                                      one_line=True)
        text = Text()
        text.append("rule ", style="bold")
        text.append(f"self-score > {rule.get('threshold', '?')} · correction {rule.get('correction') or 'none'}")
        if rule.get("max_examples"):
            text.append(f" · max {rule['max_examples']} examples")
        text.append("\n")
        for kind in ("kept", "corrected", "dropped"):
            text.append(f"{kind} {getattr(q, kind)}  ", style=KIND_STYLE[kind])
        text.append(f"(eval steps excluded: {rule.get('excluded_eval_steps', 0)})\n", style="dim")
        text.append("precision ", style="bold")
        text.append(f"{fmt(q.precision)} ({q.kept_positive}/{q.kept} kept steps with reward > 0)  ")
        text.append("recall ", style="bold")
        text.append(f"{fmt(q.recall)} ({q.kept_positive}/{q.positives} rewarded steps kept)")
        info.update(safe_text(text))  # the rule is stored JSON
        for row in dv.rows:
            table.add_row(str(row.episode_index), str(row.step_index), Text(row.kind, style=KIND_STYLE[row.kind]),
                          row.action, row.correction or "", fmt_score(row.self_score), fmt_score(row.reward),
                          judgement_text(self.app, row.self_score, row.reward), key=f"{row.episode_id}#{row.step_index}")

    def _render_trainings(self) -> None:
        plot = self.query_one(CurvePlot)
        table = self.query_one("#training-checkpoints", DataTable)
        flags = self.query_one("#training-flags", Static)
        table.clear()
        reports = self.view.trainings if self.view is not None else ()
        plot.show([Curve(r.run.id, tuple((row.epoch, row.mean) for row in r.rows)) for r in reports],
                  empty_text="no training run yet")
        text = Text()
        statuses = self.view.statuses if self.view is not None else {}
        from s3gym_tui.training.baseline import baseline_text, outcome_line, splits

        for report in reports:
            gains = {g.x: g.verdict for g in splits(report)}
            for row in report.rows:
                r = row.repair
                verdict = gains.get(row.epoch, "")
                table.add_row(report.run.id, str(row.epoch), fmt(row.mean), fmt_signed(row.delta),
                              Text("negative", style="bold red") if row.negative else "",
                              "—" if not row.replies else f"{row.unparsed}/{row.replies}",
                              "—" if r is None else fmt(r.mean), "—" if r is None else f"{r.repaired}/{r.steps}",
                              "—" if row.grammar is None else fmt(row.grammar.mean),
                              Text(verdict, style="bold yellow" if verdict == "format gain" else ""),
                              key=f"{report.run.id}:{row.epoch}")
            c = report.curve
            text.append(f"{report.run.id}: ", style="bold")
            status = statuses.get(report.training.id, report.training.status)
            text.append(f"{status} · ", style="bold yellow" if status == "interrupted" else "")
            method = report.training.method + (f", reward {report.training.reward}" if report.training.reward else "")
            text.append(f"{method} · as written: Avg {fmt(c.avg)} · Max {fmt(c.max)} · final Δ "
                        f"{fmt_signed(c.final_delta)} · AUC+ {fmt(c.auc_plus)}")
            if report.repaired_curve is not None:
                rc = report.repaired_curve
                text.append(f" · R (repaired, {report.repair_run.id}): Avg {fmt(rc.avg)} · Max {fmt(rc.max)} · "
                            f"final Δ {fmt_signed(rc.final_delta)} · AUC+ {fmt(rc.auc_plus)}", style="italic")
            if report.negative_transfer:
                text.append(f"  negative transfer at epoch {', '.join(map(str, report.negative_transfer))}",
                            style="bold red")
            text.append(f"\n  {baseline_text(report)}", style="dim")
            line = outcome_line(report)
            if line:
                text.append(f"\n  {line}", style="bold yellow" if line.startswith(("format", "no gain")) else "green")
            from s3gym_tui.training.view import grpo_recipe

            recipe = grpo_recipe(report.training)
            if recipe:
                text.append(f"\n  {recipe}", style="dim")
            short = (report.training.metrics or {}).get("completion_tokens_short")
            if short:
                text.append(f"\n  {short}", style="bold yellow")
            if report.serving:
                text.append(f"\n  served by {report.serving}", style="dim")
                if report.source_x0 is not None and report.source_x0[1] != report.serving:
                    text.append(f"; the source run's x = 0 ({fmt(report.source_x0[0])}) by {report.source_x0[1]}",
                                style="yellow")
            scope = rss_scope(report.training.metrics)
            if scope is not None:
                text.append(f"\n  peak RSS {report.training.metrics['peak_rss_mb']:.0f} MB: {SCOPE_LABELS[scope]}",
                            style="dim")
            text.append("\n")
            for summary in signal_summaries(report.losses):
                text.append(f"  {summary.line}", style="bold yellow" if summary.no_signal else "green")
                if summary.verdict:
                    text.append(f": {summary.verdict}", style="bold yellow")
                text.append("\n")
        flags.update(safe_text(text) if reports else Text("no training run from this run yet", style="italic"))

    def _render_losses(self) -> None:
        plot = self.query_one("#training-loss", CurvePlot)
        curves = []
        for curve in (self.view.losses if self.view is not None else ()):
            for phase in dict.fromkeys(p.phase for p in curve.points):
                curves.append(Curve(f"{curve.training_id} {phase}",
                                    tuple((p.step, p.loss) for p in curve.points if p.phase == phase)))
        plot.show(curves, empty_text="no loss recorded yet")

    def _render_matrix(self) -> None:
        table = self.query_one("#training-matrix", DataTable)
        table.clear(columns=True)
        matrices = self.view.matrices if self.view is not None else ()
        if not matrices:
            table.border_title = "Consolidation matrix (none: `s3gym distill EXPERT EXPERT` makes one)"
            self.query_one("#training-matrix-context", Static).update("")
            return
        matrix = matrices[0]
        table.border_title = safe_text(f"Consolidation matrix · {matrix.study.id}", one_line=True)
        table.border_subtitle = "norm. mean: per-game min-max over the game's score range"
        table.add_column("row", key="row")
        for game in matrix.games:
            table.add_column(game, key=game)
        table.add_column("norm. mean", key="norm")
        table.add_column("routed", key="routed")
        for row in matrix.rows:
            cells = []
            for game in matrix.games:
                c = row.cells[game]
                label = fmt(c.mean) if row.kind == "base" or c.delta is None else f"{fmt(c.mean)} ({fmt_signed(c.delta)})"
                cells.append(Text(label, style="bold red" if c.negative else ("bold" if row.own_game == game else "")))
            routed = "" if row.routed is None else " · ".join(f"{g} {n}" for g, n in row.routed.items())
            table.add_row(row.label, *cells, fmt(row.normalised_mean),
                          Text(routed, style="bold yellow" if row.unrouted else ""), key=row.training_id or row.kind)
        self._render_matrix_context(matrix.rows[0] if matrix.rows else None)

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "training-matrix" or self.view is None or not self.view.matrices:
            return
        key = event.row_key.value if event.row_key is not None else None
        row = next((r for r in self.view.matrices[0].rows if (r.training_id or r.kind) == key), None)
        self._render_matrix_context(row)

    def _render_matrix_context(self, row) -> None:
        """How the highlighted row's cells were played: episodes, step cap, serving path, routing."""
        context = self.query_one("#training-matrix-context", Static)
        if row is None:
            context.update("")
            return
        matrix = self.view.matrices[0]
        text = Text()
        text.append(f"{row.label}: ", style="bold")
        text.append(" · ".join(f"{g} {row.cells[g].context}" for g in matrix.games))
        paths = matrix.serving_paths
        if len(paths) > 1:
            text.append(f"\ncells are served differently: {'; '.join(paths)}", style="bold yellow")
        if row.unrouted:
            text.append(f"\nno prompt was routed to the expert of {', '.join(row.unrouted)}", style="bold yellow")
        context.update(safe_text(text))
