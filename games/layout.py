"""Width-aware rich layout helpers for the games' terminal renderings (side by side when it fits)."""

from __future__ import annotations

from rich.console import Console, ConsoleOptions, Group, RenderableType, RenderResult
from rich.measure import Measurement
from rich.table import Table


class Beside:
    """`left` and `right` side by side when both fit the width they are given, else `right` under
    `left`. Neither is ever squeezed: each keeps its natural width, so boards never wrap."""

    def __init__(self, left: RenderableType, right: RenderableType, gap: int = 3) -> None:
        self.left, self.right, self.gap = left, right, gap

    def _widths(self, console: Console, options: ConsoleOptions) -> tuple[int, int, int]:
        left = Measurement.get(console, options, self.left)
        right = Measurement.get(console, options, self.right)
        return left.maximum, right.minimum, right.maximum

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        left_w, right_min, right_max = self._widths(console, options)
        if left_w + self.gap + right_min <= options.max_width:
            grid = Table.grid(padding=(0, self.gap, 0, 0))
            grid.add_column(width=left_w, no_wrap=True)
            grid.add_column(min_width=min(right_max, options.max_width - left_w - self.gap))
            grid.add_row(self.left, self.right)
            yield grid
        else:
            yield Group(self.left, self.right)

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        left_w, right_min, right_max = self._widths(console, options)
        return Measurement(max(left_w, right_min), left_w + self.gap + right_max)


class Tiles:
    """Equal-width tiles (e.g. the rotations of a piece) in rows of as many as fit, choosing among
    `per_row` counts (4, then 2, then 1 by default): a tile is never split or wrapped."""

    def __init__(self, tiles: list[RenderableType], gap: int = 3, per_row: tuple[int, ...] = (4, 2, 1)) -> None:
        self.tiles, self.gap, self.per_row = list(tiles), gap, tuple(sorted(per_row, reverse=True))

    def _tile_width(self, console: Console, options: ConsoleOptions) -> int:
        return max((Measurement.get(console, options, t).maximum for t in self.tiles), default=1)

    def _row_width(self, tile: int, count: int) -> int:
        return count * tile + (count - 1) * self.gap

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        tile = self._tile_width(console, options)
        count = next((k for k in self.per_row if self._row_width(tile, k) <= options.max_width),
                     self.per_row[-1])
        grid = Table.grid(padding=(0, self.gap, 0, 0))
        for _ in range(count):
            grid.add_column(width=tile, no_wrap=True)
        for start in range(0, len(self.tiles), count):
            row = self.tiles[start:start + count]
            grid.add_row(*row, *([""] * (count - len(row))))
        yield grid

    def __rich_measure__(self, console: Console, options: ConsoleOptions) -> Measurement:
        tile = self._tile_width(console, options)
        smallest = min((k for k in self.per_row if k > 1), default=1)  # one per row only as a last resort
        return Measurement(self._row_width(tile, min(smallest, len(self.tiles))),
                           self._row_width(tile, min(self.per_row[0], len(self.tiles))))
