"""The game board: the game's own rich rendering, in a titled panel that can scroll, zoom and page."""

from __future__ import annotations

import inspect
from typing import Any, Optional

from rich.console import Console
from rich.measure import Measurement
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

PANEL_CHROME = 4  # border (2) and padding (2) around the board
_FOCUSABLE: dict[type, bool] = {}


def renders_with_focus(game: Any) -> bool:
    """True for games whose render() takes `focus` (a board further back in the history, e.g. chess)."""
    cls = type(game)
    if cls not in _FOCUSABLE:
        try:
            _FOCUSABLE[cls] = "focus" in inspect.signature(cls.render).parameters
        except (TypeError, ValueError):
            _FOCUSABLE[cls] = False
    return _FOCUSABLE[cls]


class BoardPanel(VerticalScroll):
    """Shows `game.render()`; the border title names the game, the subtitle where we are.

    Its height follows the board (the panels around it give way); the layout is redone only when the
    board's size changes, so a step costs one repaint. It can be focused and scrolled when the board
    is taller than the room, maximized (zoom), and for games with several boards (chess: t-6 .. t0)
    it pages the large board back and forth through them (`move_focus`)."""

    ALLOW_MAXIMIZE = True
    DEFAULT_CSS = """
    BoardPanel { height: auto; }
    BoardPanel > #board-view { width: 100%; }
    BoardPanel.-maximized { height: 1fr; }
    """

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "Board"
        self.can_focus = True
        self.board_focus = 0  # how many boards back from the newest the large board shows
        self._game: Any = None
        self._subtitle = ""
        self._drawn_size: Optional[tuple[int, int]] = None
        self._natural: Optional[tuple[type, str, int]] = None

    def compose(self) -> ComposeResult:
        yield Static(Text("no board yet", style="italic"), id="board-view")

    @property
    def view_widget(self) -> Static:
        return self.query_one("#board-view", Static)

    @property
    def game(self) -> Any:
        return self._game

    def _renderable(self, game: Any) -> Any:
        if renders_with_focus(game):
            return game.render(focus=self.board_focus)
        return game.render()

    def show_game(self, game: Any, subtitle: str = "") -> None:
        """Render the game's current state (a rendering failure shows as text, never a crash)."""
        self._game, self._subtitle = game, subtitle
        self._draw()

    def move_focus(self, delta: int) -> None:
        """Page the large board `delta` boards back (positive) or forward, for games that have several."""
        if self._game is None or not renders_with_focus(self._game):
            self.app.bell()
            return
        self.board_focus = max(0, self.board_focus + delta)
        self._draw()

    def _draw(self) -> None:
        game = self._game
        try:
            renderable = self._renderable(game)
        except Exception as exc:  # noqa: BLE001 - a game bug must not take the UI down
            renderable = Text(f"cannot render the board: {exc}", style="bold")
        frames = getattr(renderable, "frames", None)
        title = getattr(game, "title", None) or getattr(game, "name", "Board")
        if frames:
            self.board_focus = getattr(renderable, "focus", 0)
            label = renderable.labels[renderable.focused_index]
            title += f" · large: {label} · [ ] older/newer · z zoom"
        self.border_title = title
        self.border_subtitle = self._subtitle
        self._update(renderable)

    def _update(self, renderable: Any) -> None:
        """Update the view; lay out again only when the board's drawn size changes."""
        size = self._size_of(renderable)
        self.view_widget.update(renderable, layout=size != self._drawn_size)
        self._drawn_size = size

    def _size_of(self, renderable: Any) -> tuple[int, int]:
        """(width, lines) of the board as drawn in the room the panel has."""
        console = self.app.console
        room = max(1, self.scrollable_content_region.width or self.app.size.width)
        lines = console.render_lines(renderable, console.options.update_width(room), pad=False)
        return room, len(lines)

    def natural_width(self, console: Console) -> int:
        """Columns the panel needs to show the board whole at its widest layout (all of a chess history)."""
        if self._game is None:
            return 0
        key = (type(self._game), self._game.mode, self.board_focus)
        if self._natural is not None and self._natural[:2] == key[:2]:
            return self._natural[2]
        try:
            renderable = self._renderable(self._game)
            width = Measurement.get(console, console.options.update_width(1000), renderable).maximum
        except Exception:  # noqa: BLE001
            width = 40
        self._natural = (key[0], key[1], width + PANEL_CHROME)
        return width + PANEL_CHROME

    def show_message(self, message: str, title: str = "Board") -> None:
        self._game = None
        self.border_title = title
        self.border_subtitle = ""
        self._drawn_size = None
        self.view_widget.update(Text(message))
