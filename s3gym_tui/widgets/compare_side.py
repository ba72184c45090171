"""One side of the Compare screen: the board at the aligned step, that step, and the agent's context."""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.widgets import Static

from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.board import BoardPanel


class CompareSide(Vertical):
    """Board (top), the step's action / self-score / reward, and a scrollable context excerpt."""

    DEFAULT_CSS = """
    CompareSide { width: 1fr; height: 1fr; border: round $primary-darken-2; }
    CompareSide BoardPanel { height: auto; max-height: 60%; padding: 0 1; }
    CompareSide .side-step { height: auto; padding: 0 1; background: $boost; }
    CompareSide .side-context { height: 1fr; min-height: 3; border-top: solid $primary-darken-3;
                                scrollbar-gutter: stable; }  /* room kept for the bar: no re-wrap */
    CompareSide .side-context Static { padding: 0 1; }
    """

    def __init__(self, title: str, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self.border_title = title
        self.game: Any = None  # the game state the board shows

    def compose(self) -> ComposeResult:
        yield BoardPanel(classes="side-board")
        yield Static(classes="side-step")
        with VerticalScroll(classes="side-context"):
            yield Static(classes="side-context-text")

    def show(self, game: Any, board_caption: str, step: Text, context_title: str, context: Text) -> None:
        board = self.query_one(BoardPanel)
        if not board.scrollable_content_region.width:  # before the first layout: half the screen each
            board.expected_width = self.app.size.width // 2 - 6
        self.game = game
        if game is None:
            board.show_message(board_caption)
        else:
            board.show_game(game, board_caption)
        self.query_one(".side-step", Static).update(safe_text(step, max_chars=2000))
        scroll = self.query_one(".side-context", VerticalScroll)
        scroll.border_title = safe_text(context_title, one_line=True)
        self.query_one(".side-context-text", Static).update(safe_text(context))  # the context a model saw
