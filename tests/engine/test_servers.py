"""Model servers described, not guessed: each kind of server states its context (the fake
OpenAI-compatible server speaks like llama.cpp, vLLM, SGLang, Ollama and LM Studio), a run's max
tokens and history budget are fitted to it and the CLI says so; a server that states its context
only in an error teaches it on the first call."""

from __future__ import annotations

import asyncio
import json

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine import fitting, servers
from s3gym_tui.engine.llm import CallSettings, complete
from s3gym_tui.store import Store

from tests.fake_openai import FakeOpenAI

PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"  # a valid Trust move
MESSAGES = [{"role": "user", "content": "Your move. Answer: <ACTION>, Score: <S>"}]


@pytest.fixture(autouse=True)
def _fresh_descriptions():
    servers._CACHE.clear()
    yield
    servers._CACHE.clear()


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.mark.parametrize("kind,model,source", [
    ("llama.cpp", "llamafile/fake", "/props default_generation_settings.n_ctx"),
    ("vllm", "hosted_vllm/fake", "/v1/models max_model_len"),
    ("vllm-legacy", "hosted_vllm/fake", "/v1/models max_model_len"),
    ("sglang", "openai/fake", "/v1/models max_model_len"),
    ("ollama", "openai/fake", "/api/show num_ctx"),
    ("lmstudio", "lm_studio/fake", "/api/v0/models max_context_length"),
])
def test_each_kind_of_server_states_its_context(kind, model, source):
    with FakeOpenAI(kind=kind, context=3072) as fake:
        info = servers.describe(model, fake.base)
    assert (info.kind, info.context, info.source) == (kind, 3072, source)
    assert "3,072 tokens" in info.said() and info.where.startswith("127.0.0.1:")


def test_a_server_that_says_nothing_is_said_to_have_an_unknown_context():
    """Not assumed (issue 36): the server line says "context unknown" and max tokens are kept to a
    bounded default until the server states or teaches its context."""
    with FakeOpenAI(kind="plain") as fake:
        info = servers.describe("openai/fake", fake.base)
    assert info.context is None and info.kind == "openai-compatible"
    fitted = fitting.fit_to_context(info, "openai/fake", "trust", "history", 14_000, 100_000)
    assert (fitted.max_tokens, fitted.history_budget) == (servers.UNKNOWN_CONTEXT_MAX_TOKENS, 100_000)
    assert fitted.notes == (f"OpenAI-compatible server on {info.where} states no context size: context unknown: "
                            f"max tokens 14,000 -> 1,024 until it states or teaches its context",)
    small = fitting.fit_to_context(info, "openai/fake", "trust", "none", 300, 100_000)
    assert small.max_tokens == 300 and small.notes == (info.said(),)  # within the bound: unchanged, still said
    hosted = fitting.fit_to_context(servers.ServerInfo("hosted", where="openai"), "openai/new-model", "trust",
                                    "none", 14_000, 100_000)  # a hosted API states its own limits
    assert hosted.max_tokens == 14_000 and hosted.notes == ("hosted API states no context size: context unknown",)


def test_hosted_models_are_described_by_litellm():
    info = servers.describe("openai/gpt-4o-mini")
    assert info.kind == "hosted" and info.context and info.context > 100_000
    assert info.source == "litellm's model info"


def test_fitting_shrinks_max_tokens_and_the_history_budget_and_warns_when_the_prompt_cannot_fit():
    info = servers.ServerInfo("llama.cpp", 2048, "/props n_ctx", "127.0.0.1:8080")
    fitted = fitting.fit_to_context(info, "llamafile/x", "trust", "history", 14_000, 100_000)
    assert fitted.max_tokens == 512 and 0 <= fitted.history_budget < 2048 - 512
    assert "max tokens 14,000 -> 512" in fitted.notes[0]
    assert f"history budget 100,000 -> {fitted.history_budget:,}" in fitted.notes[0]
    tiny = fitting.fit_to_context(servers.ServerInfo("vllm", 300, "x"), "hosted_vllm/x", "chess", "none",
                                  14_000, 100_000)
    assert tiny.max_tokens == 150 and tiny.history_budget == 100_000  # pathway none: no history to fit
    assert any("does not fit 300" in n for n in tiny.notes)


def test_a_run_against_a_server_with_a_small_context_is_fitted_and_says_so(tmp_path, capsys):
    with FakeOpenAI(kind="vllm", context=2048, enforce_context=True, reply=PLAY, usage="auto") as fake:
        db = tmp_path / "r.db"
        code, out, err = run_cli(capsys, "run", "trust", "-m", "hosted_vllm/fake", "--api-base", fake.base,
                                 "-p", "history", "--episodes", "2", "--eval-every", "2", "--eval-episodes", "1",
                                 "--db", str(db))
        assert code == 0, err
        sent = [r["body"]["max_tokens"] for r in fake.requests]
    assert "vLLM on 127.0.0.1" in out and "states a context of 2,048 tokens" in out
    assert "max tokens 14,000 -> 512" in out and "history budget 100,000 ->" in out
    assert sent and max(sent) <= 512  # no call asked for more than the context leaves
    with Store(db) as store:
        [run] = store.runs.list_runs()
        assert run.status == "finished"
        assert (run.config.max_tokens, run.config.context_tokens, run.config.server_kind) == (512, 2048, "vllm")
        assert run.config.history_budget < 2048
        faults = [s.fault for e in store.episodes.list(run.id) for s in store.episodes.steps(e.id) if s.fault]
    assert not any("context" in f for f in faults)  # nothing had to be refitted: fitted up front


def test_a_context_stated_only_in_an_error_is_learned_on_the_first_call():
    """A server that does not describe itself (no /props, no max_model_len) refuses the first call
    for its context and states the size in the error: the call is fitted and made again, and the
    next call is fitted up front."""
    with FakeOpenAI(kind="plain", context=512, enforce_context=True, reply=PLAY) as fake:
        settings = CallSettings("hosted_vllm/quiet", api_base=fake.base, max_tokens=14_000, max_retries=0,
                                timeout_s=10)
        first = asyncio.run(complete(settings, MESSAGES))
        second = asyncio.run(complete(settings, MESSAGES))
        asked = [r["body"]["max_tokens"] for r in fake.requests]
    assert "Answer: collaborate" in first.reply
    assert any("the server's context is 512 tokens: max tokens 1,024 ->" in f for f in first.faults)
    # unknown at first: the bounded default, not 14,000; then fitted to what the error taught
    assert asked[0] == servers.UNKNOWN_CONTEXT_MAX_TOKENS and all(a < 512 for a in asked[1:]) and len(asked) == 3
    assert second.faults == ()  # learned: no refusal any more
    assert servers.known("hosted_vllm/quiet", fake.base).context == 512


def test_a_prompt_larger_than_the_context_is_refused_with_the_servers_words():
    with FakeOpenAI(kind="plain", context=8, enforce_context=True, reply=PLAY) as fake:
        settings = CallSettings("hosted_vllm/quiet", api_base=fake.base, max_retries=0, timeout_s=10)
        from s3gym_tui.engine.llm import ModelUnavailable

        with pytest.raises(ModelUnavailable, match="maximum context length is 8 tokens"):
            asyncio.run(complete(settings, MESSAGES))


def test_context_in_error_reads_the_servers_ways_of_saying_it():
    assert servers.context_in_error("This model's maximum context length is 2048 tokens. However") == 2048
    assert servers.context_in_error("Requested tokens (4700) exceed context window of 4,096") == 4096
    assert servers.context_in_error('{"type": "exceed_context_size_error", "n_ctx": 8192}') == 8192
    assert servers.context_in_error("rate limited, try again in 20 seconds") is None


def test_the_sweep_plan_is_fitted_to_each_server(tmp_path, capsys):
    with FakeOpenAI(kind="llama.cpp", context=4096) as fake:
        code, out, err = run_cli(capsys, "sweep", "--games", "trust", "--pathways", "history", "-m",
                                 "llamafile/fake", "--api-base", fake.base, "--episodes", "1",
                                 "--eval-episodes", "1", "--plan", "--db", str(tmp_path / "s.db"))
    assert code == 0, err
    assert "llama.cpp server on 127.0.0.1" in out and "4,096 tokens" in out and "max tokens 14,000 -> 1,024" in out
    assert "output cap 1,024" in " ".join(out.split())
    assert not (tmp_path / "s.db").exists()  # --plan stores nothing


def test_report_json_shows_the_decoding_next_to_the_model(tmp_path, capsys):
    with FakeOpenAI(kind="llama.cpp", context=8192, reply="Answer: collaborate, Score: 1") as fake:
        db = str(tmp_path / "g.db")
        code, out, err = run_cli(capsys, "run", "trust", "-m", "llamafile/fake", "--api-base", fake.base,
                                 "--decoding", "grammar", "--episodes", "1", "--eval-every", "1",
                                 "--eval-episodes", "0", "--db", db)
        assert code == 0, err
    assert "decoding: grammar, sent as GBNF grammar (llama.cpp `grammar`)" in out
    code, out, _ = run_cli(capsys, "report", "--json", "--db", db)
    rows = json.loads(out)["tables"]["runs"]["rows"]
    assert [(r["model"], r["decoding"]) for r in rows] == [("llamafile/fake", "grammar")]


def test_discovery_lists_the_context_each_local_server_states():
    from s3gym_tui.engine import discovery

    with FakeOpenAI(kind="llama.cpp", context=2048, models=("/m/SmolLM2.gguf",)) as llama, \
            FakeOpenAI(kind="vllm", context=32768, models=("qwen",)) as vllm, FakeOpenAI(kind="plain") as plain:
        found = discovery.local_models((("llama.cpp server", llama.server_address[1], "llamafile", "/v1"),
                                        ("vLLM", vllm.server_address[1], "hosted_vllm", "/v1"),
                                        ("LM Studio", plain.server_address[1], "lm_studio", "/v1")))
    by_model = {f.model: f for f in found}
    assert by_model["llamafile//m/SmolLM2.gguf"].context == 2048
    assert "context 2,048" in by_model["llamafile//m/SmolLM2.gguf"].source
    assert by_model["hosted_vllm/qwen"].context == 32768
    assert by_model["lm_studio/fake"].context is None and "context" not in by_model["lm_studio/fake"].source


def test_a_call_outside_a_run_is_fitted_to_the_context_its_server_states():
    """Hand play has no run config: the call asks the server once and fits max tokens up front."""
    with FakeOpenAI(kind="vllm", context=2048, enforce_context=True, reply=PLAY) as fake:
        settings = CallSettings("hosted_vllm/fake", api_base=fake.base, max_tokens=14_000, max_retries=0,
                                timeout_s=10)
        results = [asyncio.run(complete(settings, MESSAGES)) for _ in range(2)]
        asked = [r["body"]["max_tokens"] for r in fake.requests]
        probes = [p for p in fake.gets if p.endswith("/models")]
    assert all(r.faults == () for r in results) and len(asked) == 2 and max(asked) < 2048
    assert len(probes) == 1  # described once, then cached


def test_a_call_to_a_server_that_states_no_context_asks_for_a_bounded_reply():
    """Hand play against a server that states no context: not 14,000 tokens against a window it
    may not have (issue 36), until the server states or teaches it."""
    with FakeOpenAI(kind="plain", reply=PLAY) as fake:
        settings = CallSettings("hosted_vllm/fake", api_base=fake.base, max_tokens=14_000, max_retries=0,
                                timeout_s=10)
        asyncio.run(complete(settings, MESSAGES))
        small = asyncio.run(complete(CallSettings("hosted_vllm/fake", api_base=fake.base, max_tokens=200,
                                                  max_retries=0, timeout_s=10), MESSAGES))
        asked = [r["body"]["max_tokens"] for r in fake.requests]
    assert asked == [servers.UNKNOWN_CONTEXT_MAX_TOKENS, 200] and small.faults == ()


def test_the_estimate_and_the_server_line_say_the_context_is_unknown(capsys):
    with FakeOpenAI(kind="plain") as fake:
        code, out, err = run_cli(capsys, "run", "trust", "-m", "hosted_vllm/fake", "--api-base", fake.base,
                                 "--episodes", "1", "--eval-episodes", "0", "--estimate")
    assert code == 0, err
    assert "states no context size: context unknown: max tokens 14,000 -> 1,024" in out
    assert "(1,024 max tokens a reply; context unknown;" in out


def _refusing_base() -> str:
    """The api base of a port where nothing listens (bound, then closed: connecting is refused)."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"


def test_a_server_that_refuses_the_connection_is_said_to_refuse_it_and_asked_again_later():
    """Not "states no context size" (it said nothing because nothing listens), and not remembered:
    the server may be starting, and the next question reaches it."""
    base = _refusing_base()
    info = servers.describe("hosted_vllm/fake", base)
    assert info.unreachable == "refused the connection" and info.context is None
    assert info.said() == f"the server on {info.where} refused the connection: context unknown"
    assert "states no context" not in info.said()
    assert servers.known("hosted_vllm/fake", base) is None  # not cached
    fitted = fitting.fit_to_context(info, "hosted_vllm/fake", "trust", "none", 14_000, 100_000)
    assert fitted.notes[0].startswith(f"the server on {info.where} refused the connection: context unknown")
    port = int(base.rsplit(":", 1)[1].split("/")[0])
    with FakeOpenAI(kind="vllm", context=3072, port=port) as fake:  # the server has started since
        later = servers.describe("hosted_vllm/fake", fake.base)
    assert (later.unreachable, later.context) == ("", 3072)
    assert servers.known("hosted_vllm/fake", base) == later
