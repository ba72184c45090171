"""The demo's guided tour: its stops (engine.tour), each opening its screen already in place; esc on that
screen comes back here."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.widgets import OptionList, Static
from textual.widgets.option_list import Option

from s3gym_tui.messages import TourBuilt
from s3gym_tui.screens.analysis_common import AnalysisScreen
from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.thread_work import thread_work

INTRO = ("The 10-minute demo: where raw history beats compressed rules, and why. A glass-box learner played the "
         "seven games with no experience (none), with its raw History, and with a Summary it wrote itself; its "
         "every reply says which evidence it used. Each stop opens its screen already in place; esc comes back.")


class TourScreen(AnalysisScreen):
    """The stops of the demo, a number (or enter) opens one."""

    AUTO_FOCUS = "#tour-stops"
    DEFAULT_CSS = """
    TourScreen #tour-intro { height: auto; padding: 0 1; }
    TourScreen #tour-about { height: auto; padding: 0 1; background: $boost; }
    TourScreen #tour-stops { height: auto; max-height: 8; border: round $primary-darken-2; }
    TourScreen #tour-text { height: 1fr; padding: 0 1; border: round $primary-darken-2; }
    TourScreen.-short #tour-intro { display: none; }
    """
    BINDINGS = [
        Binding("enter", "open_selected", "Open", id="tour_open", show=False),
        Binding("1", "open_stop('1')", "Report", id="tour_report"),
        Binding("2", "open_stop('2')", "Pairs", id="tour_pairs"),
        Binding("3", "open_stop('3')", "Compare", id="tour_compare"),
        Binding("4", "open_stop('4')", "Summaries", id="tour_summaries"),
    ]

    def __init__(self) -> None:
        super().__init__()
        self.tour = None
        self.error: Optional[str] = None
        self.visited: set[str] = set()

    @property
    def busy(self) -> bool:
        """True until the tour is read (or said why not)."""
        return self.tour is None and self.error is None

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static(INTRO, id="tour-intro", classes="muted")
        yield Static(Text("reading the demo database…", style="italic"), id="tour-about")
        yield OptionList(id="tour-stops")
        yield Static(id="tour-text")
        yield KeyHints()

    def on_mount(self) -> None:
        self.sub_title = "the 10-minute demo"
        self.query_one("#tour-stops").border_title = "Stops (a number or enter opens one)"
        self._build()

    @thread_work(exclusive=True, group="tour")
    def _build(self) -> None:
        from s3gym_tui.engine.demo import read_mark
        from s3gym_tui.engine.tour import demo_tour

        try:
            store = self.app.store.for_thread()
            try:
                mark = read_mark(store.conn)
                if mark is None:
                    self.post_message(TourBuilt(error="this database is not a demo database: `s3gym demo` "
                                                      "builds one (or d on Home)"))
                    return
                with store.snapshot():
                    tour = demo_tour(store, mark)
            finally:
                store.close()
        except Exception as exc:  # noqa: BLE001 - said on the screen
            self.post_message(TourBuilt(error=f"{type(exc).__name__}: {exc}"))
            return
        self.post_message(TourBuilt(tour))

    def on_tour_built(self, message: TourBuilt) -> None:
        if message.error:
            self.error = message.error
            self.query_one("#tour-about", Static).update(safe_text(message.error, style="bold red"))
            return
        self.tour = message.tour
        self.query_one("#tour-about", Static).update(safe_text(self.tour.about))
        self._show_stops()

    def _show_stops(self, highlighted: int = 0) -> None:
        stops = self.query_one("#tour-stops", OptionList)
        stops.clear_options()
        for stop in self.tour.stops:
            prompt = Text.assemble((f" {stop.key} ", "bold reverse"), " ", (stop.title, "bold"))
            if stop.key in self.visited:
                prompt.append("  ✓ seen", style="green")
            if not stop.ready:
                prompt.append("  (nothing to open)", style="dim italic")
            stops.add_option(Option(safe_text(prompt, one_line=True), id=stop.key))
        stops.highlighted = highlighted
        self._show_text(highlighted)

    @on(OptionList.OptionHighlighted, "#tour-stops")
    def _highlighted(self, event: OptionList.OptionHighlighted) -> None:
        self._show_text(event.option_index)

    @on(OptionList.OptionSelected, "#tour-stops")
    def _selected(self, event: OptionList.OptionSelected) -> None:
        self.action_open_stop(event.option.id)

    def _show_text(self, index: Optional[int]) -> None:
        if self.tour is None or index is None or not 0 <= index < len(self.tour.stops):
            return
        stop = self.tour.stops[index]
        text = Text(stop.title + "\n", style="bold")
        text.append(stop.text)
        if stop.ready:
            text.append(f"\n\n{stop.key} or enter opens it; esc there comes back here.", style="dim italic")
        self.query_one("#tour-text", Static).update(safe_text(text))  # names runs, rules and replies

    def action_open_selected(self) -> None:
        stops = self.query_one("#tour-stops", OptionList)
        if stops.highlighted is not None and self.tour is not None:
            self.action_open_stop(self.tour.stops[stops.highlighted].key)

    def action_open_stop(self, key: Optional[str]) -> None:
        """Open a stop's screen, positioned (a stop with nothing to open says so)."""
        stop = next((s for s in self.tour.stops if s.key == key), None) if self.tour is not None else None
        if stop is None:
            return
        if not stop.ready:
            self.notify(stop.text, severity="warning")
            return
        self.visited.add(stop.key)
        self._show_stops(self.tour.stops.index(stop))
        if stop.screen == "report":
            self.app.open_report(list(stop.run_ids), at=stop.table or None)
        elif stop.screen == "pairs":
            self.app.open_pairs(winner=stop.winner or "all")
        elif stop.screen == "compare":
            self.app.open_compare(*stop.episodes, at_divergence=True)
        elif stop.screen == "summaries":
            self.app.open_summaries(stop.run_id, select=stop.summary_id)
