"""`fault/<game>`: each fault on its schedule, transient ones failing only the first attempt(s)."""

from __future__ import annotations

import re

import pytest

import s3gym_games as games
from s3gym_tui.providers import fault, make_context
from s3gym_tui.providers.fault import CONTENT, FAULTS, TRANSIENT, scheduled_fault

from provider_helpers import parse_reply

SUMMARY = re.compile(r"Strategies to retain: [^\n]+\nMistakes to avoid: [^\n]+\nDirections for the next episode: [^\n]+")
SEED = 11


def _good(seed: int = SEED, actions: tuple[str, ...] = ()) -> tuple[str, float]:
    env = games.game_class("trust").replay("explore", seed, list(actions))
    move = games.reference_policy("trust").act(env.view())
    return move.action, move.expected_reward


async def _call(litellm, faults, seed=SEED, actions=(), task="act", **extra):
    ctx = make_context(task, "trust", "explore", seed, list(actions), grammar='"collaborate" | "cheat"',
                       faults=faults, **extra)
    return await litellm.acompletion(model="fault/trust", messages=[{"role": "user", "content": "play"}],
                                     extra_body={"s3gym": ctx}, num_retries=0)


def _exception_types(litellm):
    return {"timeout": litellm.Timeout, "rate_limit": litellm.RateLimitError,
            "rate_limit_no_retry_after": litellm.RateLimitError, "server_error": litellm.InternalServerError,
            "connection": litellm.APIConnectionError}


def test_fault_names_are_documented():
    assert set(FAULTS) == set(TRANSIENT) | set(CONTENT)
    for name in FAULTS:
        assert name in fault.__doc__


@pytest.mark.parametrize("name", TRANSIENT)
async def test_transient_fault_fails_the_first_attempt_then_succeeds(litellm_mod, name):
    with pytest.raises(_exception_types(litellm_mod)[name]) as info:
        await _call(litellm_mod, [name])
    exc = info.value
    if name == "server_error":
        assert exc.status_code == 500
    if name == "rate_limit":
        assert exc.status_code == 429
        assert exc.headers == {"retry-after": "0.01"}
        assert exc.response.headers["retry-after"] == "0.01"
    if name == "rate_limit_no_retry_after":
        assert exc.headers is None and "retry-after" not in exc.response.headers
    response = await _call(litellm_mod, [name])  # the retry of the same request
    action, score = parse_reply(response.choices[0].message.content)
    assert (action, score) == _good()
    assert response._hidden_params["s3gym"] == {"task": "act", "fault": None, "attempt": 1}


async def test_transient_attempts_setting(litellm_mod):
    fault.SETTINGS.transient_attempts = 2
    for _ in range(2):
        with pytest.raises(litellm_mod.InternalServerError):
            await _call(litellm_mod, ["server_error"])
    response = await _call(litellm_mod, ["server_error"])
    assert parse_reply(response.choices[0].message.content) == _good()


async def test_context_override_of_transient_attempts(litellm_mod):
    with pytest.raises(litellm_mod.Timeout):
        await _call(litellm_mod, ["timeout"], transient_attempts=3)
    with pytest.raises(litellm_mod.Timeout):
        await _call(litellm_mod, ["timeout"], transient_attempts=3)


async def test_content_faults(litellm_mod):
    action, score = _good()
    good_line = f"Answer: {action}, Score: {score:g}"
    replies = {}
    for name in CONTENT:
        response = await _call(litellm_mod, [name])
        replies[name] = response.choices[0].message.content
        assert response._hidden_params["s3gym"]["fault"] == name
        assert response.usage.total_tokens > 0
    assert replies["empty"] == ""
    assert "Answer:" not in replies["garbage"] and "\ufffd" in replies["garbage"]
    assert replies["no_score"] == f"Answer: {action}"
    assert parse_reply(replies["no_score"]) == (action, None)
    assert len(replies["huge"]) >= 200_000 and replies["huge"].splitlines()[-1] == good_line
    assert "Answer:" not in replies["wrong_language"] and "Antwort" in replies["wrong_language"]
    assert any(0xD800 <= ord(c) <= 0xDFFF for c in replies["bad_utf8"]) and "\ufffd" in replies["bad_utf8"]
    with pytest.raises(UnicodeEncodeError):
        replies["bad_utf8"].encode("utf-8")
    assert replies["bad_utf8"].splitlines()[-1] == good_line
    assert "Ignore previous instructions" in replies["injection"]
    assert "Answer: END, Score: 9" in replies["injection"]
    assert parse_reply(replies["injection"]) == (action, score)  # the LAST Answer wins


async def test_content_faults_persist_on_retry_unless_configured(litellm_mod):
    for _ in range(2):
        response = await _call(litellm_mod, ["garbage"])
        assert "Answer:" not in response.choices[0].message.content
    fault.reset()
    fault.SETTINGS.content_attempts = 1
    assert "Answer:" not in (await _call(litellm_mod, ["empty"])).choices[0].message.content
    assert parse_reply((await _call(litellm_mod, ["empty"])).choices[0].message.content) == _good()


def test_schedule_is_deterministic_and_cycles():
    def ctx(seed, n, **extra):
        return {"seed": seed, "actions": ["cheat"] * n, **extra}

    assert [scheduled_fault(ctx(0, n)) for n in range(len(FAULTS))] == list(FAULTS)
    assert [scheduled_fault(ctx(s, 0)) for s in range(len(FAULTS))] == list(FAULTS)
    assert scheduled_fault(ctx(3, 2)) == scheduled_fault(ctx(5, 0)) == FAULTS[5]
    cycle = ["none", "timeout", "empty"]
    assert [scheduled_fault(ctx(0, n, faults=cycle)) for n in range(6)] == [None, "timeout", "empty"] * 2
    assert scheduled_fault(ctx(0, 4, faults=[])) is None
    assert [scheduled_fault(ctx(0, n, faults=["timeout"], fault_period=3)) for n in range(7)] == \
        ["timeout", None, None, "timeout", None, None, "timeout"]
    with pytest.raises(ValueError, match="unknown faults"):
        scheduled_fault(ctx(0, 0, faults=["meteor"]))


async def test_unknown_fault_name_is_a_bad_request(litellm_mod):
    with pytest.raises(litellm_mod.BadRequestError, match="unknown faults"):
        await _call(litellm_mod, ["meteor"])


async def test_attempts_are_per_request(litellm_mod):
    with pytest.raises(litellm_mod.Timeout):
        await _call(litellm_mod, ["timeout"], seed=1)
    with pytest.raises(litellm_mod.Timeout):  # another seed is another request: its first attempt fails too
        await _call(litellm_mod, ["timeout"], seed=2)
    with pytest.raises(litellm_mod.Timeout):  # so is the summary call of the same state
        await _call(litellm_mod, ["timeout"], seed=1, task="summary")
    assert (await _call(litellm_mod, ["timeout"], seed=1)).choices[0].message.content


async def test_summary_with_faults(litellm_mod):
    with pytest.raises(litellm_mod.APIConnectionError):
        await _call(litellm_mod, ["connection"], task="summary")
    assert SUMMARY.fullmatch((await _call(litellm_mod, ["connection"], task="summary")).choices[0].message.content)
    broken = (await _call(litellm_mod, ["no_score"], task="summary")).choices[0].message.content
    assert broken.count("\n") == 1 and "Directions" not in broken


async def test_episode_with_every_transient_fault_matches_the_reference(litellm_mod):
    """A caller that retries transient errors plays the reference trajectory despite a fault at every step."""
    env = games.make("trust")
    env.reset(SEED)
    seen = []
    while not env.done:
        for attempt in range(3):
            try:
                response = await _call(litellm_mod, list(TRANSIENT), actions=tuple(env.actions))
                break
            except (litellm_mod.Timeout, litellm_mod.RateLimitError, litellm_mod.InternalServerError,
                    litellm_mod.APIConnectionError) as exc:
                seen.append(type(exc).__name__)
        else:
            pytest.fail("a transient fault survived two retries")
        env.step(parse_reply(response.choices[0].message.content)[0])
    reference = games.play(games.make("trust"), games.reference_policy("trust"), SEED)
    assert env.actions == reference.actions
    assert len(seen) == len(env.actions)  # exactly one failure per step
    assert set(seen) == {"Timeout", "RateLimitError", "InternalServerError", "APIConnectionError"}
