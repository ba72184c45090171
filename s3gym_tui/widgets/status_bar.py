"""The one-line status bar under a screen: a text and a spinner shown while a model is thinking."""

from __future__ import annotations

from typing import Optional

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import LoadingIndicator, Static

from s3gym_tui.textgate import safe_text

SPINNER_DELAY_S = 0.15  # calls faster than this never show the spinner (no flicker for instant models)


class Spinner(LoadingIndicator):
    """A loading indicator that animates only while it is visible (it starts hidden)."""

    def _on_mount(self, event) -> None:
        super()._on_mount(event)
        self.auto_refresh = None

    def show(self, shown: bool) -> None:
        self.visible = shown
        self.auto_refresh = 1 / 16 if shown else None


class StatusBar(Horizontal):
    """Status text plus a thinking spinner. Updates never change the layout (fixed height, the
    spinner toggles visibility), so a status change costs one small repaint."""

    DEFAULT_CSS = """
    StatusBar { height: 1; background: $panel; }
    StatusBar > #status-line { width: 1fr; height: 1; color: $text-muted; padding: 0 1; }
    StatusBar > #spinner { width: 8; height: 1; min-height: 1; visibility: hidden; background: $panel; }
    """

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self._text = ""
        self._thinking_label = ""
        self._thinking = False
        self._revealed = False
        self._timer: Optional[Timer] = None
        self._painted: Optional[str] = None

    def compose(self) -> ComposeResult:
        yield Static("", id="status-line")
        yield Spinner(id="spinner")

    @property
    def thinking_shown(self) -> bool:
        return self._revealed

    def set_text(self, text: str) -> None:
        self._text = text
        self._paint()

    def set_thinking(self, thinking: bool, label: str = "") -> None:
        """Start or stop the thinking display; it appears after SPINNER_DELAY_S."""
        self._thinking_label = label
        if thinking == self._thinking:
            return
        self._thinking = thinking
        if self._timer is not None:
            self._timer.stop()
            self._timer = None
        if thinking:
            self._timer = self.set_timer(SPINNER_DELAY_S, self.reveal)
        else:
            self._revealed = False
            self.query_one(Spinner).show(False)
            self._paint()

    def reveal(self) -> None:
        """Show the spinner and the thinking label now (the timer calls this)."""
        self._timer = None
        if self._thinking:
            self._revealed = True
            self.query_one(Spinner).show(True)
            self._paint()

    @property
    def pending(self) -> bool:
        return self._timer is not None

    def _paint(self) -> None:
        text = self._text
        if self._revealed and self._thinking_label:
            text = f"{self._thinking_label} · {text}"
        if text == self._painted:  # an unchanged line costs no repaint (nor an early frame)
            return
        self._painted = text
        self.query_one("#status-line", Static).update(safe_text(text, one_line=True, max_chars=2000), layout=False)
