"""The proposal line of propose-then-wait: the model's proposed action with accept, edit and veto."""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widgets import Static

from s3gym_tui.engine.prompts import format_score
from s3gym_tui.textgate import safe

CHOICES = (("a", "Accept", "accept"), ("e", "Edit", "edit"), ("v", "Veto", "veto"))


class ProposalBar(Static):
    """One line that takes the status line's place while a proposal waits (the two share a row, so
    showing it never moves the panels above). Its Accept, Edit and Veto labels are clickable and
    mirror the keys a, e, v."""

    DEFAULT_CSS = """
    ProposalBar { height: 1; display: none; background: $warning-muted; color: $text;
                  text-wrap: nowrap; text-overflow: ellipsis; }
    """

    class Chosen(Message):
        """A click on Accept, Edit or Veto (`choice` is accept / edit / veto)."""

        def __init__(self, choice: str) -> None:
            super().__init__()
            self.choice = choice

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__("", id=id)
        self._shown: Any = None
        self._spans: list[tuple[int, int, str]] = []

    @property
    def text(self) -> str:
        return str(self.render())

    def show_proposal(self, proposal: Any) -> bool:
        """Show an engine Proposal (or hide the line with None); True when its visibility changed."""
        if proposal is not None and proposal is not self._shown:
            text = Text()
            text.append(" Model proposes: ", style="bold")
            text.append(f" {safe(proposal.action, one_line=True, max_chars=200)} ", style="bold reverse")
            text.append(f"  self-score {format_score(proposal.parsed.self_score)}  ")
            spans = []
            for key, label, choice in CHOICES:
                start = len(text)
                text.append(f" {key} ", style="bold reverse")
                text.append(f" {label} ")
                spans.append((start, len(text), choice))
            self._spans = spans
            self.update(text, layout=False)
        self._shown = proposal
        shown = proposal is not None
        if self.display != shown:
            self.display = shown
            return True
        return False

    def on_click(self, event: events.Click) -> None:
        for start, end, choice in self._spans:
            if start <= event.x < end:
                self.post_message(self.Chosen(choice))
                return
