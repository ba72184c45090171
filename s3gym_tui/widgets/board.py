"""The game board: the game's own rich rendering, in a titled, scrollable panel."""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static


class BoardPanel(VerticalScroll):
    """Shows `game.render()`; the border title names the game, the subtitle where we are."""

    DEFAULT_CSS = """
    BoardPanel { height: auto; }
    BoardPanel > #board-view { width: auto; }
    """

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self.border_title = "Board"
        self.can_focus = False

    def compose(self) -> ComposeResult:
        yield Static(Text("no board yet", style="italic"), id="board-view")

    @property
    def view_widget(self) -> Static:
        return self.query_one("#board-view", Static)

    def show_game(self, game: Any, subtitle: str = "") -> None:
        """Render the game's current state (a rendering failure shows as text, never a crash)."""
        try:
            renderable = game.render()
        except Exception as exc:  # noqa: BLE001 - a game bug must not take the UI down
            renderable = Text(f"cannot render the board: {exc}", style="bold")
        self.border_title = getattr(game, "title", None) or getattr(game, "name", "Board")
        self.border_subtitle = subtitle
        self.view_widget.update(renderable)

    def show_message(self, message: str, title: str = "Board") -> None:
        self.border_title = title
        self.border_subtitle = ""
        self.view_widget.update(Text(message))
