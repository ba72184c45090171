"""Search (`/` from any screen): words and filters over every stored step, summary version and note,
results grouped by episode with the matching words highlighted (through the text gate). Enter opens
the step in replay, `c` compares its episode with its pair, `m` annotates it."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.message import Message
from textual.widgets import Input, OptionList, ProgressBar, Static
from textual.widgets.option_list import Option

from s3gym_tui.engine.finding import SYNTAX
from s3gym_tui.highlight import highlighted
from s3gym_tui.screens.analysis_common import AnalysisScreen, fmt
from s3gym_tui.store.search import SearchHit, SearchResult
from s3gym_tui.textgate import safe
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.thread_work import thread_work

PROGRESS_FROM = 5_000  # steps waiting to be indexed from which the screen shows a progress bar
LIMIT = 200
MIN_LINE = 20  # a result's line keeps at least this many cells beside its indent


@dataclass
class HangingLines:
    """A search result: lines each wrapped under its own indent at the width it is drawn (a long
    reply line stays in its result's column instead of running back to the edge of the box)."""

    lines: list[tuple[int, Text]]  # (indent, line)

    @property
    def text(self) -> Text:
        """The lines as one Text (unwrapped)."""
        return Text("\n").join(Text(" " * indent) + line for indent, line in self.lines)

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        width = options.max_width
        for indent, line in self.lines:
            indent = min(indent, max(0, width - MIN_LINE))
            for part in line.wrap(console, max(1, width - indent)):
                part.rstrip()
                yield Text(" " * indent) + part

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        widest = max((indent + line.cell_len for indent, line in self.lines), default=0)
        return Measurement(min(widest, max(indent for indent, _ in self.lines) + MIN_LINE), widest)


@dataclass
class SearchAnswered(Message):
    result: Optional[SearchResult]
    error: Optional[str] = None


@dataclass
class IndexProgress(Message):
    done: int
    total: int


class SearchScreen(AnalysisScreen):
    """One line of words and filters; the answer grouped by episode."""

    AUTO_FOCUS = "#search-input"
    DEFAULT_CSS = """
    SearchScreen #search-input { margin: 0 1; }
    SearchScreen #search-status { height: auto; padding: 0 1; background: $boost; }
    SearchScreen #search-progress { padding: 0 1; display: none; }
    SearchScreen #search-results { height: 1fr; border: round $primary-darken-2; }
    """
    BINDINGS = [
        Binding("slash", "focus_input", "Search box", id="search_focus", show=False),
        Binding("c", "compare", "Compare", id="search_compare"),
        Binding("m", "annotate", "Mark", id="search_annotate"),
        Binding("down", "to_results", "Results", id="search_down", show=False),
    ]

    def __init__(self, query: str = "") -> None:
        super().__init__()
        self.query_text = query
        self.result: Optional[SearchResult] = None
        self.hits: list[SearchHit] = []
        self.busy = False

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Input(value=self.query_text, placeholder="words and filters, e.g. grudge game:trust verdict:over",
                    id="search-input")
        yield Static(Text(f"Enter searches. {SYNTAX}", style="dim"), id="search-status")
        yield ProgressBar(id="search-progress", show_eta=False)
        yield OptionList(id="search-results")
        yield KeyHints()

    def on_mount(self) -> None:
        self.sub_title = "search"
        self.query_one("#search-results", OptionList).border_title = "Results (newest first, by episode)"
        if self.query_text.strip():
            self.run_search(self.query_text)

    # ----- searching ------------------------------------------------------------------------
    @on(Input.Submitted, "#search-input")
    def _submitted(self, event: Input.Submitted) -> None:
        self.run_search(event.value)

    def run_search(self, line: str) -> None:
        from s3gym_tui.engine.finding import parse_search_line

        try:
            words, filters = parse_search_line(line)
        except ValueError as exc:
            self._status(Text(safe(f"✗ {exc}", one_line=True), style="red"))
            return
        self.query_text = line
        self.busy = True
        self._status(Text("searching…", style="italic"))
        self._search(words, filters)

    @thread_work(exclusive=True, group="search")
    def _search(self, words: str, filters) -> None:
        from s3gym_tui.engine.finding import find

        try:
            store = self.app.store.for_thread()
            try:
                waiting = store.search.search_backlog()
                if waiting >= PROGRESS_FROM and not store.read_only:
                    self.post_message(IndexProgress(0, waiting))
                    store.search.index_backlog(lambda done, total: self.post_message(IndexProgress(done, total)))
                result = find(store, words, filters, limit=LIMIT)
            finally:
                store.close()
        except Exception as exc:  # noqa: BLE001 - a message, never a crash
            self.post_message(SearchAnswered(None, " ".join(str(exc).split())))
            return
        self.post_message(SearchAnswered(result))

    def on_index_progress(self, message: IndexProgress) -> None:
        bar = self.query_one("#search-progress", ProgressBar)
        bar.display = message.done < message.total
        bar.update(total=message.total, progress=message.done)
        self._status(Text(f"indexing {message.total:,} older steps for search (once)…", style="italic"))

    def on_search_answered(self, message: SearchAnswered) -> None:
        self.busy = False
        self.query_one("#search-progress", ProgressBar).display = False
        if message.result is None:
            self._status(Text(safe(f"✗ {message.error}", one_line=True), style="red"))
            return
        self.result = message.result
        self._fill(message.result)

    def _status(self, text: Text) -> None:
        self.query_one("#search-status", Static).update(text)

    def _fill(self, result: SearchResult) -> None:
        terms = result.term_list()
        options: list[Option] = []
        self.hits = []
        for group, hits in result.groups():
            first = hits[0]
            head = Text()
            head.append(safe(group, one_line=True), style="bold")
            where = " · ".join(p for p in (first.game, first.model, first.pathway, first.phase or "") if p)
            head.append(f"  {safe(where, one_line=True)}", style="dim")
            options.append(Option(head, disabled=True))
            for hit in hits:
                options.append(Option(self._hit_text(hit, terms), id=f"hit-{len(self.hits)}"))
                self.hits.append(hit)
        results = self.query_one("#search-results", OptionList)
        results.clear_options()
        results.add_options(options)
        steps = sum(h.kind == "step" for h in result.hits)
        status = Text(f"{steps} step{'s' * (steps != 1)}, {len(result.hits) - steps} other"
                      f"{'s' * (len(result.hits) - steps != 1)}")
        if result.more:
            status.append(f" · first {result.limit} of each kind: add words or filters", style="yellow")
        if result.incomplete:
            status.append(f" · {result.backlog:,} steps not searched ({result.unindexed_reason})", style="yellow")
        if not result.hits:
            status.append(" · no matches", style="italic")
        else:
            status.append("  · enter opens · c compares · m marks", style="dim")
        self._status(status)
        if self.hits:
            results.highlighted = 1

    @staticmethod
    def _hit_text(hit: SearchHit, terms) -> "HangingLines":
        """The hit's line (its figures first, whole) and its matching lines, each under its indent."""
        text = Text()
        if hit.kind == "step":
            text.append(f"step {hit.step_index}", style="cyan")
            text.append(f"  s {fmt(hit.self_score)} · r {fmt(hit.reward)} · {hit.verdict}")
            if hit.actor and hit.actor != "model":
                text.append(f" ({hit.actor})", style="magenta")
            text.append(f"  {safe(hit.action or '', one_line=True, max_chars=60)}", style="bold")
        elif hit.kind == "summary":
            text.append(f"summary v{hit.version}", style="cyan")
        else:
            text.append("episode note", style="cyan")
        if hit.labels:
            text.append("  [" + ", ".join(safe(lab, one_line=True) for lab in hit.labels) + "]", style="yellow")
        lines = [(2, text)]
        for name, line in hit.lines:
            detail = Text(f"{safe(name, one_line=True)}: ", style="dim")
            detail.append_text(highlighted(line, terms))
            lines.append((6, detail))
        return HangingLines(lines)

    # ----- acting on a hit ------------------------------------------------------------------
    def selected_hit(self) -> Optional[SearchHit]:
        results = self.query_one("#search-results", OptionList)
        index = results.highlighted
        if index is None:
            return None
        option = results.get_option_at_index(index)
        if not option.id or not option.id.startswith("hit-"):
            return None
        return self.hits[int(option.id.removeprefix("hit-"))]

    @on(OptionList.OptionSelected, "#search-results")
    def _open(self, event: OptionList.OptionSelected) -> None:
        hit = self.selected_hit()
        if hit is None:
            return
        if hit.kind == "summary" and hit.run_id:
            self.app.open_summaries(hit.run_id)
        elif hit.episode_id:
            self.app.open_episode(hit.episode_id, at_step=hit.step_index)

    def action_focus_input(self) -> None:
        self.query_one("#search-input", Input).focus()

    def action_to_results(self) -> None:
        self.query_one("#search-results", OptionList).focus()

    def action_compare(self) -> None:
        from s3gym_tui.engine.finding import compare_partner

        hit = self.selected_hit()
        if hit is None or not hit.episode_id:
            self.notify("Choose a step or an episode to compare.")
            return
        store = self.app.store
        try:
            episode = store.episodes.get_episode(hit.episode_id)
            partner = compare_partner(store, episode)
        except Exception as exc:  # noqa: BLE001
            self.notify(f"Cannot compare: {exc}", severity="error")
            return
        if partner is None:
            self.notify("Nothing to compare with: no fork, pair or other episode on this seed.")
            return
        self.app.open_compare(partner, hit.episode_id)

    def action_annotate(self) -> None:
        from s3gym_tui.screens.annotate_dialog import annotate

        hit = self.selected_hit()
        if hit is None:
            self.notify("Choose a result to mark.")
            return
        annotate(self, kind=hit.kind, title=f"Mark {hit.target}", episode_id=hit.episode_id,
                 step_index=hit.step_index, summary_id=hit.summary_id,
                 done=lambda: self.run_search(self.query_text))

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        """c and m act on a result: inactive while the search box has the focus (they are letters there)."""
        if action in ("compare", "annotate") and isinstance(self.focused, Input):
            return False
        return True
