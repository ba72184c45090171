"""A found line as a Rich Text: gated first (s3gym_tui.textgate), then the words that matched
styled, so a hostile reply can neither drive the terminal nor hide where it matched. Used by
`s3gym search` and the app's Search screen."""

from __future__ import annotations

from typing import Sequence

from rich.text import Text

from s3gym_tui.store.search import Term, match_spans
from s3gym_tui.textgate import safe

MATCH_STYLE = "bold reverse"


def highlighted(line: str, terms: Sequence[Term], style: str = MATCH_STYLE, *, max_chars: int = 400) -> Text:
    """One line of stored text, safe for a terminal, with every matching word in `style`."""
    text = Text(safe(line, one_line=True, max_chars=max_chars))
    for start, end in match_spans(text.plain, terms):
        text.stylize(style, start, end)
    return text
