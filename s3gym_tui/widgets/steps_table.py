"""Per-step table: action, self-judged score next to the verifier reward, coloured by agreement."""

from __future__ import annotations

from typing import Optional, Sequence

from rich.text import Text
from textual.widgets import DataTable

from s3gym_tui.engine.judging import agreement, over_confidence
from s3gym_tui.engine.prompts import format_score
from s3gym_tui.models import Step

VERDICT_LABELS = {"agree": "agree", "over": "over", "under": "under", "missing": "no s"}
ACTOR_LABELS = {"model": "model", "human": "human", "human-edit": "edit"}


def verdict(self_score: Optional[float], reward: float) -> str:
    """'agree' when (s > 0) == (r > 0), 'over' when s > 0 >= r, 'under' when s <= 0 < r,
    'missing' without a self-score (classified with the engine's judging functions)."""
    pair = [(self_score, reward)]
    agreed = agreement(pair)
    if agreed is None:
        return "missing"
    if agreed == 1.0:
        return "agree"
    return "over" if over_confidence(pair) == 1.0 else "under"


def verdict_colours(app) -> dict[str, str]:
    """Theme-aware colours: agreement green, over-confidence red, under-confidence yellow."""
    v = getattr(app, "theme_variables", {}) or {}
    return {"agree": v.get("text-success", "green"), "over": v.get("text-error", "red"),
            "under": v.get("text-warning", "yellow"), "missing": "dim"}


def clip(text: str, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


class StepsTable(DataTable):
    """One row per stored step. With `original` steps (a fork's source), an extra column shows
    the source's action at the same index, so where the fork diverged is visible."""

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes, cursor_type="row", zebra_stripes=True)
        self._steps: list[Step] = []
        self._original: Optional[list[Step]] = None
        self._columns_for: Optional[bool] = None

    def on_mount(self) -> None:
        self.border_title = "Steps: self-judged s vs verifier r"
        self._ensure_columns()
        self.app.theme_changed_signal.subscribe(self, lambda _theme: self._rebuild())

    def _ensure_columns(self) -> None:
        fork = self._original is not None
        if self._columns_for == fork:
            return
        self.clear(columns=True)
        self.add_column("#", key="index")
        self.add_column("s", key="s")
        self.add_column("r", key="r")
        self.add_column("judged", key="verdict")
        self.add_column("action", key="action")
        self.add_column("by", key="actor")
        if fork:
            self.add_column("original", key="original")
        self._columns_for = fork

    def _cells(self, step: Step) -> list:
        colours = verdict_colours(self.app)
        kind = verdict(step.self_score, step.reward)
        style = colours[kind]
        action = clip(step.action, 18)
        if not step.valid:
            action = Text(action + " ✗", style="italic")
        cells: list = [
            str(step.index),
            Text(format_score(step.self_score), style=style, justify="right"),
            Text(f"{step.reward:g}", style=style, justify="right"),
            Text(VERDICT_LABELS[kind], style=f"bold {style}"),
            action,
            ACTOR_LABELS.get(step.actor, step.actor),
        ]
        if self._original is not None:
            if step.index < len(self._original):
                theirs = self._original[step.index].action
                same = theirs == step.action
                cells.append(Text(("= " if same else "≠ ") + clip(theirs, 18),
                                  style="dim" if same else "bold"))
            else:
                cells.append(Text("–", style="dim"))
        return cells

    # ----- public API -------------------------------------------------------------------
    @property
    def steps(self) -> list[Step]:
        return list(self._steps)

    def set_steps(self, steps: Sequence[Step], original: Optional[Sequence[Step]] = None) -> None:
        self._steps = list(steps)
        self._original = list(original) if original is not None else None
        self._rebuild()

    def append_step(self, step: Step) -> None:
        self._steps.append(step)
        if self.is_mounted:
            self._ensure_columns()
            self.add_row(*self._cells(step), key=str(step.index))
            self.move_cursor(row=self.row_count - 1)

    def select_index(self, index: int) -> None:
        if 0 <= index < self.row_count:
            self.move_cursor(row=index)

    def _rebuild(self) -> None:
        if not self.is_mounted:
            return
        row = self.cursor_row
        self._columns_for = None
        self._ensure_columns()
        for step in self._steps:
            self.add_row(*self._cells(step), key=str(step.index))
        if self._steps:
            self.move_cursor(row=min(max(row, 0), len(self._steps) - 1))
