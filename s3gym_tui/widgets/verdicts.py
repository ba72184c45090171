"""How a step's self-judgement is drawn: s and r in the verdict's theme colour with its mark beside them.

The verdict itself is engine.judging.verdict (the one definition the metrics use); the marks and
labels are engine.glossary's. Colours come from the current theme (green agree, red over-confident,
yellow under-confident, dim without a self-score); the mark carries the verdict where colour does
not (NO_COLOR, a monochrome terminal, a cursor row)."""

from __future__ import annotations

from typing import Optional

from rich.text import Text

from s3gym_tui.engine.glossary import VERDICT_LABELS, VERDICT_MARKS, VERDICT_MEANINGS
from s3gym_tui.engine.judging import VERDICTS, Verdict, verdict
from s3gym_tui.engine.prompts import format_score

LONG_LABELS: dict[str, str] = {"agree": "agrees", "over": "over-confident", "under": "under-confident",
                               "missing": "no self-score"}


def verdict_colours(app) -> dict[str, str]:
    """Theme-aware colours: agreement green, over-confidence red, under-confidence yellow."""
    v = getattr(app, "theme_variables", {}) or {}
    return {"agree": v.get("text-success", "green"), "over": v.get("text-error", "red"),
            "under": v.get("text-warning", "yellow"), "missing": "dim"}


def mark_text(app, kind: Verdict) -> Text:
    """The verdict's one-character mark, bold in its colour."""
    return Text(VERDICT_MARKS[kind], style=f"bold {verdict_colours(app)[kind]}")


def judged_value(app, value: Optional[float], kind: Verdict) -> Text:
    """A self-score or reward ('?' when missing) in the colour of its step's verdict."""
    return Text(format_score(value), style=verdict_colours(app)[kind])


def judgement_text(app, self_score: Optional[float], reward: float, short: bool = False) -> Text:
    """'▲ over-confident' (mark and words; 'short': '▲ over') in the verdict's colour."""
    kind = verdict(self_score, reward)
    words = (VERDICT_LABELS if short else LONG_LABELS)[kind]
    return Text(f"{VERDICT_MARKS[kind]} {words}", style=verdict_colours(app)[kind])


def legend(app) -> Text:
    """'✓ agree ▲ over ▼ under ? no s', each in its colour (a table's caption)."""
    colours = verdict_colours(app)
    text = Text()
    for i, kind in enumerate(VERDICTS):
        if i:
            text.append(" ")
        text.append(f"{VERDICT_MARKS[kind]} {VERDICT_LABELS[kind]}", style=colours[kind])
    return text


def legend_rows(app) -> list[tuple[Text, str]]:
    """(mark and label in colour, meaning) per verdict: the help screen's colour table."""
    colours = verdict_colours(app)
    return [(Text(f"{VERDICT_MARKS[k]} {VERDICT_LABELS[k]}", style=f"bold {colours[k]}"), VERDICT_MEANINGS[k])
            for k in VERDICTS]
