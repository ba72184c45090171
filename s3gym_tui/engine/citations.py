"""What a reply cites as its evidence, found in the context the agent had.

Two ways of citing are read, from any model: `Previous episode N, step K` names a step of History's raw
episodes (the `--- Previous episode N (...) ---` block, its K-th `Env:`/`LLM:` turn), and `[situation]
option:` names a rule line of a summary (a line that begins with the same words). Compare highlights the
cited lines in the context panel, and says when a summary has no rule for what the other side cited.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Optional, Sequence

STEP_CITE = re.compile(r"Previous episode (\d+), step (\d+)")
RULE_CITE = re.compile(r"(\[[^\[\]\n]+\])[ \t]*([^:;\[\]\n]*?)[ \t]*:")
EPISODE_TITLE = re.compile(r"^--- Previous episode (\d+)\b")
TURN_ENV, TURN_REPLY = "Env: ", "LLM: "


@dataclass(frozen=True)
class Citations:
    """A reply's citations: steps of earlier episodes, summary rules, and where the reply says them."""

    steps: tuple[tuple[int, int], ...] = ()  # (episode number, step number), as cited (1-based)
    rules: tuple[str, ...] = ()  # "[situation] option", as cited
    spans: tuple[tuple[int, int], ...] = ()  # (start, end) of each citation in the reply
    claims: tuple[str, ...] = ()  # each rule as the reply states it: "[situation] option: what it says"

    def __bool__(self) -> bool:
        return bool(self.steps or self.rules)


def cited(reply: Optional[str]) -> Citations:
    """The citations of a reply, in the order it gives them (each once)."""
    text = reply or ""
    steps: dict[tuple[int, int], None] = {}
    rules: dict[str, str] = {}
    spans = []
    for match in STEP_CITE.finditer(text):
        steps.setdefault((int(match.group(1)), int(match.group(2))), None)
        spans.append(match.span())
    for match in RULE_CITE.finditer(text):
        ends = [i for i in (text.find(";", match.end()), text.find("\n", match.end())) if i >= 0]
        claim = text[match.start():min(ends, default=len(text))].strip()
        rules.setdefault(rule_key(match.group(1), match.group(2)), " ".join(claim.split()))
        spans.append((match.start(), match.end() - 1))  # without the colon
    return Citations(tuple(steps), tuple(rules), tuple(sorted(spans)), tuple(rules.values()))


def rule_key(situation: str, option: str) -> str:
    """`[situation] option` with its spaces made single (how a rule is matched)."""
    return " ".join(f"{situation} {option}".split())


def situation_of(rule: str) -> str:
    return rule[:rule.index("]") + 1] if "]" in rule else rule


# ----- finding them in a context ----------------------------------------------------------------------
def step_lines(lines: Sequence[str], episode: int, step: int) -> list[int]:
    """The lines of turn `step` of `--- Previous episode <episode> ...` (its Env: text and its LLM: line)."""
    start = next((i for i, line in enumerate(lines)
                  if (m := EPISODE_TITLE.match(line)) and int(m.group(1)) == episode), None)
    if start is None or step < 1:
        return []
    turn, env_at = 0, None
    for i in range(start + 1, len(lines)):
        line = lines[i]
        if EPISODE_TITLE.match(line):
            break
        if line.startswith(TURN_ENV):
            env_at = i
        elif line.startswith(TURN_REPLY):
            turn += 1
            if turn == step:
                return list(range(env_at if env_at is not None else i, i + 1))
            env_at = None
    return []


def _rule_text(line: str) -> str:
    return " ".join(line.split())


def rule_lines(lines: Sequence[str], rule: str) -> list[int]:
    """The lines that state `rule` (`[situation] option:` at the start of the line)."""
    head = rule_key(*_split(rule)) + ":"
    return [i for i, line in enumerate(lines) if _rule_text(line).startswith(head)]


def situation_lines(lines: Sequence[str], situation: str) -> list[int]:
    """The rule lines about `situation`, whatever their option."""
    head = " ".join(situation.split())
    return [i for i, line in enumerate(lines) if _rule_text(line).startswith(head) and ":" in line]


def _split(rule: str) -> tuple[str, str]:
    situation = situation_of(rule)
    return situation, rule[len(situation):]


@dataclass(frozen=True)
class Found:
    """The context lines a reply cites, and what it cites that the context does not show."""

    lines: tuple[int, ...]
    absent: tuple[str, ...]


def find(context: str, cites: Citations) -> Found:
    """Where the citations are in `context` (line numbers, 0-based)."""
    lines = context.split("\n")
    found: set[int] = set()
    absent: list[str] = []
    for episode, step in cites.steps:
        at = step_lines(lines, episode, step)
        found.update(at)
        if not at:
            absent.append(f"Previous episode {episode}, step {step}")
    for rule in cites.rules:
        found.update(rule_lines(lines, rule))
    return Found(tuple(sorted(found)), tuple(absent))


@dataclass(frozen=True)
class Lacking:
    """A rule the other side cited that this summary does not state (`near`: its lines for the same
    situation with another option)."""

    rule: str
    near: tuple[int, ...] = ()


def lacking(context: str, other: Citations) -> list[Lacking]:
    """The other side's cited rules (the situation of each) that this context has no rule line for."""
    lines = context.split("\n")
    out = []
    for rule in other.rules:
        if rule_lines(lines, rule):
            continue
        out.append(Lacking(rule, tuple(situation_lines(lines, situation_of(rule)))))
    return out


def first_cited_at(block: str, cites: Citations) -> Optional[int]:
    """The character offset in `block` of its first cited line (None: it cites nothing there)."""
    lines = block.split("\n")
    found = find(block, cites).lines
    if not found:
        return None
    first = found[0]
    return sum(len(line) + 1 for line in lines[:first])
