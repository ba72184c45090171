"""The proposal bar of propose-then-wait: the model's proposed action with accept, edit and veto."""

from __future__ import annotations

from typing import Any, Optional

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Button, Static

from s3gym_tui.engine.prompts import format_score


class ProposalBar(Horizontal):
    """Hidden until a proposal waits. Buttons (mouse) mirror the keys a, e, v; they do not take focus."""

    DEFAULT_CSS = """
    ProposalBar { height: auto; display: none; border: round $warning; padding: 0 1; }
    ProposalBar > #proposal-text { width: 1fr; height: 3; content-align: left middle; text-style: bold; }
    ProposalBar > Button { margin-left: 1; width: auto; min-width: 10; }
    """

    def __init__(self, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self._shown: Any = None

    def compose(self) -> ComposeResult:
        yield Static("", id="proposal-text")
        yield Button("Accept (a)", variant="success", id="proposal-accept")
        yield Button("Edit (e)", variant="primary", id="proposal-edit")
        yield Button("Veto (v)", variant="error", id="proposal-veto")

    def on_mount(self) -> None:
        for button in self.query(Button):
            button.can_focus = False

    def show_proposal(self, proposal: Any) -> None:
        """Show an engine Proposal (or hide the bar with None); repaints only when it changes."""
        if proposal is not None and proposal is not self._shown:
            self.query_one("#proposal-text", Static).update(
                f"Model proposes: {proposal.action}  (self-score {format_score(proposal.parsed.self_score)})"
                ": accept, edit or veto", layout=False)
        self._shown = proposal
        if self.display != (proposal is not None):
            self.display = proposal is not None
