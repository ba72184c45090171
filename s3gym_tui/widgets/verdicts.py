"""How a step's self-judgement is drawn: s and r in the verdict's theme colour with its mark beside them.

The verdict itself is engine.judging.verdict (the one definition the metrics use); the marks and
labels are engine.glossary's. Colours come from the current theme (green agree, red over-confident,
yellow under-confident, dim without a self-score); the mark carries the verdict where colour does
not (NO_COLOR, a monochrome terminal, a cursor row).

A self-score outside what one step of its game can pay (engine.judging.out_of_range, decided there)
carries OUT_OF_RANGE_MARK after its value, and a note names the game's range."""

from __future__ import annotations

from typing import Optional, Sequence

from rich.text import Text

import s3gym_games as games
from s3gym_games.base import GameError

from s3gym_tui.engine.glossary import (OUT_OF_RANGE_MARK, OUT_OF_RANGE_MEANING, VERDICT_LABELS, VERDICT_MARKS,
                                      VERDICT_MEANINGS)
from s3gym_tui.engine.judging import VERDICTS, Verdict, out_of_range, out_of_range_note, range_text, verdict
from s3gym_games.prompt import format_score

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


def mark_colour(app) -> str:
    """The out-of-range mark's colour: the theme's error colour."""
    return (getattr(app, "theme_variables", {}) or {}).get("text-error", "red")


def outside(game: Optional[str], mode: Optional[str], self_score: Optional[float]) -> bool:
    """engine.judging.out_of_range (the one decision); False where the game or its mode is not known, so
    a damaged row is still shown."""
    if game is None or mode is None:
        return False
    try:
        return out_of_range(game, mode, self_score)
    except (GameError, KeyError):
        return False


def range_note(game: Optional[str], mode: Optional[str], self_score: Optional[float]) -> Optional[str]:
    """'outside what one step of trust can pay: -1..3' when the self-score is out of range (the engine
    decides), else None (also when the game is not known)."""
    return out_of_range_note(game, mode) if outside(game, mode, self_score) else None


def self_score_value(app, value: Optional[float], kind: Optional[Verdict], outside: bool) -> Text:
    """A self-score in its verdict's colour (judged_value; plain without a verdict, e.g. a proposal not yet
    executed), the out-of-range mark after it when `outside`."""
    text = judged_value(app, value, kind) if kind is not None else Text(format_score(value))
    if outside:
        text.append(OUT_OF_RANGE_MARK, style=f"bold {mark_colour(app)}")
    return text


def range_note_text(app, note: str) -> Text:
    """'! outside what one step of trust can pay: -1..3' in the mark's colour."""
    return Text(f"{OUT_OF_RANGE_MARK} {note}", style=mark_colour(app))


def judgement_text(app, self_score: Optional[float], reward: float, short: bool = False) -> Text:
    """'▲ over-confident' (mark and words; 'short': '▲ over') in the verdict's colour."""
    kind = verdict(self_score, reward)
    words = (VERDICT_LABELS if short else LONG_LABELS)[kind]
    return Text(f"{VERDICT_MARKS[kind]} {words}", style=verdict_colours(app)[kind])


def legend(app, out_of_range_games: Sequence[tuple[str, str]] = ()) -> Text:
    """'✓ agree ▲ over ▼ under ? no s', each in its colour (a table's caption); with the (game, mode)s
    of the steps marked out of range, the mark's meaning first: '! s outside -1..3'."""
    colours = verdict_colours(app)
    text = Text()
    ranges = list(dict.fromkeys(range_text(game, mode) for game, mode in out_of_range_games))
    if ranges:
        text.append(f"{OUT_OF_RANGE_MARK} s outside {' / '.join(ranges)} ", style=f"bold {mark_colour(app)}")
    for i, kind in enumerate(VERDICTS):
        if i:
            text.append(" ")
        text.append(f"{VERDICT_MARKS[kind]} {VERDICT_LABELS[kind]}", style=colours[kind])
    return text


def legend_rows(app) -> list[tuple[Text, str]]:
    """(mark and label in colour, meaning) per verdict: the help screen's colour table."""
    colours = verdict_colours(app)
    return [(Text(f"{VERDICT_MARKS[k]} {VERDICT_LABELS[k]}", style=f"bold {colours[k]}"), VERDICT_MEANINGS[k])
            for k in VERDICTS] + [(Text(f"{OUT_OF_RANGE_MARK} after s", style=f"bold {mark_colour(app)}"),
                                   f"{OUT_OF_RANGE_MEANING}; one step pays: "
                                   + ", ".join(f"{game} {range_text(game)}" for game in games.names()))]
