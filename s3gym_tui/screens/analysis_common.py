"""Shared bits of the analysis screens (protocol, summaries, compare, pairs, report): the base
screen (Back key, bindings in the command palette) and number formatting."""

from __future__ import annotations

from typing import Optional

from textual.binding import Binding
from textual.screen import Screen

from s3gym_tui.widgets.commands import BindingCommands

from s3gym_tui.engine.glossary import DASH, DECIMALS, fmt_metric  # noqa: E402,F401 - DASH re-exported
from s3gym_tui.engine.glossary import fmt_signed as glossary_signed  # noqa: E402


def fmt(value: Optional[float], digits: int = DECIMALS) -> str:
    """A metric for a table cell: the app's one number format (engine.glossary), '—' when undefined."""
    return fmt_metric(value, digits)


def fmt_signed(value: Optional[float], digits: int = DECIMALS) -> str:
    return glossary_signed(value, digits)


def fmt_score(value: Optional[float]) -> str:
    """A self-score or reward: '?' when missing (a reply without a score)."""
    return "?" if value is None else f"{float(value):g}"


class AnalysisScreen(Screen):
    """Base of the analysis screens: Escape goes back; every binding is a palette command."""

    COMMANDS = Screen.COMMANDS | {BindingCommands}
    BINDINGS = [Binding("escape", "back", "Back", id="back")]

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
