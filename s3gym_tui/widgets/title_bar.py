"""The title line at the top of every screen: the app's name and what the screen shows."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.widgets import Static

from s3gym_tui.textgate import safe


class TitleBar(Static):
    """`● s3gym — <screen sub-title or the app's>`, one line. A plain Static: Textual's Header
    composes a clock, an icon and a title widget and restyles them on every screen push (it cost
    more than the rest of a screen's opening). Follows changes of its screen's sub_title."""

    DEFAULT_CSS = """
    TitleBar { dock: top; height: 1; background: $panel; color: $foreground; text-wrap: nowrap;
               text-overflow: ellipsis; content-align: center middle; }
    """

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__("", id=id)

    def on_mount(self) -> None:
        self.watch(self.screen, "sub_title", lambda _value: self._paint(), init=False)
        # not the app's title (it never changes): Textual drops a watcher of another object only when
        # that attribute next changes, so watching the app kept every TitleBar ever mounted alive
        self._paint()

    def _paint(self) -> None:
        sub = self.screen.sub_title or self.app.sub_title
        sub = safe(sub, one_line=True, max_chars=300)  # a sub-title names runs, models, files
        text = Text.assemble(("● ", "bold"), (self.app.title, "bold"), (f" — {sub}" if sub else "", ""))
        self.update(text, layout=False)
