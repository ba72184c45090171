"""The proposal line of propose-then-wait: the model's proposed action with accept, edit and veto."""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual import events
from textual.message import Message
from textual.widget import Widget

from s3gym_games.prompt import format_score
from s3gym_tui.textgate import safe

CHOICES = (("a", "Accept", "accept"), ("e", "Edit", "edit"), ("v", "Veto", "veto"))
# (lead, self-score label), longest first: the first with room for the action (or its start) is used
FORMS = ((" Model proposes: ", "  self-score "), (" Proposes: ", "  self-score "), (" ", " s "))
ACTION_ROOM = 12  # a longer form is kept while the action still gets this many cells (or all it needs)


def proposal_line(action: str, self_score: Optional[float], width: int) -> tuple[Text, list[tuple[int, int, str]]]:
    """The line at `width` cells and the (start, end, choice) span of each choice. The choices and the
    self-score are always whole: the action (shown in full in the agent panel) gives way, cut with '…'."""
    action = safe(action, one_line=True, max_chars=500)
    score = format_score(self_score)
    choices = sum(len(key) + len(label) + 4 for key, label, _ in CHOICES)
    for lead, score_label in FORMS:
        room = width - len(lead) - 2 - len(score_label) - len(score) - 2 - choices
        if room >= min(len(action), ACTION_ROOM):
            break
    room = max(1, room)
    shown = action if len(action) <= room else action[:max(0, room - 1)] + "…"
    text = Text(no_wrap=True, overflow="crop")
    text.append(lead, style="bold")
    text.append(f" {shown} ", style="bold reverse")
    text.append(f"{score_label}{score}  ")
    spans = []
    for key, label, choice in CHOICES:
        start = len(text)
        text.append(f" {key} ", style="bold reverse")
        text.append(f" {label} ")
        spans.append((start, len(text), choice))
    return text, spans


class ProposalBar(Widget):
    """One line that takes the status line's place while a proposal waits (the two share a row, so
    showing it never moves the panels above). Its Accept, Edit and Veto labels are clickable and
    mirror the keys a, e, v (also in the footer); they and the self-score always fit: the action is
    cut to the width left."""

    DEFAULT_CSS = """
    ProposalBar { height: 1; display: none; background: $warning-muted; color: $text; }
    """

    class Chosen(Message):
        """A click on Accept, Edit or Veto (`choice` is accept / edit / veto)."""

        def __init__(self, choice: str) -> None:
            super().__init__()
            self.choice = choice

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self._shown: Any = None
        self._spans: list[tuple[int, int, str]] = []

    @property
    def text(self) -> str:
        return str(self.render())

    def render(self) -> Text:
        if self._shown is None:
            self._spans = []
            return Text()
        width = self.content_region.width or self.app.size.width
        text, self._spans = proposal_line(self._shown.action, self._shown.parsed.self_score, width)
        return text

    def show_proposal(self, proposal: Any) -> bool:
        """Show an engine Proposal (or hide the line with None); True when its visibility changed."""
        if proposal is not self._shown:
            self._shown = proposal
            if proposal is not None:
                self.refresh()
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
