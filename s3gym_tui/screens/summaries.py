"""Summary curation: every version of a run's summary memory; edit, veto, pin, diff, test one."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Button, Label, Static, TextArea

from s3gym_tui.authors import human_author
from s3gym_tui.engine.compare import summary_diff
from s3gym_tui.engine.curation import effect_text, what_is_used
from s3gym_tui.messages import SummaryEdited, SummaryTested
from s3gym_tui.models import Run, Summary
from s3gym_tui.screens.analysis_common import AnalysisScreen, fmt
from s3gym_tui.screens.live import LiveScreenMixin
from s3gym_tui.widgets.summary_diff import SummaryDiff
from s3gym_tui.textgate import safe, safe_text
from s3gym_tui.widgets.fit_table import FitTable
from s3gym_tui.widgets.table import DataTable

from s3gym_tui.store.summaries import MAX_EDIT_SECTION_CHARS as MAX_SECTION_CHARS  # one limit, the store's
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.key_hints import KeyHints
SECTIONS = (("retain", "Strategies to retain"), ("avoid", "Mistakes to avoid"),
            ("next", "Directions for the next episode"))


def edit_problem(retain: str, avoid: str, next: str, parent: Optional[Summary] = None) -> Optional[str]:
    """Why an edit cannot be saved (None if it can)."""
    parts = {"retain": retain, "avoid": avoid, "next": next}
    if not any(p.strip() for p in parts.values()):
        return "An empty summary cannot be saved: write at least one section."
    for name, text in parts.items():
        if len(text) > MAX_SECTION_CHARS:
            return (f"The '{name}' section is {len(text):,} characters; the limit is "
                    f"{MAX_SECTION_CHARS:,} per section.")
    if parent is not None and (retain.strip(), avoid.strip(), next.strip()) == (
            parent.retain.strip(), parent.avoid.strip(), parent.next.strip()):
        return "Nothing changed: no new version saved."
    return None


def short_time(iso: str) -> str:
    """'2026-11-29T17:59:03.123+00:00' -> '2026-11-29 17:59' (UTC, as stored)."""
    return iso[:16].replace("T", " ") if iso else ""


class SummaryEditor(ModalScreen[Optional[tuple[str, str, str]]]):
    """Edit the three sections of a summary version; dismisses with the new texts or None."""

    DEFAULT_CSS = """
    SummaryEditor { align: center middle; }
    SummaryEditor #editor-box { width: 90%; max-width: 140; height: 90%; border: thick $primary;
                                background: $surface; padding: 0 1; }
    SummaryEditor #editor-fields { height: 1fr; }
    SummaryEditor .editor-label { margin-top: 1; text-style: bold; }
    SummaryEditor TextArea { height: 6; }
    SummaryEditor.-tall TextArea { height: 9; }
    SummaryEditor #editor-buttons { height: auto; align-horizontal: right; }
    SummaryEditor #editor-error { height: auto; color: $text-error; padding: 0 1; }
    SummaryEditor #editor-buttons Button { margin-left: 2; }
    """
    BINDINGS = [
        Binding("ctrl+s", "save", "Save", id="summary_editor_save", priority=True),
        Binding("escape", "cancel", "Cancel", id="summary_editor_cancel"),
    ]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (40, "-tall")]

    def __init__(self, summary: Summary) -> None:
        super().__init__()
        self.summary = summary
        # the sections as the gate shows them: what the person edits (an unedited one is "Nothing changed")
        self.shown = summary.model_copy(update={key: safe(getattr(summary, key), max_chars=None)
                                                for key, _ in SECTIONS})

    def compose(self) -> ComposeResult:
        with Vertical(id="editor-box"):
            yield Label(f"Edit summary v{self.summary.version} (saves a new human version; "
                        f"ctrl+s save, esc cancel)", id="editor-title")
            with VerticalScroll(id="editor-fields"):
                for key, label in SECTIONS:
                    yield Label(label, classes="editor-label")
                    yield TextArea(getattr(self.shown, key), id=f"edit-{key}", soft_wrap=True)
            yield Static("", id="editor-error")
            with Horizontal(id="editor-buttons"):
                yield Button("Save", variant="primary", id="editor-save")
                yield Button("Cancel", id="editor-cancel")

    def on_mount(self) -> None:
        self.query_one("#editor-error").display = False
        self.query_one("#edit-retain", TextArea).focus()

    def texts(self) -> tuple[str, str, str]:
        return tuple(self.query_one(f"#edit-{k}", TextArea).text for k, _ in SECTIONS)  # type: ignore

    def action_save(self) -> None:
        retain, avoid, nxt = self.texts()
        problem = edit_problem(retain, avoid, nxt, self.shown)
        error = self.query_one("#editor-error", Static)
        if problem:  # said in the editor, above its buttons: a notification would cover the fields
            error.update(Text(f"✗ {problem}", style="bold"))
            error.display = True
            return
        self.dismiss((retain, avoid, nxt))

    def action_cancel(self) -> None:
        self.dismiss(None)

    @on(Button.Pressed, "#editor-save")
    def _save_pressed(self) -> None:
        self.action_save()

    @on(Button.Pressed, "#editor-cancel")
    def _cancel_pressed(self) -> None:
        self.action_cancel()


class SummariesScreen(LiveScreenMixin, AnalysisScreen):
    """The versions of one run's summary memory and the person's controls over them."""
    AUTO_FOCUS = "#sum-versions"  # focused as the screen mounts (focusing later restyles and repaints)

    DEFAULT_CSS = """
    SummariesScreen #sum-status { height: auto; padding: 0 1; background: $boost; }
    SummariesScreen #sum-main { height: 1fr; }
    SummariesScreen #sum-left { width: 3fr; min-width: 40; }
    SummariesScreen #sum-right { width: 2fr; min-width: 30; border: round $primary-darken-2;
                                 scrollbar-gutter: stable; }  /* room kept for the bar: no re-wrap when it comes */
    SummariesScreen #sum-versions { height: 2fr; border: round $primary-darken-2; }
    SummariesScreen #sum-sources { height: 1fr; min-height: 5; border: round $primary-darken-2; }
    SummariesScreen #sum-detail { height: auto; padding: 0 1; }
    SummariesScreen SummaryDiff { display: none; }
    SummariesScreen.-diff SummaryDiff { display: block; }
    SummariesScreen.-diff #sum-detail { display: none; }
    """

    BINDINGS = [
        Binding("e", "edit", "Edit", id="summaries_edit"),
        Binding("v", "veto", "Veto/un-veto", id="summaries_veto"),
        Binding("p", "pin", "Pin/unpin", id="summaries_pin"),
        Binding("m", "mark", "Mark", id="summaries_mark"),
        Binding("d", "diff", "Diff", id="summaries_diff"),
        Binding("t", "test", "Test", id="summaries_test"),
        Binding("o", "open_source", "Open episode", id="summaries_open_source"),
        Binding("s", "stop_run", "Stop run", id="summaries_stop", show=False),
        Binding("l", "annotate", "Label (annotate)", id="summaries_annotate", show=False),
    ]

    def action_stop_run(self) -> None:
        """Stop the run shown while it runs (screens.run_control: the way Ctrl-C stops it)."""
        from s3gym_tui.screens.run_control import stop_run

        stop_run(self.app, self.run_id)

    def __init__(self, run_id: str, select: Optional[str] = None) -> None:
        super().__init__()
        self.run_id = run_id
        self.run: Optional[Run] = None
        self.versions: list[Summary] = []
        self.current: Optional[Summary] = None  # the version the agent goes by (models.summary_in_use)
        self.next_x: Optional[int] = None  # the first state a curation made now reaches (None: none)
        self.selected_id: Optional[str] = select  # None: the version in force
        self.marked_id: Optional[str] = None
        self.tests: dict[str, str] = {}  # summary id -> shown result ("testing...", "17.5")
        self.diff_lines: Optional[list[str]] = None

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static(id="sum-status")
        with Horizontal(id="sum-main"):
            with Vertical(id="sum-left"):
                yield FitTable(id="sum-versions", cursor_type="row", zebra_stripes=True, note_in_subtitle=True)
                yield FitTable(id="sum-sources", cursor_type="row", note_in_subtitle=True)
            with VerticalScroll(id="sum-right"):
                yield Static(id="sum-detail")
                yield SummaryDiff(id="sum-diff")
        yield KeyHints()

    def on_mount(self) -> None:
        self.sub_title = f"summaries · {self.run_id}"
        versions = self.query_one("#sum-versions", FitTable)
        versions.border_title = "Versions (▶ in force: the pinned, else the newest active)"
        # status and pin never give way; the time, the source count, then a test result do
        for label, key, drop, shorten in (("", "use", 0, 0), ("v", "v", 0, 0), ("author", "author", 0, 10),
                                          ("time UTC", "time", 4, 0), ("status", "status", 0, 0),
                                          ("pin", "pin", 0, 0), ("src", "src", 3, 0), ("test", "test", 2, 0)):
            versions.add_column(label, key=key, width=1 if key == "use" else None, drop=drop, shorten=shorten)
        sources = self.query_one("#sum-sources", FitTable)
        sources.border_title = "Source episodes (enter opens)"
        for key, drop, shorten in (("episode", 0, 12), ("seed", 2, 0), ("score", 0, 0), ("steps", 1, 0)):
            sources.add_column(key, key=key, drop=drop, shorten=shorten)
        self.query_one("#sum-right").border_title = "Selected version"
        try:
            self.run = self.app.store.runs.get_run(self.run_id)
        except Exception as exc:  # noqa: BLE001
            self.notify(f"Cannot open run {self.run_id}: {exc}", severity="error")
            self.query_one("#sum-status", Static).update(safe_text(str(exc), style="bold red"))
            return
        self.reload()
        versions.focus()

    # ----- data ---------------------------------------------------------------------------
    def refresh_from_store(self) -> None:
        """Follow the store: versions written by a live run or edited in another process."""
        if self.run is not None:
            try:
                self.reload()
            except Exception as exc:  # noqa: BLE001 - e.g. the run was deleted meanwhile
                self.query_one("#sum-status", Static).update(safe_text(str(exc), style="bold red"))

    def reload(self, select: Optional[str] = None) -> None:
        """Re-read the versions and the current one from the store and redraw."""
        with self.app.store.snapshot() as store:
            self.versions = store.summaries.list(self.run_id)
            self.current = store.summaries.current_summary(self.run_id)
            self.next_x = store.summaries.next_state(self.run_id)
        ids = [s.id for s in self.versions]
        if select is not None:
            self.selected_id = select
        if self.selected_id not in ids:
            self.selected_id = (self.current.id if self.current else (ids[-1] if ids else None))
        if self.marked_id not in ids:
            self.marked_id = None
        self._render_table()
        self._render_status()
        self._render_selected()

    def selected(self) -> Optional[Summary]:
        return next((s for s in self.versions if s.id == self.selected_id), None)

    def _render_status(self) -> None:
        text = Text()
        if self.run is not None:
            cfg = self.run.config
            text.append(self.run_id, style="bold")
            text.append(f"  {cfg.game} · {cfg.pathway} · {cfg.model}  ")
        text.append(f"{len(self.versions)} version(s)  ")
        if self.next_x is None:
            text.append("the run starts no more episodes", style="italic")
            if self.current is not None:
                pinned = ", pinned" if self.current.pinned else ""
                text.append(f" · in force: v{self.current.version}{pinned}", style="bold")
        else:
            text.append(f"state x={self.next_x} uses ", style="bold")
            text.append(what_is_used(self.versions, self.next_x), style="bold green")
        marked = next((s for s in self.versions if s.id == self.marked_id), None)
        if marked is not None:
            text.append(f"  marked v{marked.version}", style="cyan")
        self.query_one("#sum-status", Static).update(safe_text(text, one_line=True))

    def _render_table(self) -> None:
        table = self.query_one("#sum-versions", DataTable)
        shown = (tuple(self.versions), self.current.id if self.current else None, self.marked_id,
                 tuple(sorted(self.tests.items())))
        if shown == getattr(self, "_shown", None) and table.row_count == len(self.versions):
            return  # unchanged (a live refresh): keep the table, its cursor and its scroll
        self._shown = shown
        table.clear()
        for s in self.versions:
            use = Text("▶", style="bold green") if self.current and s.id == self.current.id else ""
            status = Text(s.status, style="red" if s.status == "vetoed" else "green")
            version = Text(f"v{s.version}", style="cyan bold" if s.id == self.marked_id else "")
            table.add_row(use, version, Text(safe(s.author, max_chars=60)), short_time(s.created_at)[5:], status,
                          "pinned" if s.pinned else "", str(len(s.source_episode_ids)),
                          self.tests.get(s.id, ""), key=s.id)
        if self.selected_id is not None and self.selected_id in [s.id for s in self.versions]:
            row = table.get_row_index(self.selected_id)
            if table.cursor_row != row:
                table.move_cursor(row=row, animate=False)
        if not self.versions:
            self.query_one("#sum-detail", Static).update(Text(
                "This run has no summary versions yet (only the summary pathway writes them).",
                style="italic"))

    def _render_selected(self) -> None:
        summary = self.selected()
        detail = self.query_one("#sum-detail", Static)
        sources = self.query_one("#sum-sources", DataTable)
        sources.clear()
        self.remove_class("-diff")
        self.diff_lines = None
        if summary is None:
            self.query_one("#sum-right").border_title = "Selected version"
            return
        self.query_one("#sum-right").border_title = safe_text(
            f"v{summary.version} · {safe(summary.author, one_line=True, max_chars=60)} · {short_time(summary.created_at)}",
            one_line=True)
        text = Text()
        facts = [summary.status]
        if summary.pinned:
            facts.append("pinned")
        if summary.parent_version is not None:
            facts.append(f"edited from v{summary.parent_version}" if summary.author.startswith("human")
                         else f"written from v{summary.parent_version}")
        if self.current and summary.id == self.current.id:
            facts.append("in force")
        text.append(" · ".join(facts) + "\n\n", style="dim")
        try:
            marks = self.app.store.annotations.list(summary_id=summary.id)
        except Exception:  # noqa: BLE001 - annotations never stop curation
            marks = []
        for mark in marks:
            text.append(f"[{mark.label}] ", style="yellow")
            text.append(f"{mark.note or '(no note)'} · {mark.author}\n", style="italic")
        if marks:
            text.append("\n")
        for key, label in SECTIONS:
            text.append(f"{label}:\n", style="bold")
            text.append((getattr(summary, key).strip() or "(empty)") + "\n\n")
        text.rstrip()
        detail.update(safe_text(text))  # the sections as a model or a person wrote them
        store = self.app.store
        for episode_id in summary.source_episode_ids:
            episode = store.episodes.find_episode(episode_id)
            if episode is None:
                sources.add_row(episode_id, "?", "?", "?", key=episode_id)
            else:
                sources.add_row(episode_id, str(episode.seed), fmt(episode.score),
                                str(episode.n_steps), key=episode_id)

    @on(DataTable.RowHighlighted, "#sum-versions")
    def _version_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row != event.data_table.cursor_row:
            return  # stale: posted while the table was filled (its first row), before the cursor moved on
        key = event.row_key.value if event.row_key is not None else None
        if key is not None and key != self.selected_id:
            self.selected_id = key
            self._render_selected()

    @on(DataTable.RowSelected, "#sum-sources")
    def _source_selected(self, event: DataTable.RowSelected) -> None:
        if event.row_key is not None and event.row_key.value:
            self.app.open_episode(event.row_key.value)

    # ----- actions ------------------------------------------------------------------------
    def _need_selection(self) -> Optional[Summary]:
        summary = self.selected()
        if summary is None:
            self.notify("No summary version selected.", severity="warning")
        return summary

    def _changed(self, summary: Summary, message: str) -> None:
        self.post_message(SummaryEdited(summary))
        self.reload(select=summary.id)
        self.notify(f"{message} {self._effect(summary)}", timeout=8)

    def action_annotate(self) -> None:
        """Put a label and a note on the selected version."""
        from s3gym_tui.screens.annotate_dialog import annotate

        summary = self.selected()
        if summary is None:
            return
        annotate(self, kind="summary", title=f"Label v{summary.version} of {self.run_id}", summary_id=summary.id,
                 done=self._render_selected)

    @property
    def author(self) -> str:
        """Who curates here: human:<the configured human_name>."""
        return human_author(self.app.settings.human_name)

    def _effect(self, summary: Summary) -> str:
        """When the action just logged for `summary` takes effect (from the stored record) and what
        the agent will then use (the versions just reloaded)."""
        store = self.app.store
        try:
            actions = [a for a in store.summaries.summary_actions(self.run_id) if a["summary_id"] == summary.id]
            lease = store.leases.lease(self.run_id)
            self.run = store.runs.get_run(self.run_id)
        except Exception:  # noqa: BLE001 - the message is a courtesy; the action is saved
            return ""
        if not actions or self.run is None:
            return ""
        last = actions[-1]
        return effect_text(self.run, last["effective_from_x"], bool(lease and lease.alive()),
                           self.versions, summary)

    def action_edit(self) -> None:
        summary = self._need_selection()
        if summary is None:
            return

        def saved(result: Optional[tuple[str, str, str]]) -> None:
            if result is None:
                return
            retain, avoid, nxt = result
            problem = edit_problem(retain, avoid, nxt, summary)
            if problem:  # also checked here: the editor is not the only caller
                self.notify(problem, severity="error")
                return
            try:
                new = self.app.store.summaries.edit_summary(summary.id, retain, avoid, nxt,
                                                            author=self.author)
            except Exception as exc:  # noqa: BLE001
                self.notify(f"Cannot save the edit: {exc}", severity="error")
                return
            self._changed(new, f"Saved v{new.version} (edited from v{summary.version}).")

        self.app.push_screen(SummaryEditor(summary), saved)

    def save_edit(self, retain: str, avoid: str, nxt: str) -> Optional[Summary]:
        """Save an edit of the selected version without the editor (used by scripts and tests)."""
        summary = self._need_selection()
        if summary is None:
            return None
        problem = edit_problem(retain, avoid, nxt, summary)
        if problem:
            self.notify(problem, severity="error")
            return None
        new = self.app.store.summaries.edit_summary(summary.id, retain, avoid, nxt,
                                                    author=self.author)
        self._changed(new, f"Saved v{new.version} (edited from v{summary.version}).")
        return new

    def action_veto(self) -> None:
        summary = self._need_selection()
        if summary is None:
            return
        status = "active" if summary.status == "vetoed" else "vetoed"
        try:
            new = self.app.store.summaries.update_summary_status(summary.id, status, author=self.author)
        except Exception as exc:  # noqa: BLE001
            self.notify(f"Cannot change v{summary.version}: {exc}", severity="error")
            return
        self._changed(new, f"v{new.version} {'vetoed' if status == 'vetoed' else 'restored'}.")

    def action_pin(self) -> None:
        summary = self._need_selection()
        if summary is None:
            return
        if not summary.pinned and summary.status == "vetoed":
            self.notify("A vetoed version cannot be pinned: un-veto it first (v).", severity="warning")
            return
        try:
            new = self.app.store.summaries.set_pinned(summary.id, not summary.pinned, author=self.author)
        except Exception as exc:  # noqa: BLE001
            self.notify(f"Cannot pin v{summary.version}: {exc}", severity="error")
            return
        self._changed(new, f"v{new.version} {'pinned' if new.pinned else 'unpinned'}.")

    def action_mark(self) -> None:
        summary = self._need_selection()
        if summary is None:
            return
        self.marked_id = None if self.marked_id == summary.id else summary.id
        self._render_table()
        self._render_status()
        if self.marked_id:
            self.notify(f"Marked v{summary.version}: select another version and press d to diff.")

    def action_diff(self) -> None:
        summary = self._need_selection()
        if summary is None:
            return
        marked = next((s for s in self.versions if s.id == self.marked_id), None)
        if marked is None or marked.id == summary.id:
            earlier = [s for s in self.versions if s.version < summary.version]
            if not earlier:
                self.notify("Nothing to diff against: mark a version with m first.", severity="warning")
                return
            parent = next((s for s in earlier if s.version == summary.parent_version), earlier[-1])
            old, new = parent, summary
        else:
            old, new = sorted((marked, summary), key=lambda s: s.version)
        self.diff_lines = summary_diff(old, new)
        self.query_one(SummaryDiff).show(self.diff_lines, f"v{old.version} → v{new.version}")
        self.query_one("#sum-right").border_title = f"Diff v{old.version} → v{new.version} (select a row to leave)"
        self.add_class("-diff")

    def action_open_source(self) -> None:
        sources = self.query_one("#sum-sources", DataTable)
        if sources.row_count == 0:
            self.notify("The selected version has no source episodes.", severity="warning")
            return
        key = sources.coordinate_to_cell_key((sources.cursor_row, 0)).row_key.value
        if key:
            self.app.open_episode(key)

    def action_test(self) -> None:
        summary = self._need_selection()
        if summary is None or self.run is None:
            return
        if self.run.config.eval_episodes < 1:
            self.notify("This run has no evaluation seeds (eval_episodes is 0).", severity="warning")
            return
        if self.tests.get(summary.id) == "testing…":
            self.notify(f"v{summary.version} is already being tested.")
            return
        self.tests[summary.id] = "testing…"
        self._render_table()
        self.notify(f"Testing v{summary.version} on {self.run.config.eval_episodes} evaluation seed(s)…")
        self._test_summary(summary)

    @work(group="summary-test", exit_on_error=False)
    async def _test_summary(self, summary: Summary) -> None:
        from s3gym_tui.engine.trial import try_summary

        try:
            trial = await try_summary(self.app.store, self.run, summary)
        except Exception as exc:  # noqa: BLE001 - a model failure is a message, not a crash
            self.post_message(SummaryTested(summary.id, error=f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(SummaryTested(summary.id, trial.scores, trial.mean))

    def on_summary_tested(self, message: SummaryTested) -> None:
        version = next((s.version for s in self.versions if s.id == message.summary_id), "?")
        if message.error:
            self.tests[message.summary_id] = "error"
            self.notify(f"Testing v{version} failed: {message.error}", severity="error")
        else:
            self.tests[message.summary_id] = fmt(message.mean, 2)
            scores = ", ".join(fmt(s, 2) for s in message.scores)
            self.notify(f"v{version}: mean verifier score {fmt(message.mean, 2)} ({scores}).")
        self._render_table()

    def on_summary_edited(self, message: SummaryEdited) -> None:
        """Another screen changed a version of this run: show it."""
        if message.summary.run_id == self.run_id and message.summary.id not in [s.id for s in self.versions]:
            self.reload()
