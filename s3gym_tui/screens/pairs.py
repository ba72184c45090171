"""History-vs-Summary evaluation pairs, largest score difference first: where raw history beats
compressed rules (and the other way round). Enter opens the pair side by side."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Label, Select, Static

import s3gym_games as games
from s3gym_tui.engine.compare import EpisodePair, best_pairs
from s3gym_tui.messages import PairsListed
from s3gym_tui.screens.analysis_common import AnalysisScreen, fmt, fmt_signed
from s3gym_tui.screens.live import LiveScreenMixin
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.fit_table import FitTable
from s3gym_tui.widgets.table import DataTable
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.thread_work import thread_work

WINNER_CHOICES = [("all pairs", "all"), ("history better", "history"), ("summary better", "summary"),
                  ("ties", "tie")]
WINNER_STYLE = {"history": "bold yellow", "summary": "bold cyan", "tie": "dim"}
PAIR_LIMIT = 500


def game_title(name: str) -> str:
    try:
        return games.game_class(name).title
    except Exception:  # noqa: BLE001 - a game that cannot be imported is still listed by name
        return name


class PairsScreen(LiveScreenMixin, AnalysisScreen):
    """The list of evaluation pairs from engine.compare.best_pairs, with filters."""

    DEFAULT_CSS = """
    PairsScreen #pairs-filters { height: auto; padding: 0 1; }
    PairsScreen #pairs-filters Label { padding: 1 1 0 0; width: auto; }
    PairsScreen #pairs-filters Select { width: 28; margin-right: 2; }
    PairsScreen #pairs-status { height: auto; padding: 0 1; background: $boost; }
    PairsScreen #pairs-table { height: 1fr; border: round $primary-darken-2; }
    """

    BINDINGS = [
        Binding("enter", "open_pair", "Compare", id="pairs_open"),
        Binding("f", "cycle_winner", "Winner filter", id="pairs_winner"),
        Binding("G", "cycle_game", "Game filter", id="pairs_game"),
        Binding("f5", "refresh", "Refresh", id="pairs_refresh", show=False),
    ]

    def __init__(self, winner: str = "all", game: Optional[str] = None) -> None:
        super().__init__()
        self.winner = winner
        self.game = game
        self.pairs: list[EpisodePair] = []
        self.busy = False

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="pairs-filters"):
            yield Label("Show")
            yield Select(WINNER_CHOICES, value=self.winner, allow_blank=False, id="pairs-winner-select")
            yield Label("Game")
            yield Select([("all games", "all")] + [(game_title(g), g) for g in games.names()],
                         value=self.game or "all", allow_blank=False, id="pairs-game-select")
        yield Static(id="pairs-status")
        yield FitTable(id="pairs-table", cursor_type="row", zebra_stripes=True, note_in_subtitle=True)
        yield KeyHints()

    def on_mount(self) -> None:
        self.sub_title = "History vs Summary pairs"
        table = self.query_one("#pairs-table", DataTable)
        table.border_title = "Same game, seed and checkpoint: History ICL vs Summary Memory (enter compares)"
        for label, key in (("game", "game"), ("model", "model"), ("seed", "seed"), ("x", "x"),
                           ("history", "h"), ("summary", "s"), ("diff (S−H)", "diff"), ("winner", "w")):
            table.add_column(label, key=key, shorten=12 if key == "model" else 0)
        self.refresh_pairs()
        table.focus()

    # ----- data -------------------------------------------------------------------------
    def refresh_from_store(self) -> None:
        """Follow the store quietly: pairs of runs that finished checkpoints meanwhile."""
        self._find_pairs(None if self.winner == "all" else self.winner, self.game)

    def refresh_pairs(self) -> None:
        self.busy = True
        self.query_one("#pairs-status", Static).update(Text("finding pairs…", style="italic"))
        self._find_pairs(None if self.winner == "all" else self.winner, self.game)

    @thread_work(exclusive=True, group="pairs")
    def _find_pairs(self, winner: Optional[str], game: Optional[str]) -> None:
        try:
            store = self.app.store.for_thread()
            try:
                with store.snapshot():
                    pairs = best_pairs(store, limit=PAIR_LIMIT, winner=winner, game=game)
            finally:
                store.close()
        except Exception as exc:  # noqa: BLE001
            self.post_message(PairsListed([], error=str(exc)))
            return
        self.post_message(PairsListed(pairs))

    def on_pairs_listed(self, message: PairsListed) -> None:
        self.busy = False
        if message.error:
            self.notify(f"Cannot list pairs: {message.error}", severity="error")
        self.pairs = list(message.pairs)
        table = self.query_one("#pairs-table", DataTable)
        table.clear()
        for i, p in enumerate(self.pairs):
            table.add_row(p.game, p.model, str(p.seed), str(p.x), fmt(p.history_score), fmt(p.summary_score),
                          Text(fmt_signed(p.diff), style=WINNER_STYLE[p.winner]),
                          Text(p.winner, style=WINNER_STYLE[p.winner]), key=str(i))
        status = Text()
        if self.pairs:
            counts = {w: sum(1 for p in self.pairs if p.winner == w) for w in ("history", "summary", "tie")}
            text = (f"{len(self.pairs)} pair(s){' (first ' + str(PAIR_LIMIT) + ')' if len(self.pairs) >= PAIR_LIMIT else ''}"
                    f" · history better {counts['history']} · summary better {counts['summary']}"
                    f" · ties {counts['tie']} · sorted by |diff|")
            status.append(text)
        else:
            status.append("No pairs: a pair needs evaluation episodes of a History run and a Summary run "
                          "of the same model and game (same seeds and checkpoints).", style="italic")
        self.query_one("#pairs-status", Static).update(status)

    # ----- filters ----------------------------------------------------------------------
    @on(Select.Changed, "#pairs-winner-select")
    def _winner_changed(self, event: Select.Changed) -> None:
        if event.value != self.winner and event.value is not Select.BLANK:
            self.winner = str(event.value)
            self.refresh_pairs()

    @on(Select.Changed, "#pairs-game-select")
    def _game_changed(self, event: Select.Changed) -> None:
        value = None if event.value in ("all", Select.BLANK) else str(event.value)
        if value != self.game:
            self.game = value
            self.refresh_pairs()

    def action_cycle_winner(self) -> None:
        values = [v for _, v in WINNER_CHOICES]
        self.query_one("#pairs-winner-select", Select).value = values[(values.index(self.winner) + 1) % len(values)]

    def action_cycle_game(self) -> None:
        values = ["all"] + games.names()
        current = self.game or "all"
        self.query_one("#pairs-game-select", Select).value = values[(values.index(current) + 1) % len(values)]

    def action_refresh(self) -> None:
        self.refresh_pairs()

    # ----- opening ----------------------------------------------------------------------
    def selected_pair(self) -> Optional[EpisodePair]:
        table = self.query_one("#pairs-table", DataTable)
        if not self.pairs or table.row_count == 0:
            return None
        return self.pairs[min(table.cursor_row, len(self.pairs) - 1)]

    def action_open_pair(self) -> None:
        pair = self.selected_pair()
        if pair is None:
            self.notify("No pair selected.", severity="warning")
            return
        self.app.open_compare(pair.history_episode, pair.summary_episode)

    @on(DataTable.RowSelected, "#pairs-table")
    def _row_selected(self, event: DataTable.RowSelected) -> None:
        event.stop()
        self.action_open_pair()
