"""A terminal line plot of one or more curves (checkpoint means, cumulative scores), via textual-plotext."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from textual_plotext import PlotextPlot

MARKER = "hd"  # renders in terminals, SVG and PNG alike (plotext's braille default does not in PNG)


@dataclass(frozen=True)
class Curve:
    """One series: a label and its points (a point whose y is None is left out)."""

    label: str
    points: tuple[tuple[float, Optional[float]], ...]


class CurvePlot(PlotextPlot):
    """Plots the curves it is given (`show`); it computes nothing itself."""

    DEFAULT_CSS = """
    CurvePlot { height: 1fr; min-height: 8; }
    """

    def __init__(self, title: str = "", xlabel: str = "", ylabel: str = "", *,
                 id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._title, self._xlabel, self._ylabel = title, xlabel, ylabel
        self._curves: tuple[Curve, ...] = ()
        self._empty_text = "no data yet"
        self._vline: Optional[float] = None

    @property
    def curves(self) -> tuple[Curve, ...]:
        return self._curves

    def on_mount(self) -> None:
        super().on_mount()
        self._draw()

    def show(self, curves: Sequence[Curve], title: Optional[str] = None, empty_text: str = "no data yet",
             vline: Optional[float] = None) -> None:
        """Replace the plotted curves (optionally the title, and a vertical line at x = vline)."""
        self._curves = tuple(curves)
        self._vline = vline
        if title is not None:
            self._title = title
        self._empty_text = empty_text
        self._draw()

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        plt.title(self._title)
        if self._xlabel:
            plt.xlabel(self._xlabel)
        if self._ylabel:
            plt.ylabel(self._ylabel)
        drawn = 0
        for curve in self._curves:
            points = [(float(x), float(y)) for x, y in curve.points if y is not None]
            if not points:
                continue
            xs, ys = zip(*points)
            plt.plot(list(xs), list(ys), marker=MARKER, label=curve.label)
            drawn += 1
        if drawn and self._vline is not None:
            plt.vline(self._vline, "gray")
        if not drawn:
            plt.title(f"{self._title} ({self._empty_text})" if self._title else self._empty_text)
        self.refresh()
