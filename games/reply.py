"""Parse the response contract `Answer: <ACTION>, Score: <S>` out of a model reply (public API:
`parse_reply(text) -> ParsedReply`; a reply without an answer is played as NO_ANSWER, an invalid action)."""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass
from fractions import Fraction
from typing import Optional

_ANSWER = re.compile(r"answer\s*[:：]", re.IGNORECASE)
# Where the score starts: the last `Score:` (or `Score =`) on the answer line; what follows is read
# by _read_score, which accepts only a whole number.
_SCORE = re.compile(r",?\s*score\s*[:：=]", re.IGNORECASE)
_BOXED = re.compile(r"\\boxed\{([^{}]*)\}")
_MARKUP = re.compile(r"[*`]+|^\s*[#>]+\s*", re.MULTILINE)

# A plain number: optional sign, digits with an optional fraction (or a bare fraction like .5), an
# optional exponent (1e-3, 0.5e1, 2.5E-1); or a ratio of integers (1/10). Spaces may follow the sign
# and surround the slash.
_NUMBER = re.compile(
    r"(?P<num>[-+]?\s*(?:\d+\s*/\s*\d+(?![\d.eE])|(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?))")
# What may follow a number for it to be whole: the end, white space, or closing punctuation that
# is itself followed by white space or the end ("Score: -1.5." or "Score: 2, because ...").
_AFTER = re.compile(r"$|\s|[.,;:!?)\]}'\"]+(?:\s|$)")
NO_ANSWER = "<no parsable answer>"  # what the game receives when a reply has no Answer line
MAX_ACTION_CHARS = 2_000  # the longest action played and stored; a longer one is cut (and the cut recorded)
SCORE_LIMIT = 1e9  # larger magnitudes are not a reward estimate of any of the games


@dataclass(frozen=True)
class ParsedReply:
    action: Optional[str]  # None: no parsable answer (an invalid action for the game)
    self_score: Optional[float]  # None: missing or non-numeric (stored as missing, not 0)
    problem: Optional[str] = None  # why parsing was partial, for the step's fault column


def _quote(text: str) -> str:
    text = text.strip()
    return repr(text[:24] + ("..." if len(text) > 24 else ""))


def read_score(text: str) -> tuple[Optional[float], Optional[str]]:
    """(value, None) when `text` (what follows `Score:`) starts with a whole plain number; else
    (None, why). A number glued to more characters (`1,5`, `0x10`, `10%`, `1e`) is not read as
    its first digits: it is missing, and the reason says what was there."""
    body = text.strip()
    if not body:
        return None, "missing self-score (nothing after 'Score:')"
    match = _NUMBER.match(body)
    if match is None:
        return None, f"non-numeric self-score {_quote(body)} (stored as missing)"
    rest = body[match.end():]
    if not _AFTER.match(rest):
        token = body.split()[0] if body.split() else body
        return None, f"self-score {_quote(token)} is not a plain number (stored as missing)"
    number = match.group("num").replace(" ", "")
    try:  # a ratio exactly; a decimal as float (Fraction would expand 1e999999 digit by digit)
        value = float(Fraction(number)) if "/" in number else float(number)
    except (ValueError, ZeroDivisionError, OverflowError):
        return None, f"self-score {_quote(match.group('num'))} is not a number (stored as missing)"
    if not math.isfinite(value) or abs(value) >= SCORE_LIMIT:
        return None, f"self-score {_quote(match.group('num'))} is out of range (stored as missing)"
    return value, None


def parse_reply(reply: str) -> ParsedReply:
    """Take the last `Answer:` in the reply; the score is the number after `Score:` on that line.

    Markdown emphasis, code ticks and `\\boxed{}` wrappers are stripped first. The score must be
    one whole number (`2`, `-1.5`, `.5`, `1e-3`, `1/10`); anything else is stored as missing and
    the reason is returned in `problem` (it goes into the step's fault column).
    """
    if not isinstance(reply, str) or not reply.strip():
        return ParsedReply(None, None, "empty reply")
    text = _BOXED.sub(lambda m: m.group(1), reply.replace("\r", ""))
    text = _MARKUP.sub("", text)
    matches = list(_ANSWER.finditer(text))
    if not matches:
        structured = _json_reply(reply)
        if structured is not None:
            return structured
        return ParsedReply(None, None, "no 'Answer:' line in the reply")
    line = text[matches[-1].end():].split("\n", 1)[0]
    score_matches = list(_SCORE.finditer(line))
    if score_matches:
        last = score_matches[-1]
        action = line[:last.start()]
        score, problem = read_score(line[last.end():])
    else:
        action, score, problem = line, None, "missing self-score (no 'Score:' on the answer line)"
    action = action.strip().strip(",;").strip()
    if action.startswith("<") and action.endswith(">"):
        action = action[1:-1].strip()
    # An empty action is passed on as "" (some games accept it, e.g. a PvZ turn with no planting).
    return ParsedReply(action, score, problem)


def _json_reply(reply: str) -> Optional[ParsedReply]:
    """The reply contract as JSON, `{"answer": <action>, "score": <number>}`: what a server that
    constrains only through `response_format` returns under `--decoding grammar` (engine.decoding)."""
    body = reply.strip()
    if body.startswith("```"):
        body = body.strip("`").removeprefix("json").strip()
    if not (body.startswith("{") and body.endswith("}")) or len(body) > 20_000:
        return None
    try:
        data = json.loads(body)
    except ValueError:
        return None
    if not isinstance(data, dict):
        return None
    keys = {str(k).lower(): v for k, v in data.items()}
    if "answer" not in keys:
        return None
    action = keys["answer"]
    if not isinstance(action, (str, int, float)) or isinstance(action, bool):
        return None
    action = " ".join(str(action).split()).strip(",;").strip()
    raw = keys.get("score")
    if raw is None:
        return ParsedReply(action, None, "missing self-score (no 'score' in the JSON reply)")
    if isinstance(raw, bool):
        return ParsedReply(action, None, "self-score true/false is not a number (stored as missing)")
    score, problem = read_score(str(raw))
    return ParsedReply(action, score, problem)
