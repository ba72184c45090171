"""Constrained decoding on request and model arguments: the game's action grammar reaches each kind
of server in its own form (the fake server accepts only its kind's fields and records what it
got), a JSON-schema reply parses, `--model-arg` reaches the provider and is stored without secrets."""

from __future__ import annotations

import asyncio
import json
import sqlite3

import pytest

import s3gym_games as games
from s3gym_tui.cli import main
from s3gym_tui.engine import servers
from s3gym_tui.engine.decoding import (ModelArgError, act_grammar, parse_model_args, storable_args)
from s3gym_tui.engine.llm import CallSettings, ModelUnavailable, complete
from s3gym_games.reply import parse_reply
from s3gym_tui.store import Store

from tests.fake_openai import FakeOpenAI

PLAY = "Answer: collaborate, Score: 2"


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


def _call(model: str, fake: FakeOpenAI, decoding: str = "grammar", context: dict | None = None):
    info = servers.describe(model, fake.base)
    settings = CallSettings(model, api_base=fake.base, decoding=decoding, server_kind=info.kind,
                            max_retries=0, timeout_s=10)
    return asyncio.run(complete(settings, [{"role": "user", "content": "go"}], context or _act_context()))


@pytest.mark.parametrize("kind,model,field", [
    ("llama.cpp", "llamafile/fake", "grammar"),
    ("vllm", "hosted_vllm/fake", "structured_outputs"),
    ("vllm-legacy", "hosted_vllm/fake", "guided_grammar"),
    ("sglang", "hosted_vllm/fake", "ebnf"),
    ("ollama", "hosted_vllm/fake", "response_format"),
    ("lmstudio", "hosted_vllm/fake", "response_format"),
    ("plain", "hosted_vllm/fake", "response_format"),
])
def test_the_action_grammar_reaches_each_server_in_its_own_form(kind, model, field):
    with FakeOpenAI(kind=kind, context=4096, reply=PLAY) as fake:
        result = _call(model, fake)
        [got] = fake.grammar_fields()
    assert "Answer: collaborate" in result.reply
    assert list(got) == [field]
    grammar = act_grammar(_act_context()["grammar"])
    if field == "structured_outputs":
        assert got[field] == {"grammar": grammar}
    elif field == "response_format":
        schema = got[field]["json_schema"]["schema"]
        assert got[field]["type"] == "json_schema" and schema["required"] == ["answer", "score"]
    else:
        assert got[field] == grammar and "collaborate" in grammar  # the game's own action rule


def test_free_decoding_and_summary_calls_send_no_grammar():
    with FakeOpenAI(kind="llama.cpp", context=4096, reply=PLAY) as fake:
        _call("llamafile/fake", fake, decoding="free")
        _call("llamafile/fake", fake, context={"task": "summary", "game": "trust", "mode": "explore",
                                                "seed": -1, "actions": []})
        assert fake.grammar_fields() == [{}, {}]


def test_a_server_that_refuses_a_grammar_field_stops_the_call_with_its_words():
    """(Each form is tried once first: tests/engine/test_grammar_forms.py.)"""
    with FakeOpenAI(kind="llama.cpp", context=4096, accepts=set(), reply=PLAY) as fake:
        with pytest.raises(ModelUnavailable, match="Unrecognized request argument supplied: "):
            _call("llamafile/fake", fake)


def test_a_json_schema_reply_parses_as_the_reply_contract():
    assert parse_reply('{"answer": "collaborate", "score": 2}') == parse_reply("Answer: collaborate, Score: 2")
    assert parse_reply('```json\n{"Answer": "e2e4", "score": -1.5}\n```').self_score == -1.5
    missing = parse_reply('{"answer": "cheat"}')
    assert missing.action == "cheat" and missing.self_score is None and "score" in missing.problem
    assert parse_reply('{"move": "x"}').action is None  # not the contract


def test_model_args_are_parsed_checked_and_stored_without_secrets():
    args = parse_model_args(["top_k=5", "repetition_penalty=1.1", "stop=[\"\\n\\n\"]", "note=plain text",
                             "api_key=sk-abcdefgh12345678",
                             'extra_headers={"Authorization": "Bearer abcdefgh1234", "X-Team": "a"}'])
    assert args["top_k"] == 5 and args["stop"] == ["\n\n"] and args["note"] == "plain text"
    assert storable_args(args) == {"top_k": 5, "repetition_penalty": 1.1, "stop": ["\n\n"], "note": "plain text",
                                   "extra_headers": {"X-Team": "a"}}
    for bad in (["top_k"], ["=5"], ["messages=[]"], ["model=x"], ["bad key=1"]):
        with pytest.raises(ModelArgError):
            parse_model_args(bad)


def test_model_args_reach_the_provider_and_the_store_keeps_no_secret(tmp_path, capsys):
    secret = "sk-thisisaverysecretvalue123"
    with FakeOpenAI(kind="vllm", context=8192, reply=PLAY) as fake:
        db = tmp_path / "m.db"
        code = main(["run", "trust", "-m", "hosted_vllm/fake", "--api-base", fake.base, "-M", "top_k=7",
                     "--model-arg", f"api_key={secret}", "-M", "seed_offset=3", "--episodes", "1",
                     "--eval-every", "1", "--eval-episodes", "0", "--db", str(db)])
        out = capsys.readouterr()
        assert code == 0, out.err
        bodies = [r["body"] for r in fake.requests]
        auth = {v for r in fake.requests for k, v in r["headers"].items() if k.lower() == "authorization"}
    assert all(b["top_k"] == 7 and b["seed_offset"] == 3 for b in bodies)
    assert auth == {f"Bearer {secret}"}  # used for the calls
    assert "model args top_k=7, seed_offset=3 (stored without secrets)" in out.out and secret not in out.out
    with Store(db) as store:
        [run] = store.runs.list_runs()
        assert run.config.model_args == {"top_k": 7, "seed_offset": 3}
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("m.db"))
    assert secret.encode() not in raw
    with sqlite3.connect(db) as conn:
        assert not conn.execute("SELECT count(*) FROM runs WHERE config LIKE ?", (f"%{secret}%",)).fetchone()[0]


def test_a_bad_model_arg_or_decoding_is_one_line(tmp_path, capsys):
    for args, needle in ((["-M", "top_k"], "write KEY=VALUE"), (["--decoding", "strict"], "choose free or grammar")):
        code = main(["run", "trust", "-m", "scripted/trust", *args, "--db", str(tmp_path / "x.db")])
        err = capsys.readouterr().err
        assert code != 0 and needle in err and len(err.strip().splitlines()) == 1


def test_the_config_files_per_model_section_gives_decoding_and_model_args(tmp_path, capsys, monkeypatch):
    config = tmp_path / "config.toml"
    with FakeOpenAI(kind="llama.cpp", context=8192, reply=PLAY) as fake:
        config.write_text(f'[models."llamafile/fake"]\napi_base = "{fake.base}"\ndecoding = "grammar"\n'
                          f'[models."llamafile/fake".model_args]\nmin_p = 0.05\n')
        monkeypatch.setenv("S3GYM_CONFIG", str(config))
        code = main(["run", "trust", "-m", "llamafile/fake", "--episodes", "1", "--eval-every", "1",
                     "--eval-episodes", "0", "--db", str(tmp_path / "c.db")])
        assert code == 0, capsys.readouterr().err
        bodies = [r["body"] for r in fake.requests]
    assert bodies and all(b["min_p"] == 0.05 and "grammar" in b for b in bodies)
    with Store(tmp_path / "c.db") as store:
        [run] = store.runs.list_runs()
        assert run.config.decoding == "grammar" and run.config.model_args == {"min_p": 0.05}


def test_hand_play_uses_the_models_own_decoding_and_arguments():
    from s3gym_tui.config import ModelSettings, Settings
    from s3gym_tui.screens.play_support import call_settings

    own = ModelSettings(api_base="http://127.0.0.1:9/v1", decoding="grammar", model_args={"top_k": 3})
    settings = call_settings("llamafile/x", Settings().with_model_settings("llamafile/x", own))
    assert (settings.decoding, settings.model_args, settings.api_base) == ("grammar", (("top_k", 3),),
                                                                            "http://127.0.0.1:9/v1")
    assert call_settings("llamafile/x", Settings()).decoding == "free"


def test_a_sweep_passes_decoding_and_model_args_and_stores_no_secret(tmp_path, capsys):
    secret = "sk-sweepsecretvalue987654"
    with FakeOpenAI(kind="llama.cpp", context=8192, reply=PLAY) as fake:
        db = tmp_path / "w.db"
        code = main(["sweep", "--games", "trust", "--pathways", "none", "-m", "llamafile/fake", "--api-base",
                     fake.base, "--decoding", "grammar", "-M", "top_k=4", "-M", f"api_key={secret}",
                     "--episodes", "1", "--eval-every", "1", "--eval-episodes", "0", "--yes", "--db", str(db)])
        out = capsys.readouterr()
        assert code == 0, out.err
        bodies = [r["body"] for r in fake.requests]
        auth = {v for r in fake.requests for k, v in r["headers"].items() if k.lower() == "authorization"}
    assert bodies and all("grammar" in b and b["top_k"] == 4 for b in bodies)
    assert auth == {f"Bearer {secret}"}  # the secret reached the sweep's runs in this process
    assert "decoding: grammar, sent as GBNF grammar" in out.out and secret not in out.out + out.err
    assert "grammar" in out.out.split("replies per model")[1]  # the replies table names the decoding
    with Store(db) as store:
        [sweep] = store.sweeps.list_sweeps()
        [run] = store.sweeps.sweep_runs(sweep.id)
        assert run.config.decoding == "grammar" and run.config.model_args == {"top_k": 4}
        assert sweep.config.settings["model_args"] == {"top_k": 4}
    raw = b"".join(p.read_bytes() for p in tmp_path.iterdir() if p.name.startswith("w.db"))
    assert secret.encode() not in raw
