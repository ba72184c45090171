"""A call is priced once, by litellm as it answers (its price map), or marked unpriced: the engine
takes litellm's figure instead of pricing the response a second time."""

from __future__ import annotations

import asyncio

import pytest

from s3gym_tui.engine.call_progress import CallProgress
from s3gym_tui.engine.llm import CallSettings, _litellm, complete
from tests.fake_openai import FakeOpenAI

MESSAGES = [{"role": "user", "content": "Your move?"}]
USAGE = {"prompt_tokens": 1000, "completion_tokens": 200, "total_tokens": 1200}


@pytest.fixture
def priced_here(monkeypatch):
    """litellm.completion_cost as the engine reaches it, counted (litellm's own pricing inside the
    call goes through its cost_calculator module, not this name)."""
    litellm = _litellm()
    real = litellm.completion_cost
    calls: list[int] = []

    def counted(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(litellm, "completion_cost", counted)
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000000000000000")
    return calls


def _call(server, model: str, watched: bool = False):
    settings = CallSettings(model=model, api_base=server.base, max_retries=0, context_tokens=32_768)
    progress = CallProgress() if watched else None
    return asyncio.run(complete(settings, MESSAGES, progress=progress))


def test_a_priced_model_costs_litellms_price_computed_once(priced_here):
    litellm = _litellm()
    prompt, completion = litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=1000,
                                                completion_tokens=200)
    with FakeOpenAI(usage=USAGE) as server:
        result = _call(server, "openai/gpt-4o-mini")
    assert result.cost == pytest.approx(prompt + completion) and result.cost > 0
    assert priced_here == []  # litellm's own figure, not priced again


def test_a_model_without_a_price_is_unpriced_not_free(priced_here):
    with FakeOpenAI(usage=USAGE) as server:
        result = _call(server, "hosted_vllm/unknown-model-xyz")
    assert result.cost is None and result.tokens_in == 1000
    assert priced_here == []


def test_a_streamed_reply_is_priced_once_from_its_rebuilt_response(priced_here):
    litellm = _litellm()
    prompt, completion = litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=1000,
                                                completion_tokens=200)
    with FakeOpenAI(usage=USAGE) as server:
        result = _call(server, "openai/gpt-4o-mini", watched=True)
        streamed = any(r["body"].get("stream") for r in server.requests)
    assert streamed
    assert result.cost == pytest.approx(prompt + completion)
    assert len(priced_here) <= 1


def test_a_model_without_a_price_behind_replicas_is_unpriced_not_free(priced_here):
    """litellm's Router enters its model with no price and prices its calls at $0: stored unpriced."""
    with FakeOpenAI(usage=USAGE) as one, FakeOpenAI(usage=USAGE) as two:
        settings = CallSettings(model="hosted_vllm/unknown-replicated", api_bases=(one.base, two.base),
                                max_retries=0, context_tokens=32_768)
        result = asyncio.run(complete(settings, MESSAGES))
    assert result.cost is None and result.tokens_in == 1000


def test_a_priced_model_behind_replicas_keeps_its_price(priced_here):
    litellm = _litellm()
    prompt, completion = litellm.cost_per_token(model="openai/gpt-4o-mini", prompt_tokens=1000,
                                                completion_tokens=200)
    with FakeOpenAI(usage=USAGE) as one, FakeOpenAI(usage=USAGE) as two:
        settings = CallSettings(model="openai/gpt-4o-mini", api_bases=(one.base, two.base), max_retries=0,
                                context_tokens=32_768)
        result = asyncio.run(complete(settings, MESSAGES))
    assert result.cost == pytest.approx(prompt + completion) and result.cost > 0
