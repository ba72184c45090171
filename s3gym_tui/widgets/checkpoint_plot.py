"""A terminal line plot of one or more curves (checkpoint means, cumulative scores), via textual-plotext."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from rich.text import Text
from textual_plotext import PlotextPlot

from s3gym_tui.engine.glossary import fmt_metric
from s3gym_tui.textgate import safe

# Each curve its own colour and marker, so curves stay apart in colour and in black and white; the
# markers are single characters every font used for the PNGs has (plotext's braille does not render).
STYLES: tuple[tuple[str, str], ...] = (("cyan", "●"), ("magenta", "■"), ("yellow", "▲"), ("green", "◆"),
                                       ("red", "✚"), ("blue", "○"), ("white", "□"), ("orange", "△"))
RICH_COLOURS = {"orange": "dark_orange"}  # plotext's names Rich does not know (the legend is Rich text)
MAX_X_TICKS = 12


@dataclass(frozen=True)
class Curve:
    """One series: a label and its points (a point whose y is None is left out)."""

    label: str
    points: tuple[tuple[float, Optional[float]], ...]


def drawn_groups(curves: Sequence[Curve]) -> list[tuple[tuple[float, float], ...] | list]:
    """Curves with identical present points merged: [(points, [labels])], in first-seen order.
    Two runs with the same curve are drawn once and named together, instead of one hiding the other.
    Labels (run ids, training ids) come through the gate: the plot, its legend and titles show them."""
    groups: list = []
    for curve in curves:
        points = tuple((float(x), float(y)) for x, y in curve.points if y is not None)
        if not points:
            continue
        label = safe(curve.label, one_line=True, max_chars=80)
        for group in groups:
            if group[0] == points:
                group[1].append(label)
                break
        else:
            groups.append((points, [label]))
    return groups


def integer_ticks(xs: Sequence[float]) -> list[int]:
    """Whole-number x ticks at the curves' x values (checkpoints), thinned to at most MAX_X_TICKS."""
    values = sorted({int(round(x)) for x in xs})
    if len(values) > MAX_X_TICKS:
        step = -(-len(values) // MAX_X_TICKS)
        values = values[::step] + ([values[-1]] if values[-1] not in values[::step] else [])
    return values


def y_ticks(ys: Sequence[float], count: int = 5) -> list[float]:
    lo, hi = min(ys), max(ys)
    if hi == lo:
        return [lo]
    return [lo + (hi - lo) * i / (count - 1) for i in range(count)]


class CurvePlot(PlotextPlot):
    """Plots the curves it is given (`show`); it computes nothing itself. Whole-number x ticks at the
    data's x values, y ticks in the report's number format, a colour and a marker per curve, equal
    curves drawn once. With `legend="beside"` the legend is not drawn on the data: `legend_text()`
    gives it for a widget beside the plot."""

    DEFAULT_CSS = """
    CurvePlot { height: 1fr; min-height: 8; }
    """

    def __init__(self, title: str = "", xlabel: str = "", ylabel: str = "", *, legend: str = "inside",
                 id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._title, self._xlabel, self._ylabel = title, xlabel, ylabel
        self._curves: tuple[Curve, ...] = ()
        self._empty_text = "no data yet"
        self._vline: Optional[float] = None
        self.legend = legend

    @property
    def curves(self) -> tuple[Curve, ...]:
        return self._curves

    def on_mount(self) -> None:
        super().on_mount()
        self._draw()

    def on_unmount(self) -> None:
        # PlotextPlot subscribes to the theme signal and never unsubscribes (see widgets.signals)
        self.app.theme_changed_signal.unsubscribe(self)

    def show(self, curves: Sequence[Curve], title: Optional[str] = None, empty_text: str = "no data yet",
             vline: Optional[float] = None) -> None:
        """Replace the plotted curves (optionally the title, and a vertical line at x = vline)."""
        self._curves = tuple(curves)
        self._vline = vline
        if title is not None:
            self._title = title
        self._empty_text = empty_text
        self._draw()

    def legend_text(self) -> Text:
        """The legend: each drawn curve's marker in its colour, its label(s) and its last value."""
        text = Text()
        for k, (points, labels) in enumerate(drawn_groups(self._curves)):
            colour, marker = STYLES[k % len(STYLES)]
            if k:
                text.append("\n")
            text.append(f"{marker} ", style=f"bold {RICH_COLOURS.get(colour, colour)}")
            text.append(" = ".join(labels), style="bold" if len(labels) == 1 else "bold italic")
            if len(labels) > 1:
                text.append(" (same curve)", style="italic")
            text.append(f"\n   last {fmt_metric(points[-1][1])} at x={points[-1][0]:g}", style="dim")
        if not text:
            text.append(self._empty_text, style="italic")
        return text

    def legend_line(self) -> str:
        """The legend on one line (for a border title): each marker and its label(s)."""
        parts = []
        for k, (_, labels) in enumerate(drawn_groups(self._curves)):
            marker = STYLES[k % len(STYLES)][1]
            parts.append(f"{marker} {' = '.join(labels)}" + (" (same curve)" if len(labels) > 1 else ""))
        return "  ".join(parts)

    def _draw(self) -> None:
        plt = self.plt
        plt.clear_figure()
        plt.title(safe(self._title, one_line=True, max_chars=200))
        if self._xlabel:
            plt.xlabel(self._xlabel)
        if self._ylabel:
            plt.ylabel(self._ylabel)
        groups = drawn_groups(self._curves)
        all_x: list[float] = []
        all_y: list[float] = []
        for k, (points, labels) in enumerate(groups):
            colour, marker = STYLES[k % len(STYLES)]
            xs, ys = zip(*points)
            all_x.extend(xs)
            all_y.extend(ys)
            label = None if self.legend == "beside" else " = ".join(labels)
            plt.plot(list(xs), list(ys), marker=marker, color=colour, label=label)
        if groups:
            ticks = integer_ticks(all_x)
            plt.xticks(ticks, [str(t) for t in ticks])
            # about one tick per two rows (title, x ticks and x label take three): ticks that
            # share a row leave it to plotext which label is drawn there
            yt = y_ticks(all_y, count=max(2, min(5, (self.size.height - 2) // 2)))
            plt.yticks(yt, [fmt_metric(y) for y in yt])
            if len(set(all_x)) == 1:  # one x: give the axis some width so the point is visible
                plt.xlim(all_x[0] - 1, all_x[0] + 1)
        if groups and self._vline is not None:
            plt.vline(self._vline, "gray")
        if not groups:
            plt.title(f"{self._title} ({self._empty_text})" if self._title else self._empty_text)
        self.refresh()
