"""The learner playing in process, on the engine's own prompt builders (no store, no litellm): for tests that
need many episodes fast, and to replay an episode with a chosen Hint Messages block."""

from __future__ import annotations

from typing import Optional

import s3gym_games as games
from s3gym_games.reply import parse_reply
from s3gym_games.prompt import (TurnRecord, build_messages, build_summary_messages, parse_summary,
                                      render_episode_block)
from s3gym_tui.models import Summary
from s3gym_tui.providers.learner import reply

NO_ANSWER = "<no parsable answer>"


def play(game: str, mode: str, seed: int, hint: Optional[str]) -> tuple[float, list[TurnRecord], list[str]]:
    """(score, the turns as History would show them, the replies) of one episode."""
    env = games.make(game, mode)
    env.reset(seed)
    turns: list[TurnRecord] = []
    replies: list[str] = []
    feedback = ""
    while not env.done:
        text = reply(game, build_messages(env, hint, turns, feedback))
        parsed = parse_reply(text)
        action = parsed.action if parsed.action is not None else NO_ANSWER
        observation = env.observation()
        result = env.step(action)
        turns.append(TurnRecord(observation, action, parsed.self_score, feedback))
        replies.append(text)
        feedback = result.feedback
    return env.score(), turns, replies


def block(number: int, seed: int, turns: list[TurnRecord]) -> str:
    return render_episode_block(f"Previous episode {number} (seed {seed}, {len(turns)} steps)", turns)


def history(game: str, episodes: int) -> str:
    """The History block after `episodes` exploration episodes played with History."""
    blocks: list[str] = []
    for x in range(episodes):
        _, turns, _ = play(game, "explore", x, "\n\n".join(blocks) or None)
        blocks.append(block(x + 1, x, turns))
    return "\n\n".join(blocks)


def summary_tips(game: str, current: Optional[str], history_text: str) -> str:
    """The learner's summary of `history_text` (given its current summary), as Hint Messages show it."""
    retain, avoid, nxt = parse_summary(reply(game, build_summary_messages(games.make(game, "explore"), current,
                                                                          history_text)))
    return tips(retain, avoid, nxt)


def tips(retain: str, avoid: str, nxt: str) -> str:
    """The summary as Hint Messages show it (the engine's own rendering)."""
    return Summary(id="s", run_id="r", game="g", version=1, retain=retain, avoid=avoid, next=nxt).as_tips()
