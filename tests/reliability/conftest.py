"""Reliability tests: fault-provider settings restored around every test, prompts sent recorded."""

from __future__ import annotations

import pytest


@pytest.fixture(autouse=True)
def _clean_fault_provider():
    from s3gym_tui.providers import fault

    fault.reset()
    yield
    fault.reset()


@pytest.fixture
def sent_prompts(monkeypatch):
    """Every message list the engine sends to a model (action and summary calls), in order."""
    from s3gym_tui.engine import llm, runner, session

    sent: list[list[dict]] = []
    original = llm.complete

    async def recording(settings, messages, context=None):
        sent.append([dict(m) for m in messages])
        return await original(settings, messages, context)

    monkeypatch.setattr(runner, "complete", recording)
    monkeypatch.setattr(session, "complete", recording)
    return sent
