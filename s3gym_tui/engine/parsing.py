"""Parse the response contract `Answer: <ACTION>, Score: <S>` out of a model reply."""

from __future__ import annotations

import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

_ANSWER = re.compile(r"answer\s*[:：]", re.IGNORECASE)
_SCORE = re.compile(r",?\s*score\s*[:：=]\s*(?P<num>[-+]?\s*\d+(?:\.\d+)?(?:\s*/\s*\d+)?)?", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MARKUP = re.compile(r"[*`]+|^\s*[#>]+\s*", re.MULTILINE)


@dataclass(frozen=True)
class ParsedReply:
    action: Optional[str]  # None: no parsable answer (an invalid action for the game)
    self_score: Optional[float]  # None: missing or non-numeric (stored as missing, not 0)
    problem: Optional[str] = None  # why parsing was partial, for the step's fault column


def _to_number(text: str) -> Optional[float]:
    try:
        value = float(Fraction(text.replace(" ", "")))
    except (ValueError, ZeroDivisionError):
        return None
    return value if abs(value) < 1e9 else None


def parse_reply(reply: str) -> ParsedReply:
    """Take the last `Answer:` in the reply; the score is the number after `Score:` on that line.

    Markdown emphasis, code ticks and `\\boxed{}` wrappers are stripped first.
    """
    if not isinstance(reply, str) or not reply.strip():
        return ParsedReply(None, None, "empty reply")
    text = _BOXED.sub(lambda m: m.group(1), reply.replace("\r", ""))
    text = _MARKUP.sub("", text)
    matches = list(_ANSWER.finditer(text))
    if not matches:
        return ParsedReply(None, None, "no 'Answer:' line in the reply")
    line = text[matches[-1].end():].split("\n", 1)[0]
    score_matches = list(_SCORE.finditer(line))
    if score_matches:
        last = score_matches[-1]
        action = line[:last.start()]
        number = last.group("num")
        score = _to_number(number) if number else None
    else:
        action, score = line, None
    action = action.strip().strip(",;").strip()
    if action.startswith("<") and action.endswith(">"):
        action = action[1:-1].strip()
    # An empty action is passed on as "" (some games accept it, e.g. a PvZ turn with no planting).
    problem = None if score is not None else "missing or non-numeric self-score"
    return ParsedReply(action, score, problem)
