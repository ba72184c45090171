"""A running strip of the self-judged score and the verifier reward per step, on one shared scale."""

from __future__ import annotations

from itertools import groupby
from operator import itemgetter
from typing import Optional, Sequence

from rich.text import Text
from textual.widgets import Static

from s3gym_tui.engine.judging import judging_report, range_text, verdict
from s3gym_tui.models import Step
from s3gym_tui.widgets.signals import follow, release
from s3gym_tui.widgets.verdicts import outside, verdict_colours

BARS = "▁▂▃▄▅▆▇█"
LABEL_WIDTH = 8


def _pct(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:.0%}"


def bar(value: Optional[float], lo: float, hi: float) -> str:
    if value is None:
        return "·"
    if hi <= lo:
        return BARS[0]
    return BARS[max(0, min(len(BARS) - 1, round((value - lo) / (hi - lo) * (len(BARS) - 1))))]


def _append_runs(text: Text, cells: Sequence[tuple[str, str]]) -> None:
    """Append (character, style) cells, one span per run of equal style: a span per bar made each
    frame of the strip cost ~1 ms a line to render (a 64-step episode is 128 spans)."""
    for style, run in groupby(cells, key=itemgetter(1)):
        text.append("".join(char for char, _ in run), style=style)


class ScoreStrip(Static):
    """Two sparkline rows, one column per step (the latest steps when the strip is narrow), both
    scaled to the same range (including 0), self bars coloured by agreement; then the episode's
    self-judging figures from engine.judging. The text is built in `render`, at the width it is drawn at:
    the first frame of a screen already shows the bars that fit (no redraw once its size is known)."""

    DEFAULT_CSS = """
    ScoreStrip { height: 5; text-wrap: nowrap; text-overflow: ellipsis; }
    """

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__("", id=id, classes=classes)
        self._steps: list[Step] = []
        self._game: Optional[str] = None  # the episode's game and mode (its self-scores' step range)
        self._mode: Optional[str] = None
        self._drawn: Optional[tuple[int, Text]] = None  # (width, text) last built

    def on_mount(self) -> None:
        self.border_title = "Self-score vs reward"
        follow(self, self.app.theme_changed_signal, lambda _theme: self._redraw())

    def on_unmount(self) -> None:
        release(self)  # a signal subscription would keep this widget alive

    def show_steps(self, steps: Sequence[Step], game: Optional[str] = None, mode: Optional[str] = None) -> None:
        """The episode's steps; with its `game` and `mode`, the self-scores out of range are counted."""
        self._steps = list(steps)
        self._game, self._mode = game, mode
        self._redraw()

    def _redraw(self) -> None:
        self._drawn = None
        self.refresh()

    def render(self) -> Text:
        width = self.content_size.width
        if self._drawn is None or self._drawn[0] != width:  # the bars shown depend on the width only
            self._drawn = (width, self._build(width))
        return self._drawn[1]

    def _build(self, content_width: int) -> Text:
        width = max(4, content_width - LABEL_WIDTH)
        shown = self._steps[-width:]
        values = [s.reward for s in shown] + [s.self_score for s in shown if s.self_score is not None]
        lo, hi = min([0.0, *values]), max([0.0, *values])
        colours = verdict_colours(self.app)
        primary = (getattr(self.app, "theme_variables", {}) or {}).get("text-primary", "blue")
        text = Text(no_wrap=True, overflow="ellipsis")
        text.append("self".ljust(LABEL_WIDTH), style="bold")
        _append_runs(text, [(bar(s.self_score, lo, hi), colours[verdict(s.self_score, s.reward)]) for s in shown])
        text.append("\n")
        text.append("reward".ljust(LABEL_WIDTH), style="bold")
        _append_runs(text, [(bar(s.reward, lo, hi), primary) for s in shown])
        text.append("\n")
        pairs = [(s.self_score, s.reward) for s in self._steps]
        report = judging_report(pairs)
        line = (f"agree {_pct(report.agreement)} · over {_pct(report.over)} · under {_pct(report.under)}"
                f" · n={report.n}")
        if report.missing:
            line += f" · {report.missing} without s"
        marked = sum(outside(self._game, self._mode, s) for s, _ in pairs)
        if marked:
            line += f" · {marked} s outside {range_text(self._game, self._mode)}"
        if self._steps:
            line += f" · scale {lo:g}..{hi:g}"
        text.append(line, style="dim")
        return text
