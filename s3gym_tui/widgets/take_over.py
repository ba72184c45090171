"""Take over: a person types the next action; one the game would refuse needs a second enter."""

from __future__ import annotations

from typing import Callable, Optional

from textual import on
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Static

from s3gym_tui.textgate import safe_text

Check = Callable[[str], tuple[bool, str]]  # action -> (the game accepts it, the game's feedback)


class TakeOverBox(Vertical):
    """The take-over input and, under it, what the game would answer to a refused action. Enter
    checks the action against the game (a copy of it: nothing is spent); a refused one is shown with
    the game's feedback and goes through only on a second enter with the same text. Posts
    TakeOverBox.Submitted with the action to play."""

    DEFAULT_CSS = """
    TakeOverBox { height: auto; }
    TakeOverBox > #takeover { display: none; border: tall $accent; }
    TakeOverBox > #takeover-note { display: none; height: auto; padding: 0 1; color: $text-error; }
    """

    class Submitted(Message):
        def __init__(self, action: str) -> None:
            super().__init__()
            self.action = action

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self._check: Optional[Check] = None
        self._refused: Optional[str] = None  # a refused action typed once: enter again plays it

    def compose(self) -> ComposeResult:
        yield Input(placeholder="Your action", id="takeover")
        yield Static("", id="takeover-note")

    @property
    def is_open(self) -> bool:
        return bool(self.query_one("#takeover", Input).display)

    def open(self, answer_format: str, check: Check) -> None:
        self._check, self._refused = check, None
        field = self.query_one("#takeover", Input)
        field.placeholder = f"Your action ({answer_format}); enter plays it, esc cancels"
        field.value = ""
        self._note("")
        field.display = True
        field.focus()

    def close(self) -> None:
        self.query_one("#takeover", Input).display = False
        self._note("")
        self._refused = None

    def _note(self, text: str) -> None:
        note = self.query_one("#takeover-note", Static)
        note.update(safe_text(text, style="bold", max_chars=2000) if text else "")
        note.display = bool(text)

    @on(Input.Changed, "#takeover")
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        if self._refused is not None and event.value.strip() != self._refused:
            self._refused = None
            self._note("")

    @on(Input.Submitted, "#takeover")
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        action = event.value.strip()
        if not action:
            self.notify("Type an action first (esc cancels).", severity="warning")
            return
        if action != self._refused and self._check is not None:
            valid, feedback = self._check(action)
            if not valid:
                self._refused = action
                self._note(f"✗ The game would refuse this: {feedback}  Enter again plays it anyway "
                           "(it costs a turn); edit it, or esc.")
                return
        self.post_message(self.Submitted(action))
