"""Run estimates, model discovery (local servers, keyed providers), per-model settings, the reply
contract watch and model/game compatibility."""

from __future__ import annotations

import http.server
import json
import threading

import pytest

from s3gym_tui.config import ConfigError, ModelSettings, Settings, load_settings, save_model_settings
from s3gym_tui.engine import discovery
from s3gym_tui.engine.contract import ContractWatch, contract_warning
from s3gym_tui.engine.estimate import estimate_run
from s3gym_tui.models import RunConfig, Step
from s3gym_tui.engine.preflight import model_game_problem


# ----- estimate ------------------------------------------------------------------------------------
def test_estimate_counts_calls_from_the_protocol():
    e = estimate_run(RunConfig(model="scripted/snake", game="snake", pathway="none", explore_episodes=30,
                               eval_every=3, eval_episodes=3))
    assert (e.explore_steps, e.eval_steps) == (64, 64)
    assert e.explore_calls == 30 * 64 and e.eval_calls == 11 * 3 * 64 and e.summary_calls == 0
    assert e.output_tokens_max == e.calls * 14_000
    assert e.price_known and e.input_cost == 0.0  # built-in models are free


def test_estimate_follows_step_caps_pathways_and_budgets():
    chess = estimate_run(RunConfig(model="scripted/chess", game="chess", explore_episodes=4, eval_every=2,
                                   eval_episodes=1, step_cap=3))
    assert chess.explore_steps == 3 and chess.calls == 4 * 3 + 3 * 1 * 3
    summary = estimate_run(RunConfig(model="scripted/trust", game="trust", pathway="summary", explore_episodes=6))
    assert summary.summary_calls == 6
    none = estimate_run(RunConfig(model="scripted/trust", game="trust", pathway="none", explore_episodes=6))
    history = estimate_run(RunConfig(model="scripted/trust", game="trust", pathway="history", explore_episodes=6))
    small = estimate_run(RunConfig(model="scripted/trust", game="trust", pathway="history", explore_episodes=6,
                                   history_budget=100))
    assert none.input_tokens < small.input_tokens < history.input_tokens  # history costs, the budget caps it
    assert none.calls == history.calls


def test_estimate_of_what_is_left_of_a_run():
    config = RunConfig(model="scripted/trust", game="trust", pathway="summary", explore_episodes=6,
                       eval_every=3, eval_episodes=2)
    whole = estimate_run(config)
    left = estimate_run(config, explore_done=frozenset({0, 1, 2, 3}), checkpoints_done=frozenset({0, 3}))
    steps = left.explore_steps
    assert left.explore_calls == 2 * steps and left.eval_calls == 1 * 2 * left.eval_steps
    assert left.summary_calls == 3  # states 4, 5, 6 (at most: 4 may be written as episode 4 started)
    assert left.input_tokens < whole.input_tokens and left.calls < whole.calls
    assert "(2 episodes x" in left.lines()[0] and "(1 checkpoints x 2 episodes" in left.lines()[0]
    assert estimate_run(config, frozenset(range(6)), frozenset({0, 3, 6})).calls == 0
    assert "(6 episodes x" in whole.lines()[0]  # nothing done: the whole run, as before


def test_estimate_lines_say_calls_tokens_and_price():
    lines = estimate_run(RunConfig(model="openai/gpt-4.1", game="trust", explore_episodes=3)).lines()
    assert "model calls" in lines[0] and "input tokens" in lines[1]
    assert lines[2].startswith("cost: about $")  # litellm knows this model's price
    unknown = estimate_run(RunConfig(model="hosted_vllm/my-own-model", game="trust", explore_episodes=3))
    assert not unknown.price_known and "does not know the price" in unknown.lines()[2]


# ----- discovery -----------------------------------------------------------------------------------
class _Models(http.server.BaseHTTPRequestHandler):
    def do_GET(self):  # noqa: N802 - http.server's name
        if self.path == "/v1/models":
            body = json.dumps({"object": "list", "data": [{"id": "qwen2.5:0.5b"}, {"id": "llama3.2"}]}).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(body)
        else:
            self.send_response(404)
            self.end_headers()

    def log_message(self, *args):  # quiet
        pass


@pytest.fixture
def local_server():
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Models)
    thread = threading.Thread(target=server.serve_forever, args=(0.02,), daemon=True)  # a quick shutdown
    thread.start()
    yield server.server_address[1]
    server.shutdown()


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_local_servers_are_listed_with_their_api_base(local_server):
    servers = (("Ollama", local_server, "ollama_chat", ""), ("vLLM", free_port(), "hosted_vllm", "/v1"))
    found = discovery.local_models(servers)
    assert [f.model for f in found] == ["ollama_chat/qwen2.5:0.5b", "ollama_chat/llama3.2"]
    assert all(f.api_base == f"http://127.0.0.1:{local_server}" for f in found)
    assert "Ollama on 127.0.0.1" in found[0].source  # the closed port is skipped quietly


def test_providers_with_keys_are_listed_and_none_without():
    assert discovery.keyed_models({}) == []
    found = discovery.keyed_models({"ANTHROPIC_API_KEY": "canary-not-a-key"})
    assert found and all(f.model.startswith("anthropic/") for f in found)
    assert all("ANTHROPIC_API_KEY is set" == f.source for f in found)
    assert all("canary" not in f.model + f.source for f in found)  # the value is never shown


def test_discover_puts_local_servers_first(local_server):
    found = discovery.discover({"OPENAI_API_KEY": "x"}, servers=(("LM Studio", local_server, "lm_studio", "/v1"),))
    assert found[0].model == "lm_studio/qwen2.5:0.5b" and found[0].api_base.endswith("/v1")
    assert any(f.model.startswith("openai/") for f in found)


# ----- per-model settings --------------------------------------------------------------------------
def test_model_settings_come_from_the_config_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('default_model = "ollama_chat/llama3.2"\n\n[models."ollama_chat/llama3.2"]\n'
                    'api_base = "http://127.0.0.1:11434"\nmax_tokens = 512\ntimeout_s = 300\n')
    settings = load_settings(path)
    own = settings.model_settings("ollama_chat/llama3.2")
    assert (own.api_base, own.max_tokens, own.timeout_s) == ("http://127.0.0.1:11434", 512, 300.0)
    assert settings.model_settings("openai/gpt-4.1") == ModelSettings()
    path.write_text('[models."x"]\nmax_tokens = 0\n')
    with pytest.raises(ConfigError, match="max_tokens"):
        load_settings(path)


def test_saving_model_settings_keeps_the_rest_of_the_file(tmp_path):
    path = tmp_path / "config.toml"
    path.write_text('# my settings\ntheme = "light"  # easier on the eyes\n\n[keymap]\nstep = "j"\n')
    save_model_settings("ollama_chat/llama3.2", ModelSettings(api_base="http://127.0.0.1:11434", max_tokens=256),
                        path)
    text = path.read_text()
    assert "# my settings" in text and "# easier on the eyes" in text and 'step = "j"' in text
    settings = load_settings(path)
    assert settings.theme == "light" and settings.keymap == {"step": "j"}
    assert settings.model_settings("ollama_chat/llama3.2").max_tokens == 256
    save_model_settings("ollama_chat/llama3.2", ModelSettings(), path)  # empty: the table goes
    assert load_settings(path).models == {}


def test_call_settings_use_the_models_own_settings():
    from s3gym_tui.screens.play_support import call_settings

    settings = Settings().with_model_settings("hosted_vllm/m", ModelSettings(api_base="http://h:1/v1",
                                                                           timeout_s=30))
    call = call_settings("hosted_vllm/m", settings)
    assert (call.api_base, call.timeout_s, call.max_tokens, call.max_retries) == ("http://h:1/v1", 30.0, 14_000, 2)
    assert call_settings("openai/gpt-4.1", settings).api_base is None


# ----- the reply contract --------------------------------------------------------------------------
def step(i: int, reply: str, action: str = "cheat") -> Step:
    return Step(episode_id="e", index=i, observation="o", prompt="", reply=reply, action=action, self_score=None,
                reward=0.0, feedback="", valid=True, terminated=False, truncated=False)


def test_contract_warning_needs_most_recent_replies_unparsed():
    good, bad = "Answer: cheat, Score: 1", "Ich denke nach. 我在想。"
    assert contract_warning("m", [step(0, bad), step(1, bad)]) is None  # too few to judge
    warning = contract_warning("m", [step(0, good), step(1, bad), step(2, bad)])
    assert warning and "2 of its last 3 replies did not parse" in warning and "67%" in warning
    assert contract_warning("m", [step(0, good), step(1, good), step(2, bad)]) is None
    people = [step(i, "", action="cheat") for i in range(5)]  # typed by a person: not judged
    assert contract_warning("m", people + [step(5, bad)]) is None
    window = [step(i, bad) for i in range(10)] + [step(10 + i, good) for i in range(6)]
    assert contract_warning("m", window) is None  # only the last 10 count: 4 of 10 unparsed


def test_contract_watch_follows_a_stream():
    watch = ContractWatch("m", window=4)
    for i in range(3):
        watch.add(step(i, "no answer here"))
    assert watch.warning and watch.fraction_unparsed == 1.0
    for i in range(3, 6):
        watch.add(step(i, "Answer: cheat, Score: 0"))
    assert watch.warning is None and watch.fraction_unparsed == 0.25


# ----- model and game --------------------------------------------------------------------------------
@pytest.mark.parametrize("model,game,refused", [
    ("scripted/pvz", "snake", True), ("fault/trust", "chess", True), ("scripted/pvz", "plants-vs-zombies", False),
    ("scripted/snake", "snake", False), ("openai/gpt-4.1", "snake", False), ("local/smollm2-135m", "pvz", False),
])
def test_scripted_models_play_only_their_game(model, game, refused):
    problem = model_game_problem(model, game)
    assert (problem is not None) == refused
    if refused:
        assert "only" in problem and "plays" in problem
