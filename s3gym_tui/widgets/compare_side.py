"""One side of the Compare screen: the board at the aligned step, that step, its reply, and the agent's
context, with the lines the reply cites highlighted and scrolled into view."""

from __future__ import annotations

from typing import Any, Optional, Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical, VerticalScroll
from textual.content import Content
from textual.widgets import Static

from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.board import BoardPanel

CITED_STYLE = "reverse"  # what a reply cites: in the reply and in the context it came from


def line_offset(widget: Static, plain: str, line: int) -> int:
    """The row at which logical line `line` of `plain` starts once `widget` wraps it at its width."""
    if line <= 0:
        return 0
    width = widget.content_region.width or widget.size.width
    if not width:
        return 0
    before = "\n".join(plain.split("\n")[:line])
    return Content(before).get_height(widget.styles, width)


class CompareSide(Vertical):
    """Board (top), the step's action / self-score / reward, its reply, and a scrollable context excerpt."""

    DEFAULT_CSS = """
    CompareSide { width: 1fr; height: 1fr; border: round $primary-darken-2; }
    CompareSide BoardPanel { height: auto; max-height: 35%; padding: 0 1; }  /* the context keeps room */
    CompareSide .side-step { height: auto; max-height: 7; padding: 0 1; background: $boost; }
    CompareSide .side-reply { height: auto; max-height: 7; border-top: solid $primary-darken-3;
                              scrollbar-gutter: stable; }
    CompareSide .side-reply Static { padding: 0 1; }
    CompareSide .side-context { height: 1fr; min-height: 3; border-top: solid $primary-darken-3;
                                scrollbar-gutter: stable; }  /* room kept for the bar: no re-wrap */
    CompareSide .side-context Static { padding: 0 1; }
    """

    def __init__(self, title: str, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self.border_title = title
        self.game: Any = None  # the game state the board shows
        self.highlighted: tuple[str, ...] = ()  # the context lines shown highlighted (plain text)
        self.context_plain = ""  # the context as shown (gated, plain)
        self.focus_line: Optional[int] = None  # the context line scrolled into view
        self.reply_plain = ""

    def compose(self) -> ComposeResult:
        yield BoardPanel(classes="side-board")
        yield Static(classes="side-step")
        with VerticalScroll(classes="side-reply"):
            yield Static(classes="side-reply-text")
        with VerticalScroll(classes="side-context"):
            yield Static(classes="side-context-text")

    def show(self, game: Any, board_caption: str, step: Text, context_title: str, context: Text,
             reply: Optional[Text] = None, highlight: Sequence[int] = (), reply_line: Optional[int] = None) -> None:
        """Show a step. `highlight`: lines of `context` to highlight (the first is scrolled into view);
        `reply`: the step's reply (hidden when None), scrolled to `reply_line`."""
        board = self.query_one(BoardPanel)
        if not board.scrollable_content_region.width:  # before the first layout: half the screen each
            board.expected_width = self.app.size.width // 2 - 6
        self.game = game
        if game is None:
            board.show_message(board_caption)
        else:
            board.show_game(game, board_caption)
        self.query_one(".side-step", Static).update(safe_text(step, max_chars=2000))
        reply_box = self.query_one(".side-reply", VerticalScroll)
        reply_box.display = reply is not None
        gated_reply = safe_text(reply if reply is not None else Text(""), max_chars=20_000)
        self.reply_plain = gated_reply.plain
        self.query_one(".side-reply-text", Static).update(gated_reply)
        scroll = self.query_one(".side-context", VerticalScroll)
        scroll.border_title = safe_text(context_title, one_line=True)
        gated = safe_text(context)  # the context a model saw
        lines = gated.plain.split("\n")
        self.context_plain = gated.plain
        shown = sorted({i for i in highlight if 0 <= i < len(lines)})
        self.highlighted = tuple(lines[i] for i in shown)
        starts = [0]
        for line in lines:
            starts.append(starts[-1] + len(line) + 1)
        for i in shown:
            gated.stylize(CITED_STYLE, starts[i], starts[i] + len(lines[i]))
        self.focus_line = shown[0] if shown else None
        self.query_one(".side-context-text", Static).update(gated)
        self.call_after_refresh(self._scroll_to_focus, reply_line)

    def _scroll_to_focus(self, reply_line: Optional[int]) -> None:
        """The first highlighted line near the top of the context (a line of the turn before it above),
        and the reply at its first citation."""
        scroll = self.query_one(".side-context", VerticalScroll)
        if self.focus_line is None:
            scroll.scroll_to(y=0, animate=False, immediate=True)
        else:
            row = line_offset(self.query_one(".side-context-text", Static), self.context_plain, self.focus_line)
            scroll.scroll_to(y=max(0, row - 1), animate=False, immediate=True)
        reply_box = self.query_one(".side-reply", VerticalScroll)
        row = 0 if reply_line is None else line_offset(self.query_one(".side-reply-text", Static),
                                                      self.reply_plain, reply_line)
        reply_box.scroll_to(y=row, animate=False, immediate=True)

    def focus_row(self) -> Optional[int]:
        """The row (in the context's wrapped text) of the first highlighted line; None without one."""
        if self.focus_line is None:
            return None
        return line_offset(self.query_one(".side-context-text", Static), self.context_plain, self.focus_line)
