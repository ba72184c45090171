"""Shared helpers of the provider tests (the protocol's reply parse, the games that import today)."""

from __future__ import annotations

import importlib
import re

import s3gym_games as games

ANSWER = re.compile(r"Answer:\s*(?P<action>.*?)(?:,\s*Score:\s*(?P<score>[-+]?\d+(?:\.\d+)?))?\s*$", re.MULTILINE)


def parse_reply(text: str) -> tuple[str | None, float | None]:
    """The protocol's parse: the LAST `Answer:` line wins; the score is optional."""
    matches = list(ANSWER.finditer(text))
    if not matches:
        return None, None
    last = matches[-1]
    score = last.group("score")
    return last.group("action").strip(), (float(score) if score is not None else None)


def playable_games() -> list[str]:
    """Games whose module imports now (others are being written in parallel: they join automatically)."""
    found = []
    for name in games.names():
        try:
            importlib.import_module(games._REGISTRY[name])
        except ImportError:
            continue
        found.append(name)
    return found


PLAYABLE = playable_games()
