"""A served model's provider, read once from its name, is given to litellm.acompletion (its
`custom_llm_provider`): litellm skips resolving it from every call's arguments, and the request the
server gets is the one litellm sends without the hint."""

from __future__ import annotations

import asyncio

import pytest

from s3gym_tui.engine import llm
from s3gym_tui.engine.llm import CallSettings, _litellm, complete, named_provider
from tests.fake_openai import FakeOpenAI

MESSAGES = [{"role": "user", "content": "Your move?"}]


@pytest.mark.parametrize("model, provider", [
    ("hosted_vllm/qwen-7b", "hosted_vllm"),
    ("openai/gpt-4o-mini", "openai"),
    ("openrouter/anthropic/claude-3.5-sonnet", "openrouter"),
    ("scripted/trust", "scripted"),  # a built-in provider s3gym registers in litellm
    ("gpt-4o-mini", None),  # no prefix: litellm finds the provider itself
    ("meta-llama/Llama-3-8B", None),  # a prefix that is no provider: left to litellm
])
def test_the_provider_is_the_prefix_litellm_itself_resolves(model, provider):
    assert named_provider(_litellm(), model) == provider


def test_a_served_call_names_its_provider_and_sends_what_litellm_sends_without_it(monkeypatch):
    litellm = _litellm()
    seen: list[dict] = []
    real = litellm.acompletion

    async def spied(**kwargs):
        seen.append(kwargs)
        return await real(**kwargs)

    monkeypatch.setattr(litellm, "acompletion", spied)
    with FakeOpenAI(reply="hi") as server:
        settings = CallSettings(model="hosted_vllm/named-qwen", api_base=server.base, max_retries=0,
                                context_tokens=32_768)
        named = asyncio.run(complete(settings, MESSAGES))
        monkeypatch.setitem(llm._NAMED_PROVIDER, "hosted_vllm/named-qwen", None)  # as before: no hint
        unnamed = asyncio.run(complete(settings, MESSAGES))
        bodies = [r["body"] for r in server.requests if r["path"].endswith("/chat/completions")]
    assert [k.get("custom_llm_provider") for k in seen] == ["hosted_vllm", None]
    assert named.reply == unnamed.reply == "hi" and named.tokens_in == unnamed.tokens_in
    assert len(bodies) == 2 and bodies[0] == bodies[1] and bodies[0]["model"] == "named-qwen"
