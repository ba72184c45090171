"""`--decoding grammar` against llama-cpp-python's own server (`python -m llama_cpp.server`) and any
server that refuses a grammar form (issue 36): that server is recognised (its /openapi.json title: it
has no /props and states no context) and sent a GBNF `grammar`; a server that refuses the form it
was sent teaches the next one in its error, once, and later calls start there, instead of the run
stopping after five attempts of the same refused request.

The fake server (tests/fake_openai.py, kind "llama-cpp-python") answers as that server does: its
/v1/models entries (owned_by "me"), no /props, unknown fields ignored, and a json_schema response
format refused with a 500 carrying pydantic's words."""

from __future__ import annotations

import asyncio

import pytest

import s3gym_games as games
from s3gym_tui.cli import main
from s3gym_tui.engine import servers
from s3gym_tui.engine.decoding import act_grammar
from s3gym_tui.engine.llm import CallSettings, ModelUnavailable, complete
from s3gym_games.reply import parse_reply
from s3gym_tui.store import Store

from tests.fake_openai import FakeOpenAI

PLAY = "Answer: collaborate, Score: 2"
MESSAGES = [{"role": "user", "content": "go"}]


@pytest.fixture(autouse=True)
def _fresh_descriptions():
    servers._CACHE.clear()
    yield
    servers._CACHE.clear()


def _act_context() -> dict:
    game = games.make("trust", "explore")
    game.reset(0)
    return {"task": "act", "game": "trust", "mode": "explore", "seed": 0, "actions": [],
            "grammar": game.action_grammar()}


def _call(fake: FakeOpenAI, kind: str | None = None, model: str = "hosted_vllm/smollm2", retries: int = 0):
    settings = CallSettings(model, api_base=fake.base, decoding="grammar", server_kind=kind, max_retries=retries,
                            timeout_s=10, backoff_base_s=0.0)
    return asyncio.run(complete(settings, MESSAGES, _act_context()))


def test_llama_cpp_pythons_server_is_recognised_and_states_no_context():
    with FakeOpenAI(kind="llama-cpp-python") as fake:
        info = servers.describe("openai/smollm2", fake.base)
    assert (info.kind, info.context) == ("llama-cpp-python", None)
    assert info.said() == f"llama-cpp-python server on {info.where} states no context size: context unknown"


def test_it_is_sent_its_own_grammar_field_from_the_first_call():
    with FakeOpenAI(kind="llama-cpp-python", reply=PLAY) as fake:
        kind = servers.describe("hosted_vllm/smollm2", fake.base).kind
        result = _call(fake, kind)
        assert fake.grammar_fields() == [{"grammar": act_grammar(_act_context()["grammar"])}]
    assert result.faults == () and parse_reply(result.reply).action == "collaborate"


def test_a_refused_grammar_form_is_learnt_from_the_error_once_and_kept():
    """A run stored before the server was recognised (its kind 'openai-compatible': a JSON schema):
    the server refuses it with a 500 (not retried as a server fault), the call is made again with
    the form next in line, and the next call starts with it."""
    with FakeOpenAI(kind="llama-cpp-python", reply=PLAY) as fake:
        first = _call(fake, "openai-compatible")
        second = _call(fake, "openai-compatible")
        sent = [list(fields) for fields in fake.grammar_fields()]
    assert sent == [["response_format"], ["grammar"], ["grammar"]]  # refused once, then learnt
    assert first.faults == ("the server refused the grammar as JSON schema (`response_format`): "
                            "sent as GBNF grammar (`grammar`) from now on",)
    assert second.faults == () and parse_reply(second.reply).action == "collaborate"
    assert servers.known("hosted_vllm/smollm2", fake.base).grammar_form == "grammar"


def test_a_server_that_refuses_every_form_stops_the_call_once_each_with_its_words():
    with FakeOpenAI(kind="llama.cpp", context=4096, accepts=set(), reply=PLAY) as fake:
        with pytest.raises(ModelUnavailable, match="Unrecognized request argument supplied") as refused:
            _call(fake, "llama.cpp", model="llamafile/fake", retries=4)
        assert len(fake.grammar_fields()) == 5  # one request per form, none repeated
    assert "refused the grammar in every form: grammar, json_schema, structured_outputs, guided_grammar, ebnf" \
        in str(refused.value)


def test_an_error_that_is_not_about_the_grammar_teaches_nothing():
    with FakeOpenAI(kind="llama-cpp-python", reply=PLAY) as fake:
        fake.behave(times=1, status=400, error="model is loading")
        with pytest.raises(ModelUnavailable, match="model is loading"):
            _call(fake, "llama-cpp-python")
    assert servers.known("hosted_vllm/smollm2", fake.base).grammar_form is None


def test_a_grammar_run_against_it_parses_every_reply(tmp_path, capsys):
    """`s3gym run --decoding grammar` against the server: the server line names it and the form,
    says its context is unknown, and every stored reply parses."""
    db = tmp_path / "runs.db"
    with FakeOpenAI(kind="llama-cpp-python", reply=PLAY) as fake:
        code = main(["run", "trust", "-m", "hosted_vllm/smollm2", "--api-base", fake.base, "--decoding", "grammar",
                     "--episodes", "1", "--eval-episodes", "0", "--step-cap", "3", "--progress", "none",
                     "--db", str(db)])
        out = capsys.readouterr().out
        fields = {field for request in fake.grammar_fields() for field in request}
    assert code == 0
    assert "llama-cpp-python server on 127.0.0.1:" in out and "context unknown" in out
    assert "decoding: grammar, sent as GBNF grammar (llama-cpp-python `grammar`)" in out
    assert fields == {"grammar"}
    with Store(db) as store:
        [run] = store.runs.list_runs()
        steps = [s for e in store.episodes.list(run.id) for s in store.episodes.steps(e.id)]
    assert run.config.server_kind == "llama-cpp-python" and steps
    assert all(parse_reply(s.reply).action == "collaborate" for s in steps)
