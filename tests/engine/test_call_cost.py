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


def test_a_served_model_without_a_price_is_entered_once_unpriced_and_stays_unpriced(priced_here):
    """litellm learns the served model's name (no price) so it stops searching its price map for it on
    every call; the calls stay unpriced, and a priced model's entry is left as it is."""
    litellm = _litellm()
    model = "hosted_vllm/entered-model-abc"
    litellm.model_cost.pop(model, None)
    priced_before = dict(litellm.model_cost["gpt-4o-mini"])
    with FakeOpenAI(usage=USAGE) as server:
        results = [_call(server, model) for _ in range(3)] + [_call(server, "openai/gpt-4o-mini")]
    assert [r.cost for r in results[:3]] == [None, None, None]
    entry = litellm.model_cost[model]
    assert entry["litellm_provider"] == "hosted_vllm"
    assert not any(key.endswith(("cost_per_token", "cost_per_character", "cost_per_second")) for key in entry)
    assert results[3].cost and results[3].cost > 0
    assert "openai/gpt-4o-mini" not in litellm.model_cost and litellm.model_cost["gpt-4o-mini"] == priced_before
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
