"""A call's timeout measures silence, not total time (issue 36): a slow model that keeps making
progress (reading its prompt, writing tokens: engine.call_progress) finishes, a silent one is timed
out and retried, and the call's progress says when a retry happened and why (the status bar reads it).

The fake providers stand in for `_acompletion` (as tests/engine/test_call_cancel.py does) and report
progress the way the embedded model does: through the call's progress (call_progress.current())."""

from __future__ import annotations

import asyncio
from types import SimpleNamespace

import pytest

from s3gym_tui.engine import call_progress, llm
from s3gym_tui.engine.call_progress import CallProgress
from s3gym_tui.engine.llm import CallSettings, ModelUnavailable, complete

MESSAGES = [{"role": "user", "content": "Round 1. Answer: <ACTION>, Score: <S>"}]
REPLY = "Answer: collaborate, Score: 1"
LIMIT_S = 0.4  # the silence a call may keep: the engine allows timeout_s + 5 s


@pytest.fixture(autouse=True)
def _called_whole(monkeypatch):
    """The fakes stand in for the whole call: a watched call is not streamed here."""
    monkeypatch.setattr(llm, "_NOT_STREAMED", {"openai/any"})


def settings(**extra) -> CallSettings:
    return CallSettings("openai/any", timeout_s=LIMIT_S - 5, backoff_base_s=0.0, **extra)


def answer() -> SimpleNamespace:
    return SimpleNamespace(choices=[SimpleNamespace(message=SimpleNamespace(content=REPLY))], usage=None)


def slow_but_progressing(total_s: float, every_s: float = 0.05):
    """A provider that takes `total_s`, reading its prompt and then writing a token every `every_s`."""
    async def call(litellm, settings, kwargs, faults=None):
        progress = call_progress.current()
        steps = int(total_s / every_s)
        for i in range(steps):
            await asyncio.sleep(every_s)
            if i < steps // 2:
                progress.reading((i + 1) * 100, steps // 2 * 100)
            else:
                progress.writing(i - steps // 2 + 1)
        return answer()
    return call


async def test_a_slow_model_that_keeps_making_progress_is_not_timed_out(monkeypatch):
    monkeypatch.setattr(llm, "_acompletion", slow_but_progressing(total_s=LIMIT_S * 4))
    progress = CallProgress()
    result = await complete(settings(max_retries=0), MESSAGES, progress=progress)
    assert result.reply == REPLY and result.faults == ()
    assert progress.retries == [] and progress.written  # it wrote, and was never retried


async def test_a_silent_model_is_timed_out_and_retried_saying_why(monkeypatch):
    async def silent(litellm, settings, kwargs, faults=None):
        await asyncio.sleep(60)

    monkeypatch.setattr(llm, "_acompletion", silent)
    progress = CallProgress()
    with pytest.raises(ModelUnavailable, match=r"no progress for -4.6 s \(after 2 attempts\)"):
        await complete(settings(max_retries=1), MESSAGES, progress=progress)
    assert progress.retries == ["timeout: no progress for -4.6 s"]


async def test_a_model_that_stops_making_progress_is_timed_out_from_its_last_sign(monkeypatch):
    async def stalls(litellm, settings, kwargs, faults=None):
        progress = call_progress.current()
        for i in range(10):  # twice the limit of progress, then nothing
            await asyncio.sleep(LIMIT_S / 5)
            progress.reading(i, 10)
        await asyncio.sleep(60)

    monkeypatch.setattr(llm, "_acompletion", stalls)
    started = asyncio.get_running_loop().time()
    with pytest.raises(ModelUnavailable, match="no progress"):
        await complete(settings(max_retries=0), MESSAGES)
    assert asyncio.get_running_loop().time() - started >= 2 * LIMIT_S  # not cut at the limit from its start


async def test_the_retry_and_its_reason_are_told_while_the_next_attempt_runs(monkeypatch):
    """What Play's status bar shows during a retry: which retry it is and why, with the progress of
    the attempt under way; the stored step keeps the fault."""
    told: list[str] = []

    async def silent_then_answers(litellm, settings, kwargs, faults=None):
        progress = call_progress.current()
        if not progress.retries:
            await asyncio.sleep(60)
        progress.reading(512, 2048)
        told.append(progress.describe())
        return answer()

    monkeypatch.setattr(llm, "_acompletion", silent_then_answers)
    progress = CallProgress()
    result = await complete(settings(max_retries=2), MESSAGES, progress=progress)
    assert told == ["reading the prompt 512 of 2,048 tokens · retry 1 after timeout: no progress for -4.6 s"]
    assert result.faults == ("timeout: no progress for -4.6 s",)


def test_progress_says_what_the_call_does():
    progress = CallProgress()
    assert progress.describe() == ""
    progress.reading(1024, 7912, reused=512)
    assert progress.describe() == "reading the prompt 1,024 of 7,912 tokens, 512 reused"
    progress.writing(1)
    assert progress.describe() == "1 token written"
    progress.retrying("rate_limit")
    progress.waiting_turn(model_busy=True)
    assert progress.describe() == "waiting for the model (busy with another call) · retry 1 after rate_limit"
