"""The built-in providers price their own responses ($0, as litellm's price map holds them), so litellm
does not run its cost calculator for each of their calls."""

from __future__ import annotations

import asyncio

from s3gym_tui.engine.llm import CallSettings, _litellm, complete

MESSAGES = [{"role": "user", "content": "Your move?"}]


def test_a_built_in_model_is_free_and_priced_by_its_provider_not_by_litellm(monkeypatch):
    """The built-in providers (scripted, fault, learner, local) stamp their $0 on the response, as
    litellm's price map holds them: litellm takes that figure instead of pricing each response."""
    from s3gym_tui.providers import make_context

    litellm = _litellm()
    real = litellm.response_cost_calculator
    calls: list[int] = []
    monkeypatch.setattr(litellm, "response_cost_calculator",
                        lambda *a, **k: calls.append(1) or real(*a, **k))
    settings = CallSettings(model="scripted/trust", max_retries=0)
    context = make_context("act", "trust", "explore", 3, [])
    result = asyncio.run(complete(settings, MESSAGES, context=context))
    assert result.cost == 0.0 and result.tokens_in > 0 and result.reply
    assert calls == []
