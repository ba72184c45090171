"""The chess boards for the terminal: one board large with coordinates, the others in a strip beside it."""

from __future__ import annotations

from typing import Sequence

from rich.console import Console, ConsoleOptions, RenderResult
from rich.measure import Measurement
from rich.text import Text

PALETTE = ("bold red", "bold green", "bold yellow", "bold blue", "bold magenta", "bold cyan",
           "bold bright_red", "bold bright_green", "bold bright_blue", "bold bright_magenta")
GAP = 2  # columns between boards


def piece_styles(pieces: Sequence[str]) -> dict[str, str]:
    return {p: PALETTE[i % len(PALETTE)] for i, p in enumerate(pieces)}


class ChessBoards:
    """The last boards (oldest first, labelled t-6 .. t0) as the terminal shows them.

    The board in focus (t0 unless `focus` counts back from it) is drawn large: cells spaced, row
    numbers on the left, column numbers on top (tens over units), so a cell reads as (row,col). The
    other boards follow in a compact strip, as many as fit the width, nearest to the focused one
    first; the ones left out are named underneath. A legend of the pieces closes it. Nothing wraps:
    at any width the focused board is whole (it needs 3 + 2n - 1 columns)."""

    def __init__(self, labels: Sequence[str], boards: Sequence[Sequence[str]], pieces: Sequence[str],
                 focus: int = 0) -> None:
        self.labels = tuple(labels)
        self.boards = tuple(tuple(b) for b in boards)
        self.pieces = tuple(pieces)
        self.styles = piece_styles(self.pieces)
        self.focus = max(0, min(int(focus), len(self.boards) - 1))
        self.size = len(self.boards[-1]) if self.boards else 0

    # ----- geometry -----------------------------------------------------------------------
    @property
    def frames(self) -> int:
        return len(self.boards)

    @property
    def focused_index(self) -> int:
        """Index into boards/labels (oldest first) of the board in focus."""
        return len(self.boards) - 1 - self.focus

    def big_width(self) -> int:
        return 3 + 2 * self.size - 1

    def small_width(self) -> int:
        return max(self.size, 4)

    def full_width(self) -> int:
        return self.big_width() + (self.frames - 1) * (GAP + self.small_width())

    def strip_order(self) -> list[int]:
        """Indices of the other boards, nearest to the focused one first (ties: the newer first)."""
        f = self.focused_index
        others = [i for i in range(self.frames) if i != f]
        return sorted(others, key=lambda i: (abs(i - f), -i))

    def layout(self, width: int) -> tuple[list[int], list[int]]:
        """(strip board indices shown, in time order; hidden indices) at this width."""
        room = max(0, width - self.big_width())
        fit = room // (GAP + self.small_width())
        order = self.strip_order()
        shown = sorted(order[:fit])
        hidden = sorted(order[fit:])
        return shown, hidden

    # ----- drawing ---------------------------------------------------------------------------
    def _cell(self, text: Text, ch: str) -> None:
        text.append(ch, style=self.styles.get(ch, "dim"))

    def _big_lines(self) -> list[Text]:
        n = self.size
        i = self.focused_index
        label = self.labels[i] + (" (now)" if i == self.frames - 1 else "")
        lines = [Text(label.ljust(self.big_width()), style="bold reverse" if self.focus else "bold")]
        tens = Text("   " + " ".join(str(c // 10) if c >= 10 else " " for c in range(n)), style="dim")
        units = Text("   " + " ".join(str(c % 10) for c in range(n)), style="dim")
        lines += [tens, units]
        for r, row in enumerate(self.boards[i]):
            line = Text(f"{r:>2} ", style="dim")
            for k, ch in enumerate(row):
                if k:
                    line.append(" ")
                self._cell(line, ch)
            lines.append(line)
        return lines

    def _small_lines(self, i: int) -> list[Text]:
        w = self.small_width()
        lines = [Text(self.labels[i].ljust(w), style="bold"), Text(" " * w), Text(" " * w)]
        for row in self.boards[i]:
            line = Text()
            for ch in row:
                self._cell(line, ch)
            lines.append(line)
        return lines

    def legend(self, hidden: Sequence[int]) -> list[Text]:
        text = Text("Pieces: ", style="bold")
        for p in self.pieces:
            text.append(p, style=self.styles[p])
            text.append(" ")
        text.append("(case-sensitive) · . empty · (row,col)", style="dim")
        lines = [text]
        if hidden:
            lines.append(Text("not shown at this width: " + ", ".join(self.labels[i] for i in hidden),
                              style="dim italic"))
        return lines

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        if not self.boards:
            yield Text("(no board)")
            return
        shown, hidden = self.layout(options.max_width)
        big = self._big_lines()
        f = self.focused_index  # time order: strip boards older than the focused one go to its left
        ordered = [self._small_lines(i) for i in shown if i < f] + [big] + \
                  [self._small_lines(i) for i in shown if i > f]
        gap = " " * GAP
        for y in range(len(big)):
            line = Text(no_wrap=True, overflow="crop", end="\n")
            for k, col in enumerate(ordered):
                if k:
                    line.append(gap)
                line.append_text(col[y])
            yield line
        for line in self.legend(hidden):
            line.no_wrap = False
            yield line

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        return Measurement(self.big_width(), max(self.big_width(), self.full_width()))
