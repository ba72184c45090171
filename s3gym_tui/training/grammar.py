"""The answer contract in the two forms the constrained decoders take: the games' own GBNF (what the
grammar engine, llguidance, compiles: training/constrain.py) and a regular expression (the games' GBNF
action rules in a small subset: literals, character classes, groups, alternation, ?, *, +, {m,n},
compiled to regex syntax: what vLLM's structured outputs, the hand-written fallback decoder and the
reply checks read).

Pure Python (stdlib `re` for checks; the fallback decoder uses the `regex` package's partial matches).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional

from s3gym_games.base import clean_action

# The score the local provider's grammar allows (SCORE_RULE in providers/local.py), as a regex.
SCORE_PATTERN = r"-?[0-9][0-9]?(?:\.[0-9])?"
# When a game's rule cannot be compiled (or no context came with the request): a bounded free action.
FALLBACK_ACTION_PATTERN = r"[^\n,][^\n,]{0,59}"
_CLASS_END = re.compile(r"(?<!\\)\]")


class GrammarError(ValueError):
    """The GBNF text uses something outside the supported subset (e.g. a rule reference)."""


def _literal(text: str, i: int) -> tuple[str, int]:
    """Parse a double-quoted GBNF literal starting at text[i] == '"'; return (value, next index)."""
    out: list[str] = []
    i += 1
    escapes = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\"}
    while i < len(text):
        ch = text[i]
        if ch == '"':
            return "".join(out), i + 1
        if ch == "\\" and i + 1 < len(text):
            out.append(escapes.get(text[i + 1], text[i + 1]))
            i += 2
            continue
        out.append(ch)
        i += 1
    raise GrammarError("unterminated string literal")


def gbnf_to_regex(body: str) -> str:
    """Translate one GBNF rule body (no `name ::=`) to an equivalent Python regex (no anchors)."""
    out: list[str] = []
    depth = 0
    i = 0
    while i < len(body):
        ch = body[i]
        if ch.isspace():
            i += 1
        elif ch == '"':
            value, i = _literal(body, i)
            out.append("(?:" + re.escape(value) + ")" if value else "(?:)")
        elif ch == "[":
            end = _CLASS_END.search(body, i + 1)
            if end is None:
                raise GrammarError("unterminated character class")
            inner = body[i + 1:end.start()]
            if inner.startswith("^"):
                out.append("[^" + inner[1:].replace("[", r"\[") + "]")
            else:
                out.append("[" + inner.replace("[", r"\[") + "]")
            i = end.end()
        elif ch == "(":
            out.append("(?:")
            depth += 1
            i += 1
        elif ch == ")":
            if depth == 0:
                raise GrammarError("unbalanced ')'")
            out.append(")")
            depth -= 1
            i += 1
        elif ch in "|*+?":
            out.append(ch)
            i += 1
        elif ch == "{":
            end = body.find("}", i)
            if end < 0 or not re.fullmatch(r"\{\s*\d*\s*(,\s*\d*\s*)?\}", body[i:end + 1]):
                raise GrammarError("bad repetition")
            out.append(body[i:end + 1].replace(" ", ""))
            i = end + 1
        else:
            raise GrammarError(f"unsupported GBNF at {body[i:i + 20]!r} (rule references are not supported)")
    if depth:
        raise GrammarError("unbalanced '('")
    pattern = "".join(out)
    re.compile(pattern)
    return pattern


def action_pattern(grammar: Optional[str]) -> tuple[str, bool]:
    """(regex of a well-formed action, exact?) for a game's action rule; the bounded free-text
    fallback (exact=False) when there is no rule or it is outside the supported subset."""
    if grammar:
        try:
            return gbnf_to_regex(grammar), True
        except (GrammarError, re.error):
            pass
    return FALLBACK_ACTION_PATTERN, False


def answer_line_pattern(grammar: Optional[str]) -> str:
    """The whole constrained reply: `Answer: <action>, Score: <number>`."""
    action, _ = action_pattern(grammar)
    return f"Answer: (?:{action}), Score: {SCORE_PATTERN}"


@dataclass(frozen=True)
class AnswerLine:
    """The language of one constrained reply, as GBNF (`root ::= ...`, for the grammar engine) and as the
    equivalent regex (vLLM, the fallback decoder); `gbnf` None: the regex alone says it."""

    regex: str
    gbnf: Optional[str] = None


def answer_line(grammar: Optional[str]) -> AnswerLine:
    """`Answer: <action>, Score: <number>` with the game's action rule (GBNF, as `action_grammar()` gives it)."""
    from s3gym_tui.engine.decoding import act_grammar

    return AnswerLine(answer_line_pattern(grammar), act_grammar(grammar))


def score_line() -> AnswerLine:
    """`Score: <number>` alone (the frozen judge's reply)."""
    from s3gym_tui.engine.decoding import SCORE_RULE

    return AnswerLine(f"Score: {SCORE_PATTERN}", f'root ::= "Score: " score\nscore ::= {SCORE_RULE}\n')


def action_is_wellformed(action: str, grammar: Optional[str]) -> bool:
    """True when the action matches the game's rule (after the games' own clean-up, any case),
    or is END (stopping is always allowed by the contract). Without a usable rule: any action."""
    pattern, exact = action_pattern(grammar)
    cleaned = clean_action(action)
    if cleaned.upper() == "END":
        return True
    if not exact:
        return bool(cleaned)
    return re.fullmatch(pattern, cleaned, flags=re.IGNORECASE) is not None
