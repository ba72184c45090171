"""The terminal's cells as a Textual app left them, rebuilt from the updates it renders."""

from __future__ import annotations


class ScreenCells:
    """What the terminal shows, cell by cell, rebuilt from the compositor's updates (the same segments
    Textual writes to a real terminal). `apply` returns how many cells an update changed: a frame that
    rewrites identical cells (a scrollbar refreshed to the same position, a second layout pass that
    moves nothing) changes nothing a person can see."""

    def __init__(self, console) -> None:
        self.console = console
        self.cells: dict[tuple[int, int], tuple[str, object]] = {}

    def apply(self, update) -> int:
        from rich.cells import cell_len
        from rich.segment import ControlType

        changed = x = y = 0
        for segment in update.__rich_console__(self.console, self.console.options):
            if segment.control:
                for code in segment.control:
                    if code[0] == ControlType.CURSOR_MOVE_TO:
                        x, y = code[1], code[2]
                continue
            if segment.text == "\n":
                continue
            for char in segment.text:
                cell = (char, segment.style)
                if self.cells.get((x, y)) != cell:
                    self.cells[(x, y)] = cell
                    changed += 1
                x += 1 if char.isascii() else cell_len(char)
        return changed
