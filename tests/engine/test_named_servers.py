"""Servers on other ports are found (issue 36): a person names them (the config's `servers`,
$S3GYM_SERVERS), each is asked what it is (its models get the provider that fits it), and a server
that lists no models is said ("not answering", "nothing listening"), not dropped; a busy one (it
accepts the connection, then says nothing) is one of those."""

from __future__ import annotations

import json
import socket

import pytest

from s3gym_tui.cli import main
from s3gym_tui.config import ConfigError, load_settings
from s3gym_tui.engine import discovery, servers

from tests.fake_openai import FakeOpenAI


@pytest.fixture(autouse=True)
def _fresh_descriptions():
    servers._CACHE.clear()
    yield
    servers._CACHE.clear()


@pytest.fixture
def busy_port():
    """A server that accepts connections and never answers (a llama.cpp server while it generates)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)
        yield sock.getsockname()[1]


def closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def test_servers_are_named_in_the_config_or_the_environment(tmp_path, monkeypatch):
    path = tmp_path / "config.toml"
    path.write_text('servers = ["8765", "gpu1:8000", "http://gpu2:8000/v1"]\n')
    assert load_settings(path).servers == ("8765", "gpu1:8000", "http://gpu2:8000/v1")
    monkeypatch.setenv("S3GYM_SERVERS", "9001, http://127.0.0.1:9002/v1")
    assert load_settings(path).servers == ("9001", "http://127.0.0.1:9002/v1")  # the environment's replace them
    monkeypatch.setenv("S3GYM_SERVERS", "9001,::::")
    with pytest.raises(ConfigError, match=r"^S3GYM_SERVERS: server '::::' is not a port, host:port or") as bad:
        load_settings(path)
    assert "\n" not in str(bad.value)
    monkeypatch.delenv("S3GYM_SERVERS")
    path.write_text('servers = ["99999"]\n')
    with pytest.raises(ConfigError, match=r"servers: server '99999' is not a port"):
        load_settings(path)


def test_a_named_server_on_another_port_is_found_with_the_provider_that_fits_it():
    with FakeOpenAI(kind="llama-cpp-python", models=("/m/SmolLM2.gguf",)) as llama, \
            FakeOpenAI(kind="vllm", context=32768, models=("qwen",)) as vllm:
        found = discovery.scan(named=(str(llama.server_address[1]), vllm.base), servers=()).found
    by_model = {f.model: f for f in found}
    assert set(by_model) == {"llamafile//m/SmolLM2.gguf", "hosted_vllm/qwen"}
    llama_cpp = by_model["llamafile//m/SmolLM2.gguf"]
    assert llama_cpp.api_base == llama.base and llama_cpp.source.startswith("llama-cpp-python server on 127.0.0.1:")
    assert by_model["hosted_vllm/qwen"].context == 32768 and "context 32,768" in by_model["hosted_vllm/qwen"].source


def test_servers_that_list_no_models_are_said_not_dropped(busy_port):
    quiet = closed_port()
    with FakeOpenAI(kind="plain") as usual:
        usual_ports = (("LM Studio", usual.server_address[1], "lm_studio", "/v1"),
                       ("vLLM", busy_port, "hosted_vllm", "/v1"), ("Ollama", quiet, "ollama_chat", ""))
        scanned = discovery.scan(named=(f"127.0.0.1:{busy_port}", str(closed_port()), str(quiet)),
                                 servers=usual_ports, timeout_s=0.3)
    assert [f.model for f in scanned.found] == ["lm_studio/fake"]
    said = [s.said() for s in scanned.silent]
    assert said[0] == f"vLLM on 127.0.0.1:{busy_port}: not answering within 0.3 s (busy?)"  # a usual port, busy
    assert said[1].startswith("named server on 127.0.0.1:") and said[1].endswith(": nothing listening")
    assert len(said) == 2  # the busy port is asked once; the closed usual port is no model server: quiet


def test_models_lists_the_servers_found_and_those_not_answering(capsys, monkeypatch, busy_port):
    with FakeOpenAI(kind="llama-cpp-python", models=("smollm2",)) as llama:
        monkeypatch.setenv("S3GYM_SERVERS", f"{llama.server_address[1]},{busy_port}")
        code = main(["models", "--servers"])
        out = capsys.readouterr().out
        assert code == 0
        assert "llamafile/smollm2" in out and llama.base in out
        assert f"not answering: named server on 127.0.0.1:{busy_port}: not answering within" in out
        code = main(["models", "--servers", "--json"])
        data = json.loads(capsys.readouterr().out)
    assert code == 0 and any(f["model"] == "llamafile/smollm2" for f in data["found"])
    assert {"server": f"127.0.0.1:{busy_port}", "name": "named server"}.items() <= data["not_answering"][-1].items()
    assert data["models"][0]["model"].startswith("local/")


def test_models_without_servers_asks_no_server(capsys, monkeypatch, busy_port):
    monkeypatch.setenv("S3GYM_SERVERS", str(busy_port))
    assert main(["models", "--json"]) == 0
    assert isinstance(json.loads(capsys.readouterr().out), list)  # the built-in list, as before
