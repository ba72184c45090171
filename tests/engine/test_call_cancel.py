"""A model call that is cancelled (Ctrl-C, SIGTERM, a stopped episode) stays cancelled, even when
the cancel arrives just as the reply does.

On Python 3.11, asyncio.wait_for returned the reply and dropped a cancel that came in the same
turn of the loop as the reply: a Ctrl-C was lost and the run went on to its end (seen once in CI,
tests/reliability/test_one_driver.py). engine/llm.py times calls out with asyncio.timeout."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from s3gym_tui.engine import llm
from s3gym_tui.engine.llm import CallSettings, complete

MESSAGES = [{"role": "user", "content": "Round 1. Answer: <ACTION>, Score: <S>"}]
REPLY = "Answer: collaborate, Score: 1"


async def test_a_cancel_that_arrives_with_the_reply_is_not_lost(monkeypatch):
    caller: list[asyncio.Task] = []

    async def reply_then_cancel(litellm, settings, kwargs, faults=None):
        await asyncio.sleep(0)  # the request goes out
        asyncio.get_running_loop().call_soon(caller[0].cancel)  # the cancel comes with the reply
        return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=REPLY))], usage=None)

    monkeypatch.setattr(llm, "_acompletion", reply_then_cancel)

    async def play() -> str:
        result = await complete(CallSettings("openai/any", max_retries=0, timeout_s=30), MESSAGES)
        assert result.reply == REPLY
        await asyncio.sleep(0)  # the next step: a cancel pending since the reply lands here at the latest
        return "went on after the cancel"

    task = asyncio.create_task(play())
    caller.append(task)
    with pytest.raises(asyncio.CancelledError):
        await task


async def test_a_call_that_outlives_its_timeout_is_a_timeout(monkeypatch):
    async def never(litellm, settings, kwargs, faults=None):
        await asyncio.sleep(60)

    monkeypatch.setattr(llm, "_acompletion", never)
    settings = CallSettings("openai/any", max_retries=0, timeout_s=-4.9)  # the call gets 0.1 s
    with pytest.raises(llm.ModelUnavailable, match="after 1 attempts"):
        await complete(settings, MESSAGES)
