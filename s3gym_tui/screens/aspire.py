"""ASPIRE: watch a self-directed improvement run (issue 25) live. The decision timeline (tool, arguments,
result, cost, refused/error marks, compute category), the candidate tree (lineage, kind, rolled back or
retained), "claimed vs measured" side by side (hidden scores only once the run has ended) and the
compute split. A run started here is a process of its own (`s3gym aspire …`, engine/detached.py): the
screen follows it through the store, like every run."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.message import Message
from textual.widgets import Static, Tree

from s3gym_tui.screens.analysis_common import AnalysisScreen
from s3gym_tui.screens.live import LiveScreenMixin
from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.aspire_panels import (STATUS_STYLE, budget_text, candidate_text, claims_table,
                                             TREE_LEGEND, decision_cells, decision_text, split_line,
                                             split_table, status_text)
from s3gym_tui.widgets.candidate_tree import CandidateTree
from s3gym_tui.widgets.fit_table import FitTable
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.thread_work import thread_work

RUNS_LISTED = 200
# timeline columns: (key, label, drop order, narrowest when shortened)
TIMELINE = (("idx", "#", 0, 0), ("tool", "tool", 0, 0), ("args", "arguments", 1, 10), ("result", "result", 0, 14),
            ("calls", "calls", 4, 0), ("cost", "$", 3, 0), ("category", "compute", 2, 0))


@dataclass
class AspireRead(Message):
    """A read of the store for the ASPIRE screen (a thread worker): the runs, and the chosen one's
    records (decisions after `after` only: the timeline grows)."""

    runs: list
    aspire_id: Optional[str]  # the run read (the one asked for, or the newest when it is gone or none was)
    statuses: dict = field(default_factory=dict)  # run id -> status as a person reads it (store.leases)
    run: object = None
    decisions: list = field(default_factory=list)
    after: int = -1
    view: object = None  # engine.aspire_view.AspireView
    driver: str = ""  # who drives the run now ('' when no live process does)
    error: Optional[str] = None
    asked: Optional[str] = None  # the run this read was for


class AspireScreen(LiveScreenMixin, AnalysisScreen):
    """One ASPIRE run (the newest unless named), followed live; n starts a new one as its own process."""

    DEFAULT_CSS = """
    AspireScreen #asp-status { height: auto; padding: 0 1; background: $boost; }
    AspireScreen #asp-budget { height: auto; padding: 0 1; }
    AspireScreen #asp-main { height: 1fr; }
    AspireScreen #asp-runs { width: 46; display: none; border: round $primary-darken-2; }
    AspireScreen #asp-left { width: 1fr; }
    AspireScreen #asp-timeline { height: 1fr; border: round $primary-darken-2; }
    AspireScreen #asp-decision-box { height: auto; max-height: 9; border: round $primary-darken-2;
                                     scrollbar-gutter: stable; scrollbar-size-horizontal: 0; }
    AspireScreen #asp-decision { height: auto; padding: 0 1; }
    AspireScreen #asp-right { width: 50; }
    AspireScreen #asp-tree { height: auto; max-height: 12; border: round $primary-darken-2; }
    AspireScreen #asp-detail { height: 1fr; border: round $primary-darken-2; scrollbar-gutter: stable;
                               scrollbar-size-horizontal: 0; }
    AspireScreen #asp-candidate, AspireScreen #asp-claims { height: auto; padding: 0 1; }
    AspireScreen #asp-candidate { margin-top: 1; }
    AspireScreen #asp-split { height: auto; padding: 0 1; border: round $primary-darken-2; }
    /* 80 columns: the timeline above, the tree and the details side by side below; the split in one
       line; each header line one row (cut with …, whole in the decision/run dialogs) */
    AspireScreen.-narrow #asp-status, AspireScreen.-narrow #asp-budget { text-wrap: nowrap;
                                                                         text-overflow: ellipsis; }
    AspireScreen.-narrow #asp-main { layout: vertical; }
    AspireScreen.-narrow #asp-right { width: 1fr; height: 1fr; layout: horizontal; }
    AspireScreen.-narrow #asp-tree { width: 34; height: 1fr; max-height: 100%; }
    AspireScreen.-narrow #asp-detail { width: 1fr; }
    AspireScreen.-narrow #asp-split { display: none; }
    AspireScreen.-narrow #asp-timeline { height: 1fr; }
    AspireScreen.-narrow #asp-decision-box { max-height: 5; }
    AspireScreen.-narrow.-short #asp-decision-box { display: none; }
    AspireScreen.-wide.-short #asp-decision-box { max-height: 6; }
    AspireScreen.-wide.-short #asp-tree { max-height: 8; }
    AspireScreen.-huge #asp-runs { display: block; height: 1fr; }
    AspireScreen.-huge #asp-right { width: 64; }
    """
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (110, "-wide"), (170, "-huge")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]
    BINDINGS = [
        Binding("n", "new_run", "New run", id="aspire_new"),
        Binding("s", "stop", "Stop", id="aspire_stop"),
        Binding("r", "resume", "Resume", id="aspire_resume"),
        Binding("l", "pick_run", "Runs", id="aspire_pick"),
        Binding("c", "focus_candidates", "Candidates", id="aspire_candidates"),
        Binding("d", "focus_decisions", "Decisions", id="aspire_decisions", show=False),
        Binding("f8", "refresh", "Refresh", id="aspire_refresh", show=False),
    ]

    def __init__(self, aspire_id: Optional[str] = None) -> None:
        super().__init__()
        self.aspire_id = aspire_id
        self.runs: list = []
        self.statuses: dict = {}
        self.run = None
        self.decisions: list = []
        self.view = None
        self.driver = ""
        self.error: Optional[str] = None
        self.chosen_candidate: Optional[str] = None
        self.reads = 0  # completed reads (tests wait on it)
        self.busy = True  # until the first read is shown (tests/ui/settle.py)
        self._shown_runs: Optional[list] = None
        self._awaiting = None  # the ASPIRE process started here whose new run is not known yet

    # ----- layout -----------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static(id="asp-status")
        yield Static(id="asp-budget")
        with Horizontal(id="asp-main"):
            yield FitTable(id="asp-runs", cursor_type="row", zebra_stripes=True)
            with Vertical(id="asp-left"):
                yield FitTable(id="asp-timeline", cursor_type="row", zebra_stripes=True, note_in_subtitle=True)
                with VerticalScroll(id="asp-decision-box"):
                    yield Static(id="asp-decision")
            with Vertical(id="asp-right"):
                yield CandidateTree(id="asp-tree")
                with VerticalScroll(id="asp-detail"):
                    yield Static(id="asp-claims")
                    yield Static(id="asp-candidate")
                yield Static(id="asp-split")
        yield KeyHints()

    def on_mount(self) -> None:
        self.sub_title = "ASPIRE"
        for selector, title in (("#asp-runs", "ASPIRE runs"), ("#asp-timeline", "Decisions"),
                                ("#asp-decision-box", "Decision"), ("#asp-tree", "Candidates"),
                                ("#asp-detail", "Claimed vs measured"), ("#asp-split", "Compute split")):
            self.query_one(selector).border_title = title
        self.query_one("#asp-tree").border_subtitle = TREE_LEGEND
        runs = self.query_one("#asp-runs", FitTable)
        for key, label, drop, shorten in (("id", "run", 0, 18), ("status", "status", 0, 0),
                                          ("protocol", "protocol", 1, 0)):
            runs.add_column(label, key=key, drop=drop, shorten=shorten)
        timeline = self.query_one("#asp-timeline", FitTable)
        for key, label, drop, shorten in TIMELINE:
            timeline.add_column(label, key=key, drop=drop, shorten=shorten)
        self.query_one("#asp-status", Static).update(Text("reading the store…", style="italic"))
        self.action_refresh()
        timeline.focus()

    # ----- reading (a thread worker with its own connection) ----------------------------------
    def refresh_from_store(self) -> None:
        self.action_refresh()

    def action_refresh(self) -> None:
        after = self.decisions[-1].idx if self.decisions and self.run is not None else -1
        self._read(self.aspire_id, after)

    @thread_work(exclusive=True, group="aspire-read")
    def _read(self, aspire_id: Optional[str], after: int) -> None:
        from s3gym_tui.engine.aspire_view import aspire_view
        from s3gym_tui.store.leases import shown_status

        try:
            with self.app.store.for_thread() as store:
                runs = store.aspire.list_aspire_runs(limit=RUNS_LISTED)
                leases = store.leases.live_aspire_leases()
                statuses = {r.id: shown_status(r.status, leases.get(r.id)) for r in runs}
                chosen = aspire_id if any(r.id == aspire_id for r in runs) else (runs[0].id if runs else None)
                if chosen is None:
                    self.post_message(AspireRead(runs, None, statuses, asked=aspire_id))
                    return
                if chosen != aspire_id:
                    after = -1
                run = store.aspire.get_aspire_run(chosen)
                decisions = store.aspire.aspire_decisions(chosen, after=after)
                every = store.aspire.aspire_decisions(chosen) if after >= 0 else decisions
                view = aspire_view(run, every, store.aspire.aspire_candidates(chosen),
                                   store.aspire.aspire_claims(chosen), store.aspire.hidden_scores(chosen),
                                   store.aspire.compute_split(chosen))
                lease = leases.get(chosen)
                driver = lease.describe() if lease is not None else ""
        except Exception as exc:  # noqa: BLE001 - a message, not a crash
            self.post_message(AspireRead([], aspire_id, error=str(exc), asked=aspire_id))
            return
        self.post_message(AspireRead(runs, chosen, statuses, run, decisions, after, view, driver, asked=aspire_id))

    def on_aspire_read(self, message: AspireRead) -> None:
        self.reads += 1
        self.busy = False
        self.error = message.error
        if message.error:
            self._render_status()
            return
        self.runs = message.runs
        self.statuses = message.statuses
        if message.asked != self.aspire_id:
            # a read for the run shown before the person (or a started process) chose another: only its list
            self._render_runs()
            self._follow_started()
            return
        if message.aspire_id != self.aspire_id or message.after < 0:
            self.decisions = []
            self.query_one("#asp-timeline", FitTable).clear()
        self.aspire_id = message.aspire_id
        self.run, self.view, self.driver = message.run, message.view, message.driver
        self._render_runs()
        self._add_decisions([d for d in message.decisions
                             if not self.decisions or d.idx > self.decisions[-1].idx])
        self._render_status()
        self._render_candidates()
        self._follow_started()

    def _follow_started(self) -> None:
        """Once the run this app just started is stored, show it (its log names it, or its lease)."""
        child = self._awaiting
        if child is None:
            return
        run_id = child.find_run_id(self.app.store)
        if run_id is not None or not child.alive:
            self._awaiting = None
        if run_id is not None and run_id != self.aspire_id:
            self.show_run(run_id)

    # ----- rendering --------------------------------------------------------------------------
    @property
    def state(self) -> str:
        """running (a live process drives it), starting (this app's process, not yet driving),
        interrupted (marked running, its driver gone), or the stored status."""
        from s3gym_tui.screens.aspire_control import aspire_child

        if self.run is None:
            return "starting" if aspire_child(self.app, None) is not None else ""
        if self.driver:
            return "running"
        if self.run.status in ("finished", "failed"):  # its process may still be printing the outcome
            return self.run.status
        if aspire_child(self.app, self.run.id) is not None:
            return "starting"
        return "interrupted" if self.run.status == "running" else self.run.status

    def _render_status(self) -> None:
        status = self.query_one("#asp-status", Static)
        budget = self.query_one("#asp-budget", Static)
        if self.error:
            status.update(safe_text(f"Cannot read the ASPIRE runs: {self.error}", style="bold red"))
            return
        run = self.run
        if run is None:
            from s3gym_tui.screens.aspire_control import aspire_child

            starting = aspire_child(self.app, None)
            text = Text("No ASPIRE run yet: n starts one (a goal, a model, a protocol and a budget), or "
                        "`s3gym aspire` in a terminal; it shows up here live.", style="italic")
            if starting is not None:
                text = Text(f"Starting an ASPIRE run (PID {starting.pid})…", style="bold yellow")
            status.update(text)
            budget.update("")
            return
        state = self.state
        line = ""
        if self.driver:
            line = f"driven by {self.driver} · following it live (s: stop it)"
        elif state == "starting":
            line = "its process is starting (s: stop it)"
        elif state in ("interrupted", "created"):
            line = "r resumes it"
        text = status_text(run, state, line)
        status.update(text)
        line2 = budget_text(run.budget, run.usage)
        if self.has_class("-narrow"):
            line2.append("\n")
            line2.append_text(split_line(self.view))
        budget.update(safe_text(line2, max_chars=1000, max_lines=3))
        self.sub_title = f"ASPIRE · {run.id}"

    def _render_runs(self) -> None:
        shown = [(r.id, self.statuses.get(r.id, r.status)) for r in self.runs]
        if shown == self._shown_runs:
            return
        self._shown_runs = shown
        table = self.query_one("#asp-runs", FitTable)
        with table.prevent(FitTable.RowHighlighted):  # the rebuild is not a choice of the person's
            table.clear()
            for r, (_, status) in zip(self.runs, shown):
                table.add_row(r.id, Text(status, style=STATUS_STYLE.get(status.split(" ")[0], "")),
                              f"{r.protocol}{' · explicit' if r.explicit else ''}", key=r.id)
            if self.aspire_id is not None and any(r.id == self.aspire_id for r in self.runs):
                table.move_cursor(row=table.get_row_index(self.aspire_id))
        table.border_title = f"ASPIRE runs ({len(self.runs)})"

    def _add_decisions(self, fresh: list) -> None:
        table = self.query_one("#asp-timeline", FitTable)
        follow = not self.decisions or table.cursor_row >= table.row_count - 1  # at the end: stay there
        for d in fresh:
            table.add_row(*decision_cells(d), key=str(d.idx))
            self.decisions.append(d)
        if fresh and follow:
            table.move_cursor(row=table.row_count - 1)
        table.border_title = f"Decisions ({len(self.decisions)})"
        if fresh or not self.decisions:
            self._render_decision()

    def _render_decision(self) -> None:
        chosen = self.chosen_decision
        self.query_one("#asp-decision", Static).update(decision_text(chosen))
        self.query_one("#asp-decision-box").border_title = "Decision" if chosen is None else f"Decision #{chosen.idx}"

    @property
    def chosen_decision(self):
        table = self.query_one("#asp-timeline", FitTable)
        if not self.decisions or table.row_count == 0:
            return None
        key = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        return next((d for d in self.decisions if str(d.idx) == key), None)

    def _render_candidates(self) -> None:
        view = self.view
        tree = self.query_one(CandidateTree)
        if view is not None:
            tree.show(view.candidates)
            tree.border_title = f"Candidates ({len(view.candidates)})"
        self._render_candidate()
        split = self.query_one("#asp-split", Static)
        split.update(split_table(view))

    def _render_candidate(self) -> None:
        view = self.view
        chosen = view.candidate(self.chosen_candidate) if view is not None else None
        self.query_one("#asp-candidate", Static).update(candidate_text(chosen))
        self.query_one("#asp-claims", Static).update(claims_table(view, chosen))

    # ----- choosing ---------------------------------------------------------------------------
    @on(FitTable.RowHighlighted, "#asp-timeline")
    def _decision_highlighted(self, _event) -> None:
        self._render_decision()

    @on(Tree.NodeHighlighted, "#asp-tree")
    def _candidate_highlighted(self, event: Tree.NodeHighlighted) -> None:
        self.chosen_candidate = event.node.data
        self._render_candidate()

    @on(FitTable.RowHighlighted, "#asp-runs")
    def _run_highlighted(self, event) -> None:
        """The person moved to another run in the list. A highlight the list's own rebuild posted (the
        row under the cursor before the rebuild) is not the person's choice: only the row under the
        cursor now counts."""
        table = self.query_one("#asp-runs", FitTable)
        chosen = event.row_key.value if event.row_key is not None else None
        if chosen is None or table.row_count == 0:
            return
        now = table.coordinate_to_cell_key((table.cursor_row, 0)).row_key.value
        if chosen == now and chosen != self.aspire_id:
            self.show_run(chosen)

    def show_run(self, aspire_id: str) -> None:
        self.aspire_id = aspire_id
        self.chosen_candidate = None
        self.decisions = []
        self.query_one("#asp-timeline", FitTable).clear()
        self._read(aspire_id, -1)

    def action_pick_run(self) -> None:
        from s3gym_tui.screens.dialogs import EpisodePickerDialog

        if not self.runs:
            self.notify("No ASPIRE run yet: n starts one.")
            return
        labels = [(r.id, f"{r.id} · {self.statuses.get(r.id, r.status)} · {r.protocol}"
                         f"{' · explicit' if r.explicit else ''} · {r.model}") for r in self.runs]

        def chosen(aspire_id: Optional[str]) -> None:
            if aspire_id:
                self.show_run(aspire_id)

        self.app.push_screen(EpisodePickerDialog("ASPIRE runs", labels), chosen)

    def action_focus_candidates(self) -> None:
        self.query_one(CandidateTree).focus()

    def action_focus_decisions(self) -> None:
        self.query_one("#asp-timeline").focus()

    # ----- the run's process ------------------------------------------------------------------
    def action_new_run(self) -> None:
        from s3gym_tui.screens.aspire_control import new_aspire_run

        new_aspire_run(self.app, started=self._started)

    def _started(self, child) -> None:
        self._awaiting = child
        self._render_status()
        self.action_refresh()

    def action_stop(self) -> None:
        from s3gym_tui.screens.aspire_control import stop_aspire

        if self.run is not None:
            stop_aspire(self.app, self.run.id)

    def action_resume(self) -> None:
        from s3gym_tui.screens.aspire_control import resume_aspire

        if self.run is not None:
            resume_aspire(self.app, self.run, started=lambda _child: self.action_refresh())
