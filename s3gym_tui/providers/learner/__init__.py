"""`learner/<game>`: a glass-box in-context learner. It acts on its prompt alone (the rules, the state, and
whatever experience the pathway put there) and explains every choice; see mind.py for how.

No store, no game object, no seed, no state between calls: the same messages give the same reply in any
process (a memo of parsed experience is kept, keyed by its text, which changes nothing but speed).
"""

from __future__ import annotations

from typing import Any

from s3gym_tui.providers.learner import prompt as prompts
from s3gym_tui.providers.learner.mind import act, summarise
from s3gym_tui.providers.learner.readers import detect, reader

PROVIDER = "learner"


class PromptError(ValueError):
    """The messages are not a prompt the learner can read (no rules of a game it knows, no state)."""


def reply(model_game: str, messages: list) -> str:
    """The learner's reply to `messages` as `learner/<model_game>`."""
    parsed = prompts.parse(messages)
    game_reader = reader(model_game)
    if parsed.rules and not game_reader.matches(parsed.rules.lstrip()):
        other = detect(parsed.rules.lstrip())
        raise PromptError(f"learner/{model_game} was given the rules of "
                          f"{other.game if other else 'a game it does not know'}")
    if isinstance(parsed, prompts.SummaryPrompt):
        return summarise(game_reader, parsed)
    if not parsed.observation:
        raise PromptError("the prompt has no 'Current state:' to act on")
    text, _, _ = act(game_reader, parsed)
    return text


def handler() -> Any:
    from s3gym_tui.providers.learner.handler import LearnerLLM

    return LearnerLLM()
