"""A call a person watches (on_tokens) is streamed where the provider streams: the tokens so far are
told as they come, and the result (reply, usage, cost) is the one an unstreamed call returns. A server
that refuses to stream is asked whole, at once, and from then on; built-in models are never streamed."""

from __future__ import annotations

import asyncio
import os

import pytest

from s3gym_tui.engine import llm
from s3gym_tui.engine.llm import CallSettings, complete

from tests.fake_openai import FakeOpenAI

MESSAGES = [{"role": "user", "content": "Your move. Answer: <ACTION>, Score: <S>"}]
PLAY = "I will cooperate with you today.\nAnswer: collaborate, Score: 2"


@pytest.fixture(autouse=True)
def fresh(monkeypatch):
    monkeypatch.setattr(llm, "_NOT_STREAMED", set())
    monkeypatch.setenv("OPENAI_API_KEY", os.environ.get("OPENAI_API_KEY") or "sk-test-not-a-real-key-000")


def test_a_watched_call_is_streamed_and_tells_its_tokens():
    told: list[int] = []
    with FakeOpenAI(reply=PLAY, usage={"prompt_tokens": 31, "completion_tokens": 12, "total_tokens": 43}) as fake:
        fake.behave(chunk_delay_s=0.01)
        result = asyncio.run(complete(CallSettings("openai/fake", api_base=fake.base, max_retries=0),
                                      MESSAGES, on_tokens=told.append))
        unwatched = asyncio.run(complete(CallSettings("openai/fake", api_base=fake.base, max_retries=0),
                                         MESSAGES))
        bodies = [r["body"] for r in fake.requests]
    pieces = len(PLAY.split(" "))
    assert told == list(range(1, pieces + 1))  # each piece as it came
    assert bodies[0]["stream"] is True and bodies[0]["stream_options"] == {"include_usage": True}
    assert "stream" not in bodies[1]  # nobody watching: asked whole, as before
    assert result.reply == unwatched.reply == PLAY
    assert (result.tokens_in, result.tokens_out) == (unwatched.tokens_in, unwatched.tokens_out) == (31, 12)
    assert result.faults == ()


def test_a_server_that_does_not_stream_is_asked_whole_at_once_and_from_then_on():
    told: list[int] = []
    with FakeOpenAI(reply=PLAY) as fake:
        fake.behave(no_stream=True)
        settings = CallSettings("openai/fake", api_base=fake.base, max_retries=0)  # no retry to spend
        first = asyncio.run(complete(settings, MESSAGES, on_tokens=told.append))
        second = asyncio.run(complete(settings, MESSAGES, on_tokens=told.append))
        streamed = [bool(r["body"].get("stream")) for r in fake.requests]
    assert first.reply == second.reply == PLAY and told == []
    assert streamed == [True, False, False]  # refused once, then asked whole
    assert first.faults == ("streaming refused (asked whole)",) and second.faults == ()


def test_built_in_models_are_not_streamed():
    told: list[int] = []
    context = {"task": "act", "game": "trust", "mode": "explore", "seed": 0, "actions": []}
    result = asyncio.run(complete(CallSettings("scripted/trust", max_retries=0), MESSAGES, context,
                                  on_tokens=told.append))
    assert "Answer:" in result.reply and told == []
