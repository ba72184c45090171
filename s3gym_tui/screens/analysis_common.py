"""Shared bits of the analysis screens (protocol, summaries, compare, pairs, report): the base
screen (Back key, bindings in the command palette) and number formatting."""

from __future__ import annotations

from typing import Optional

from textual.binding import Binding
from textual.screen import Screen

from s3gym_tui.widgets.commands import BindingCommands

DASH = "—"


def fmt(value: Optional[float], digits: int = 3) -> str:
    """A metric for a table cell: '—' when undefined, else at most `digits` decimals."""
    if value is None:
        return DASH
    value = float(value)
    if value != value:  # NaN
        return DASH
    text = f"{value:.{digits}f}".rstrip("0").rstrip(".")
    return "0" if text in ("-0", "") else text


def fmt_signed(value: Optional[float], digits: int = 3) -> str:
    text = fmt(value, digits)
    return f"+{text}" if value is not None and value > 0 and text != DASH else text


def fmt_score(value: Optional[float]) -> str:
    """A self-score or reward: '?' when missing (a reply without a score)."""
    return "?" if value is None else f"{float(value):g}"


def judgement(self_score: Optional[float], reward: float) -> tuple[str, str]:
    """(label, style) of one step's self-judgement, classified by engine.judging."""
    from s3gym_tui.engine.judging import agreement, over_confidence

    pair = [(self_score, reward)]
    if agreement(pair) is None:
        return "no self-score", "dim"
    if agreement(pair) == 1.0:
        return "agrees", "green"
    if over_confidence(pair) == 1.0:
        return "over-confident", "red"
    return "under-confident", "yellow"


class AnalysisScreen(Screen):
    """Base of the analysis screens: Escape goes back; every binding is a palette command."""

    COMMANDS = Screen.COMMANDS | {BindingCommands}
    BINDINGS = [Binding("escape", "back", "Back", id="back")]

    def action_back(self) -> None:
        if len(self.app.screen_stack) > 1:
            self.app.pop_screen()
