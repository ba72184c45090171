"""A unified diff of two summary versions, coloured: additions green, removals red, hunks dim."""

from __future__ import annotations

from typing import Optional, Sequence

from rich.text import Text
from textual.widgets import Static

from s3gym_tui.textgate import safe_text


def diff_text(lines: Sequence[str]) -> Text:
    """Colour the lines of a unified diff (as engine.compare.summary_diff returns them)."""
    if not lines:
        return Text("The two versions are identical.", style="italic")
    text = Text()
    for line in lines:
        if line.startswith(("+++", "---")):
            style = "bold"
        elif line.startswith("@@"):
            style = "cyan"
        elif line.startswith("+"):
            style = "green"
        elif line.startswith("-"):
            style = "red"
        else:
            style = ""
        text.append(line + "\n", style=style)
    text.rstrip()
    return text


class SummaryDiff(Static):
    """Shows a summary diff; `show(lines, title)`."""

    DEFAULT_CSS = """
    SummaryDiff { height: auto; padding: 0 1; }
    """

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__("", id=id, classes=classes)
        self.lines: tuple[str, ...] = ()

    def show(self, lines: Sequence[str], title: str = "Diff") -> None:
        self.lines = tuple(lines)
        self.border_title = safe_text(title, one_line=True)
        self.update(safe_text(diff_text(lines)))  # the summaries' own text, as a model or a person wrote it
