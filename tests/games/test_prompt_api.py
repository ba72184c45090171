"""The prompt and the reply contract live beside the games: public functions of s3gym_games that the
engine itself uses (one implementation), with no import from the app."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import s3gym_games as games
from s3gym_games.prompt import SYSTEM_PROMPT, TurnRecord, build_messages, render_episode_block
from s3gym_games.reply import NO_ANSWER, parse_reply

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("name", games.names())
def test_a_state_gives_the_papers_prompt_and_a_reply_in_the_contract_plays(name):
    game = games.make(name, "explore")
    game.reset(4)
    first = game.observation()
    move = games.reference_policy(name).act(game.view())
    result = game.step(move.action)
    turns = [TurnRecord(first, move.action, move.expected_reward)]
    hint = render_episode_block("Episode 1", turns)
    system, user = build_messages(game, hint, turns, result.feedback)
    assert system == {"role": "system", "content": SYSTEM_PROMPT} and "Answer: <ACTION>" in SYSTEM_PROMPT
    text = user["content"]
    assert text.startswith("Hint Messages:\n--- Episode 1 ---\nEnv: ")
    for part in (game.rules(), game.answer_format(), game.observation(), "Current episode so far:"):
        assert part in text
    reply = parse_reply(f"I think so.\n**Answer:** {move.action}, Score: {move.expected_reward:g}")
    assert (reply.action, reply.self_score, reply.problem) == (move.action, move.expected_reward, None)
    assert parse_reply("no answer here").action is None and NO_ANSWER.startswith("<")


def test_the_engine_builds_and_parses_with_the_package_functions():
    from s3gym_tui.engine import session
    from s3gym_games import trl_env as environment

    assert session.build_messages is build_messages and session.parse_reply is parse_reply
    assert environment.build_messages is build_messages and environment.parse_reply is parse_reply
    defined = []
    for path in (ROOT / "s3gym_tui").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.FunctionDef) and node.name in ("build_messages", "parse_reply", "user_parts"):
                defined.append(f"{path.relative_to(ROOT)}: {node.name}")
    assert defined == []  # moved, not copied
