"""The game board: the game's own rich rendering, in a titled panel that can scroll, zoom and page."""

from __future__ import annotations

import inspect
from typing import Any, Optional

from rich.console import Console
from rich.measure import Measurement
from rich.segment import Segment
from rich.text import Text
from textual.strip import Strip

from s3gym_tui.textgate import is_safe, safe
from s3gym_tui.widgets.text_view import LinesView, Repaint

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


def _gated(line: list) -> list:
    """A rendered line with its text through the gate (styles and Rich's control segments kept)."""
    if is_safe("".join(segment.text for segment in line if not segment.control)):
        return line
    return [segment if segment.control else Segment(safe(segment.text, max_chars=None, one_line=True),
                                                     segment.style) for segment in line]


class BoardPanel(LinesView, can_focus=True):
    """Shows `game.render()`; the border title names the game, the subtitle where we are.

    The board is rendered to lines here (once per show) and drawn with the Line API: its height
    follows the board (the panels around it give way), the layout is redone only when the number of
    lines changes, and a step repaints only the lines of the board that changed (a snake move: two
    or three). It scrolls when the board is taller than the room, can be maximized (zoom), and for
    games with several boards (chess: t-6 .. t0) it pages the large board through them."""

    ALLOW_MAXIMIZE = True
    AUTO_HEIGHT = True
    DEFAULT_CSS = """
    BoardPanel { height: auto; }
    """

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "Board"
        self.board_focus = 0  # how many boards back from the newest the large board shows
        self._game: Any = None
        self._subtitle = ""
        self._renderable: Any = Text("no board yet", style="italic")
        self._rendered: dict[int, list] = {}  # width -> the lines of self._renderable at that width
        self._drawn_width = 0
        self._expected_width = 0  # the width the screen will give (lets the first paint precede the layout)

    @property
    def game(self) -> Any:
        return self._game

    def _render_game(self, game: Any) -> Any:
        if renders_with_focus(game):
            return game.render(focus=self.board_focus)
        return game.render()

    def show_game(self, game: Any, subtitle: str = "") -> None:
        """Render the game's current state (a rendering failure shows as text, never a crash)."""
        self._game, self._subtitle = game, subtitle
        self._draw()

    def set_subtitle(self, subtitle: str) -> None:
        """A new subtitle for the board shown (e.g. fitted to a new width); only its line is repainted."""
        self._subtitle = subtitle
        self.set_border(subtitle=subtitle)

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
            renderable = self._render_game(game)
        except Exception as exc:  # noqa: BLE001 - a game bug must not take the UI down
            renderable = Text(safe(f"cannot render the board: {exc}"), style="bold")
        frames = getattr(renderable, "frames", None)
        title = getattr(game, "title", None) or getattr(game, "name", "Board")
        if frames:
            self.board_focus = getattr(renderable, "focus", 0)
            title += f" · large: {renderable.labels[renderable.focused_index]} · [ ] older/newer · z zoom"
        self.set_border(title, self._subtitle)
        self._renderable, self._rendered = renderable, {}
        self._paint()

    @property
    def expected_width(self) -> int:
        return self._expected_width

    @expected_width.setter
    def expected_width(self, width: int) -> None:
        """The content width the screen is about to give; before the first layout the board is
        drawn at it at once (so the first frame has the board, and no second layout is needed)."""
        self._expected_width = max(0, int(width))
        if not self.scrollable_content_region.width and self._drawn_width != self._expected_width:
            self._paint()

    def _paint(self, repaint: Repaint = "changed", width: int = 0) -> None:
        width = width or self.scrollable_content_region.width or self._expected_width
        if width <= 0:
            return  # drawn on the first resize
        lines = self._lines(width)
        strips = [Strip(line) for line in lines]
        self._drawn_width = width
        self.set_lines(strips, [tuple(line) for line in lines], keep_scroll=True, repaint=repaint)

    def _lines(self, width: int) -> list:
        lines = self._rendered.get(width)
        if lines is None:
            console = self.app.console
            lines = console.render_lines(self._renderable, console.options.update_width(width), pad=False)
            lines = [_gated(line) for line in lines]  # a board can show actions and feedback a model wrote
            self._rendered[width] = lines  # a layout asks a few widths, then draws one of them
        return lines

    def measure_lines(self, width: int) -> int:
        return len(self._lines(width))

    def fit_width(self, width: int, repaint: Repaint) -> None:
        if width != self._drawn_width:
            self._paint(repaint, width)

    def on_mount(self) -> None:
        self._paint()

    def natural_width(self, console: Console) -> int:
        """Columns the panel needs to show the board in view whole at its widest layout (all of a
        chess history, a header line unwrapped)."""
        if self._game is None:
            return 0
        try:
            width = Measurement.get(console, console.options.update_width(1000), self._renderable).maximum
        except Exception:  # noqa: BLE001
            width = 40
        return width + PANEL_CHROME

    def min_width(self, console: Console) -> int:
        """Columns the panel needs at the least: the board's narrowest layout whole (chess: the large
        board alone), its chrome included; 0 when nothing is shown."""
        if self._game is None:
            return 0
        try:
            width = Measurement.get(console, console.options.update_width(1000), self._renderable).minimum
        except Exception:  # noqa: BLE001
            return 0
        return width + PANEL_CHROME

    def show_message(self, message: str, title: str = "Board") -> None:
        self._game = None
        self.set_border(title, "")
        self._renderable, self._rendered = Text(safe(message, max_lines=40)), {}
        self._paint()
