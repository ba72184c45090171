"""The litellm operator: native tool calls (the tools are offered), the JSON text form for a model that cannot
call tools, and a reply with neither recorded as a malformed call. litellm is replaced by a scripted fake
that answers in turn and records what it was sent."""

from __future__ import annotations

import asyncio
import json

import litellm
from litellm.types.utils import ChatCompletionMessageToolCall, Function, Message, ModelResponse

from s3gym_tui.engine.aspire.budget import Budget
from s3gym_tui.engine.aspire.controller import Controller, Settings
from s3gym_tui.engine.aspire.operators import ModelOperator, history_messages, parse_text_call
from s3gym_tui.store import Store

from tests.aspire.test_aspire import CANARY_GOALS, CANARY_NAME, CANARY_SEED


def response(content=None, tool=None, args=None) -> ModelResponse:
    calls = None
    if tool:
        calls = [ChatCompletionMessageToolCall(id="call_1", type="function",
                                               function=Function(name=tool, arguments=json.dumps(args)))]
    r = ModelResponse(choices=[{"index": 0, "finish_reason": "stop",
                                "message": Message(role="assistant", content=content, tool_calls=calls)}])
    r.usage = litellm.Usage(prompt_tokens=100, completion_tokens=10, total_tokens=110)
    return r


def test_tool_calls_json_text_and_malformed_replies(tmp_path, monkeypatch):
    script = [response(tool="look", args={"what": "games"}),
              response(content='I will practise. {"tool": "practise", "arguments": {"game": "trust", "seed": 3}}'),
              response(content="hmm, let me think"),
              response(tool="submit", args={"candidate": "BASE", "claim": "nothing yet", "claimed_delta": None})]
    sent: list[dict] = []
    real = litellm.acompletion

    async def fake(**kwargs):
        if kwargs.get("model") != "openai/gpt-x":  # the games' scripted players go through litellm too
            return await real(**kwargs)
        sent.append(kwargs)
        r = script.pop(0)
        call = (r.choices[0].message.tool_calls or [None])[0]
        if call is not None and "BASE" in call.function.arguments:
            call.function.arguments = call.function.arguments.replace("BASE", f"{aid}-base")
        return r

    monkeypatch.setattr(litellm, "acompletion", fake)
    with Store(tmp_path / "a.db") as store:
        aid = store.aspire.create_aspire_run(goal_id="canary", goal_text=CANARY_GOALS[0].text, model="openai/gpt-x",
                                             protocol="final", budget=Budget().as_dict(),
                                             settings=Settings(player="scripted", step_cap=4).__dict__).id
        final = asyncio.run(Controller(store, aid, ModelOperator("openai/gpt-x"), CANARY_GOALS).run_all())
        decisions = store.aspire.aspire_decisions(aid)
        usage = store.aspire.get_aspire_run(aid).usage
    assert [(d.tool, d.outcome) for d in decisions] == [("look", "ok"), ("practise", "ok"), ("(none)", "error"),
                                                        ("submit", "ok")]
    assert decisions[1].arguments == {"game": "trust", "seed": 3} and "no tool call found" in decisions[2].result
    assert all(k["tools"] and k["model"] == "openai/gpt-x" for k in sent)  # tools offered every turn
    # the conversation is rebuilt from the stored decisions: the last request carries the earlier results
    last = "\n".join(m["content"] for m in sent[-1]["messages"])
    assert "no tool call found" in last and '"practise"' in last
    assert str(CANARY_SEED) not in json.dumps(sent) and CANARY_NAME not in json.dumps(sent)
    assert decisions[0].tokens_in == 100 and usage["calls"] >= 4 and final.status_reason == "submitted"


def test_parse_text_call():
    assert parse_text_call('x {"tool": "look", "arguments": {"what": "games"}} y') == ("look", {"what": "games"}, None)
    assert parse_text_call("{not json}")[2] == "the JSON object in your reply does not parse"
    assert parse_text_call('{"arguments": {}}')[2] == 'the JSON object names no "tool"'
    two = 'ok {"tool": "look", "arguments": {"what": "runs"}}\n{"tool": "submit", "arguments": {}}'
    assert parse_text_call(two) == ("look", {"what": "runs"}, None)  # the first object, not a span of both
    assert parse_text_call("no braces")[2].startswith("no tool call found")


def test_history_shows_a_malformed_turn_as_written():
    from s3gym_tui.store.aspire import Decision

    d = Decision("a", 0, "(none)", {}, "error: no tool call found", "error", "other", "I am ready.", 1, 0, 0,
                 None, 0.0, "")
    messages = history_messages({"goal": "g", "protocol": "final", "budget": {}, "base": "b", "requests": 0}, [d])
    assert messages[2] == {"role": "assistant", "content": "I am ready."}  # no made-up "(none)" call to copy
    assert "no tool call found" in messages[3]["content"]


def test_litellm_prints_nothing_of_its_own_into_aspire_output(tmp_path):
    """litellm prints a coloured "Provider List" on some errors unless told not to; the operator reached litellm
    before anything else had quieted it. A fresh interpreter (in this one an earlier test has quieted litellm)."""
    import os
    import subprocess
    import sys
    from pathlib import Path

    env = dict(os.environ, LITELLM_LOCAL_MODEL_COST_MAP="True")
    out = subprocess.run([sys.executable, "-m", "s3gym_tui", "aspire", "--model", "nosuchprovider/x", "--goal", "win",
                          "--budget", "decisions=1", "--db", str(tmp_path / "a.db")], cwd=Path(__file__).parents[2],
                         env=env, capture_output=True, text=True, timeout=300)
    both = out.stdout + out.stderr
    assert out.returncode == 3 and "nosuchprovider/x: litellm.BadRequestError" in out.stderr, both
    assert "Provider List" not in both and "\x1b[" not in both
