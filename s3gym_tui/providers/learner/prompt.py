"""What the learner reads: the messages litellm hands it, split into rules, experience and the current state.

The learner reads text, as any model does: it finds the parts of the paper's prompt by their labels and
knows nothing else (no store, no game object, no seed). Its markers are the prompt's own words.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Optional

from s3gym_tui.providers._common import content_text

HINT = "Hint Messages:\n"
CURRENT = "Current episode so far:\n"
RULES = "Game rules:\n"
SYNTAX = "\n\nAction syntax:"
STATE = "Current state:\n"
THINK = "\n\nThink briefly, then end with"
FEEDBACK = "Feedback on your last action: "
SUMMARY_ASK = "Write your experience in exactly three labelled parts"
CURRENT_SUMMARY = "Your current summary of experience:\n"
PREVIOUS = "Your previous episodes (each step with your self-judged score):\n"
EPISODE_TITLE = re.compile(r"^--- Previous episode (\d+) \(seed -?\d+, (\d+) steps\) ---$", re.MULTILINE)
_LLM = re.compile(r"^LLM: Answer: (?P<action>.*), Score: (?P<score>\S+)$")
_ORACLE = re.compile(r"^\(oracle feedback: verifier reward (?P<r>[-+0-9.eE]+)\)$")


@dataclass(frozen=True)
class Turn:
    """One remembered step: the text the environment showed before it (feedback of the step before, then
    the observation), the action, the stated self-score, and the verifier's reward where the oracle
    ablation shows it."""

    env: str
    action: str
    self_score: Optional[float]
    oracle_reward: Optional[float] = None


@dataclass(frozen=True)
class Episode:
    """A previous episode as History shows it: its number (1-based) and its turns."""

    number: int
    turns: tuple[Turn, ...]


@dataclass(frozen=True)
class ActPrompt:
    rules: str
    hint: Optional[str]
    current_text: str  # the current episode so far, as shown (`current` reads it into turns)
    feedback: str
    observation: str
    step_text: str  # everything after the Hint Messages: what the prior's hash reads

    @property
    def current(self) -> tuple[Turn, ...]:
        return parse_turns(self.current_text)


@dataclass(frozen=True)
class SummaryPrompt:
    rules: str
    summary: Optional[str]
    history: str


def user_text(messages: list) -> str:
    """The user messages joined (a prompt split into cacheable pieces reads as one)."""
    return "".join(content_text(m.get("content")) for m in messages or []
                   if isinstance(m, dict) and m.get("role", "user") == "user")


def _between(text: str, start: str, end: str, frm: int = 0) -> tuple[str, int]:
    i = text.find(start, frm)
    if i < 0:
        return "", -1
    i += len(start)
    j = text.find(end, i)
    return (text[i:] if j < 0 else text[i:j]), (len(text) if j < 0 else j)


def parse(messages: list) -> ActPrompt | SummaryPrompt:
    """The prompt's parts; a ValueError names what is missing."""
    text = user_text(messages)
    if SUMMARY_ASK in text:
        return _parse_summary(text)
    rules_at = text.rfind(RULES)
    if rules_at < 0 or (rules_at > 0 and text[rules_at - 1] != "\n"):
        raise ValueError("no 'Game rules:' in the prompt")
    head, tail = text[:rules_at], text[rules_at:]
    rules, _ = _between(tail, RULES, SYNTAX)
    observation, _ = _between(tail, STATE, THINK)
    feedback = next((line[len(FEEDBACK):] for line in tail.split("\n") if line.startswith(FEEDBACK)), "")
    hint: Optional[str] = None
    current_text, step_from = "", 0
    if head.startswith(HINT):
        body = head[len(HINT):]
        k = body.rfind("\n\n" + CURRENT)
        if k >= 0:
            hint, current_text = body[:k], body[k + 2 + len(CURRENT):]
            step_from = len(HINT) + k + 2
        else:
            hint, step_from = body.rstrip("\n"), rules_at
    elif head.startswith(CURRENT):
        current_text = head[len(CURRENT):]
    return ActPrompt(rules, hint, current_text, feedback, observation, text[step_from:])


def _parse_summary(text: str) -> SummaryPrompt:
    starts = [i for i in (text.find("\n\n" + CURRENT_SUMMARY), text.find("\n\n" + PREVIOUS)) if i >= 0]
    rules_end = min(starts) if starts else text.find("\n\n" + SUMMARY_ASK)
    rules = text[text.find(RULES) + len(RULES):rules_end] if RULES in text else ""
    summary = None
    if CURRENT_SUMMARY in text:
        summary, _ = _between(text, CURRENT_SUMMARY, "\n\n" + PREVIOUS)
    history, _ = _between(text, PREVIOUS, "\n\n" + SUMMARY_ASK)
    return SummaryPrompt(rules, summary, history)


def parse_turns(text: str) -> tuple[Turn, ...]:
    """`Env: ...` / `LLM: Answer: ..., Score: ...` lines (an Env text may span lines)."""
    turns: list[Turn] = []
    env: list[str] | None = None
    for line in text.split("\n"):
        if line.startswith("Env: "):
            env = [line[5:]]
            continue
        m = _LLM.match(line)
        if m and env is not None:
            turns.append(Turn("\n".join(env).rstrip("\n"), m.group("action").strip(), _number(m.group("score"))))
            env = None
            continue
        o = _ORACLE.match(line)
        if o and turns:
            last = turns[-1]
            turns[-1] = Turn(last.env, last.action, last.self_score, _number(o.group("r")))
            continue
        if env is not None:
            env.append(line)
    return tuple(turns)


def parse_history(text: str) -> tuple[Episode, ...]:
    """The previous episodes of a History block (or of a summary request), in order."""
    titles = list(EPISODE_TITLE.finditer(text or ""))
    episodes = []
    for i, title in enumerate(titles):
        end = titles[i + 1].start() if i + 1 < len(titles) else len(text)
        episodes.append(Episode(int(title.group(1)), parse_turns(text[title.end():end])))
    return tuple(episodes)


def _number(text: str) -> Optional[float]:
    try:
        value = float(text)
    except (TypeError, ValueError):
        return None
    return value if value == value and abs(value) != float("inf") else None
