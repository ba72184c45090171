"""The one-line status bar under a screen: a text, and while a model is thinking a spinner with the
call's elapsed time (and whatever the screen adds: tokens so far, the model's typical step time)."""

from __future__ import annotations

import time
from typing import Callable, Optional

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.timer import Timer
from textual.widgets import LoadingIndicator, Static

from s3gym_tui.textgate import safe_text

SPINNER_DELAY_S = 0.15  # calls faster than this never show the spinner (no flicker for instant models)
CLOCK_S = 1.0  # the elapsed time of a call is redrawn this often


def elapsed_text(seconds: float) -> str:
    """'7 s', '2 min 05 s': a call's elapsed time, to the second."""
    whole = int(seconds)
    return f"{whole} s" if whole < 60 else f"{whole // 60} min {whole % 60:02d} s"


class Spinner(LoadingIndicator):
    """A loading indicator that animates only while it is visible (it starts hidden)."""

    def on_mount(self, event) -> None:
        # Textual calls this before LoadingIndicator's own Mount handler, which starts the animation:
        # preventing the default leaves it stopped until show().
        event.prevent_default()

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
        self._clock: Optional[Timer] = None
        self._since = 0.0  # monotonic start of the call shown
        self._detail: Optional[Callable[[], str]] = None
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

    def set_thinking(self, thinking: bool, label: str = "", detail: Optional[Callable[[], str]] = None) -> None:
        """Start or stop the thinking display; it appears after SPINNER_DELAY_S, with the time since
        the call started (redrawn every CLOCK_S) and `detail()` after it (e.g. tokens so far)."""
        self._thinking_label = label
        self._detail = detail
        if thinking == self._thinking:
            return
        self._thinking = thinking
        for timer in (self._timer, self._clock):
            if timer is not None:
                timer.stop()
        self._timer = self._clock = None
        if thinking:
            self._since = time.monotonic()
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
            self._clock = self.set_interval(CLOCK_S, self._paint)
            self._paint()

    @property
    def elapsed_s(self) -> Optional[float]:
        """Seconds since the call shown started (None when no call is shown)."""
        return time.monotonic() - self._since if self._revealed else None

    @property
    def pending(self) -> bool:
        return self._timer is not None

    def _paint(self) -> None:
        text = self._text
        if self._revealed and self._thinking_label:
            detail = self._detail() if self._detail is not None else ""
            clock = elapsed_text(time.monotonic() - self._since)
            text = f"{self._thinking_label} {clock}{' · ' + detail if detail else ''} · {text}"
        if text == self._painted:  # an unchanged line costs no repaint (nor an early frame)
            return
        self._painted = text
        self.query_one("#status-line", Static).update(safe_text(text, one_line=True, max_chars=2000), layout=False)
