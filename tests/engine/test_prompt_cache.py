"""Prompt caching: the stable prefix first, marked for Claude (litellm's cache-control injection),
cached input tokens recorded per step as the provider reports them (OpenAI, Anthropic), priced at the
cached rate, shown per run (report, CLI) and undefined where the provider says nothing; the plan's
two bounds (no cache, expected cache)."""

from __future__ import annotations

import json

import pytest

import s3gym_games as games
from s3gym_tui.cli import main
from s3gym_tui.engine import prompt_cache
from s3gym_tui.engine.estimate import estimate_run
from s3gym_tui.engine.llm import _litellm
from s3gym_games.prompt import TurnRecord, build_messages
from s3gym_tui.engine.sweep_plan import plan
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store

from tests.fake_openai import FakeOpenAI

PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"  # a valid Trust move
TINY = ["--episodes", "2", "--eval-every", "2", "--eval-episodes", "1"]


def cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def model_steps(store: Store):
    run = store.runs.list_runs()[0]
    return run, [s for e in store.episodes.list(run.id) for s in store.episodes.steps(e.id, include_prompt=False)
                 if s.actor == "model"]


def price_of(model: str) -> dict:
    return _litellm().get_model_info(model)


@pytest.fixture
def keys(monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test-0000000000000000")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-ant-test-0000000000000000")


# ----- the prompt's layout ---------------------------------------------------------------------------
def test_consecutive_prompts_of_an_episode_share_everything_but_the_step_prompt():
    game = games.make("snake", "explore")
    game.reset(0)
    turns: list[TurnRecord] = []
    previous = None
    for _ in range(5):
        messages = build_messages(game, "Previous episode 1 ...\nEnv: a\nLLM: Answer: UP, Score: 1", turns, "fb")
        split = build_messages(game, "Previous episode 1 ...\nEnv: a\nLLM: Answer: UP, Score: 1", turns, "fb",
                               split=True)
        assert "".join(m["content"] for m in split[1:]) == messages[1]["content"]  # the same text
        if previous is not None:  # every piece of the last call but its step prompt comes back unchanged
            assert [m["content"] for m in split[:len(previous) - 1]] == [m["content"] for m in previous[:-1]]
        previous = split
        observation = game.observation()
        move = games.reference_policy("snake").act(game.view())
        game.step(move.action)
        turns.append(TurnRecord(observation, move.action, 1.0))


def test_only_claude_is_marked_and_the_marks_are_hint_and_end_of_the_repeated_prefix():
    assert prompt_cache.needs_marker("anthropic/claude-haiku-4-5")
    assert prompt_cache.needs_marker("bedrock/anthropic.claude-3-5-sonnet-20240620-v1:0")
    assert not prompt_cache.needs_marker("openai/gpt-4o-mini")  # OpenAI caches by itself
    assert not prompt_cache.needs_marker("local/smollm2-135m") and not prompt_cache.needs_marker("scripted/trust")
    messages = [{"role": "system", "content": "s"}, {"role": "user", "content": "hint"},
                {"role": "user", "content": "turn 0"}, {"role": "user", "content": "turn 1"},
                {"role": "user", "content": "step"}]
    assert prompt_cache.injection_points(messages) == [{"location": "message", "index": 1},
                                                       {"location": "message", "index": 3}]
    assert prompt_cache.cache_kwargs("openai/gpt-4o-mini", messages) == {}


# ----- what providers report ------------------------------------------------------------------------
def test_cached_usage_reads_openai_and_anthropic_fields_and_refuses_nonsense():
    faults: list[str] = []
    assert prompt_cache.cached_usage({"prompt_tokens_details": {"cached_tokens": 64}}, 100, faults) == (64, None)
    assert prompt_cache.cached_usage({"cache_read_input_tokens": 80, "cache_creation_input_tokens": 10}, 100,
                                     faults) == (80, 10)
    assert prompt_cache.cached_usage({"prompt_tokens": 100}, 100, faults) == (None, None)  # not said: unknown
    assert prompt_cache.cached_usage({"prompt_tokens_details": None}, 100, faults) == (None, None)
    assert faults == []
    assert prompt_cache.cached_usage({"prompt_tokens_details": {"cached_tokens": 101}}, 100, faults) == (None, None)
    assert prompt_cache.cached_usage({"prompt_tokens_details": {"cached_tokens": "lots"}}, 100, faults) == \
        (None, None)
    assert prompt_cache.cached_usage({"cache_read_input_tokens": 80, "cache_creation_input_tokens": 30}, 100,
                                     faults) == (None, None)
    assert len(faults) == 3 and all("stored as unknown" in f for f in faults)


def test_openai_cached_tokens_are_stored_per_step_priced_at_the_cached_rate_and_shown(tmp_path, capsys, keys):
    db = str(tmp_path / "c.db")
    with FakeOpenAI(reply=PLAY, cache="openai", cache_min=64, cache_block=16) as server:
        code, _, err = cli(capsys, "run", "trust", "-m", "openai/gpt-4o-mini", "--api-base", server.base_url,
                           "-p", "history", *TINY, "--db", db)
    assert code == 0, err
    info = price_of("openai/gpt-4o-mini")
    with Store(db) as store:
        run, steps = model_steps(store)
    assert all(s.tokens_cached is not None and 0 <= s.tokens_cached <= s.tokens_in for s in steps)
    assert sum(s.tokens_cached > 0 for s in steps) >= len(steps) // 2  # consecutive calls share a prefix
    for s in steps:  # the cached part at the cache-read price, the rest at the input price
        expected = ((s.tokens_in - s.tokens_cached) * info["input_cost_per_token"]
                    + s.tokens_cached * info["cache_read_input_token_cost"]
                    + s.tokens_out * info["output_cost_per_token"])
        assert s.cost == pytest.approx(expected, rel=1e-6)
    assert any(s.tokens_cached and s.cost < (s.tokens_in * info["input_cost_per_token"]
                                             + s.tokens_out * info["output_cost_per_token"]) for s in steps)
    share = sum(s.tokens_cached for s in steps) / sum(s.tokens_in for s in steps)
    code, out, _ = cli(capsys, "report", "--json", "--db", db)
    row = json.loads(out)["tables"]["runs"]["rows"][0]
    assert row["cache_share"] == pytest.approx(share) and row["tokens_cached"] == sum(s.tokens_cached for s in steps)
    assert row["why"] is None
    code, out, _ = cli(capsys, "runs", "--json", "--db", db)
    assert json.loads(out)[0]["cache_share"] == pytest.approx(share)
    code, out, _ = cli(capsys, "runs", "--db", db)
    assert f"{share:.1%}" in out


def test_a_provider_that_says_nothing_about_its_cache_leaves_the_share_undefined(tmp_path, capsys, keys):
    db = str(tmp_path / "n.db")
    with FakeOpenAI(reply=PLAY, usage="auto") as server:  # no prompt_tokens_details at all
        code, _, err = cli(capsys, "run", "trust", "-m", "openai/gpt-4o-mini", "--api-base", server.base_url,
                           *TINY, "--db", db)
    assert code == 0, err
    with Store(db) as store:
        _, steps = model_steps(store)
    assert steps and all(s.tokens_cached is None and s.tokens_cache_write is None for s in steps)
    code, out, _ = cli(capsys, "report", "--json", "--db", db)
    row = json.loads(out)["tables"]["runs"]["rows"][0]
    assert row["cache_share"] is None and row["tokens_cached"] is None and "not reported" in row["why"]
    code, out, _ = cli(capsys, "runs", "--json", "--db", db)
    assert json.loads(out)[0]["cache_share"] is None
    code, out, _ = cli(capsys, "runs", "--db", db)
    line = next(ln for ln in out.splitlines() if "trust-none" in ln)
    assert "—" in line and "%" not in line


def test_claude_gets_its_stable_prefix_marked_and_its_cache_reads_and_writes_are_stored_and_priced(
        tmp_path, capsys, keys):
    db = str(tmp_path / "a.db")
    model = "anthropic/claude-haiku-4-5"
    with FakeOpenAI(reply=PLAY, cache="anthropic", cache_min=64) as server:
        root = server.base_url.removesuffix("/v1")  # litellm posts to <api base>/v1/messages
        code, _, err = cli(capsys, "run", "trust", "-m", model, "--api-base", root, "-p", "history", *TINY,
                           "--db", db)
        requests = list(server.requests)
    assert code == 0, err
    assert requests and all(r["path"] == "/v1/messages" for r in requests)
    # the request as litellm sends it: one user message in blocks, the marks on the Hint Messages
    # (or first turn) and on the last turn, never on the step prompt; text unchanged
    marked_any = False
    for request in requests:
        blocks = [b for m in request["body"]["messages"] for b in m["content"]]
        marks = [i for i, b in enumerate(blocks) if b.get("cache_control")]
        assert len(marks) <= 2 and len(blocks) - 1 not in marks
        if len(blocks) > 1:
            assert marks and marks[-1] == len(blocks) - 2
            marked_any = True
        assert blocks[-1]["text"].lstrip("\n").startswith("Game rules:")
    assert marked_any
    info = price_of(model)
    with Store(db) as store:
        run, steps = model_steps(store)
        prompt = json.loads(store.prompts.step_prompt(store.episodes.list(run.id)[-1].id, 3))
    assert [m["role"] for m in prompt] == ["system", "user"]  # stored as one text, as always
    assert all(s.tokens_cached is not None and s.tokens_cache_write is not None for s in steps)
    assert sum(s.tokens_cached for s in steps) > sum(s.tokens_cache_write for s in steps) > 0
    for s in steps:
        plain = s.tokens_in - s.tokens_cached - s.tokens_cache_write
        expected = (plain * info["input_cost_per_token"] + s.tokens_cached * info["cache_read_input_token_cost"]
                    + s.tokens_cache_write * info["cache_creation_input_token_cost"]
                    + s.tokens_out * info["output_cost_per_token"])
        assert s.cost == pytest.approx(expected, rel=1e-6)


def test_claude_through_an_openai_compatible_proxy_reports_anthropic_fields(tmp_path, keys):
    """A proxy that passes Anthropic's usage fields in an OpenAI-shaped reply (cache_read_input_tokens)."""
    import asyncio

    from s3gym_tui.engine.llm import CallSettings, complete

    with FakeOpenAI(reply=PLAY, cache="anthropic", cache_min=8) as server:
        settings = CallSettings(model="openai/claude-proxy", api_base=server.base_url, max_retries=0)
        messages = [{"role": "system", "content": "s" * 64}, {"role": "user", "content": "x" * 64}]
        marked = [{**messages[0], "content": [{"type": "text", "text": "s" * 64,
                                               "cache_control": {"type": "ephemeral"}}]}, messages[1]]
        first = asyncio.run(complete(settings, marked))
        second = asyncio.run(complete(settings, marked))
    assert (first.tokens_cached, first.tokens_cache_write) == (0, 16)
    assert (second.tokens_cached, second.tokens_cache_write) == (16, 0)


# ----- the plan: both bounds -----------------------------------------------------------------------
def test_the_estimate_gives_the_cost_with_no_cache_and_with_the_expected_cache():
    config = RunConfig(model="openai/gpt-4o-mini", game="snake", pathway="history", explore_episodes=3)
    e = estimate_run(config)
    assert 0 < e.input_tokens_cached < e.input_tokens and e.input_tokens_cache_written == 0
    info = price_of("openai/gpt-4o-mini")
    assert e.input_cost_cached == pytest.approx((e.input_tokens - e.input_tokens_cached) * info["input_cost_per_token"]
                                                + e.input_tokens_cached * info["cache_read_input_token_cost"])
    assert e.input_cost_cached < e.input_cost
    assert any("expected prompt cache" in line for line in e.lines())
    claude = estimate_run(config.model_copy(update={"model": "anthropic/claude-haiku-4-5"}))
    assert claude.input_tokens_cache_written > 0  # Claude also pays to write what it caches
    unknown = estimate_run(config.model_copy(update={"model": "hosted_vllm/mine"}))
    assert unknown.input_cost_cached is None and not any("prompt cache" in line for line in unknown.lines())
    free = estimate_run(config.model_copy(update={"model": "scripted/snake"}))
    assert free.input_tokens_cached == 0 and not any("prompt cache" in line for line in free.lines())


def test_the_sweep_plan_prices_typical_replies_with_and_without_the_cache():
    configs = [RunConfig(model=m, game="trust", pathway=p, explore_episodes=4)
               for m in ("openai/gpt-4o-mini", "hosted_vllm/mine") for p in ("none", "history")]
    by_model = {m.model: m for m in plan(configs).models}
    gpt, mine = by_model["openai/gpt-4o-mini"], by_model["hosted_vllm/mine"]
    assert 0 < gpt.tokens_in_cached < gpt.tokens_in
    assert gpt.cost_typical_cached < gpt.cost_typical
    assert mine.cost_typical is None and mine.cost_typical_cached is None and mine.tokens_in_cached == 0


def test_episode_cache_counts_the_repeated_prefix_above_the_minimum():
    # 3 calls, prefix 1000, turn 100: call 1 repeats 1000 (+0 turns), call 2 repeats 1100
    assert prompt_cache.episode_cache(3, 1000, 100, marked=False, minimum=0) == (2100, 0)
    assert prompt_cache.episode_cache(3, 1000, 100, marked=False, minimum=1024) == (1100, 0)
    # marked: each call writes what it marks beyond what it read (1000, 1100 - 1000, 1200 - 1100)
    assert prompt_cache.episode_cache(3, 1000, 100, marked=True, minimum=0) == (2100, 1200)


def test_the_agent_panel_says_how_many_input_tokens_were_cached_only_when_the_provider_said():
    from s3gym_tui.widgets.agent_panel import usage_line

    assert usage_line("Call", 1200, 10, 5.0, 0.001, 1024) == "Call: 1,200 in (1,024 cached) · 10 out · 5 ms · $0.0010"
    assert usage_line("Call", 1200, 10, 5.0, 0.001, 0) == "Call: 1,200 in (0 cached) · 10 out · 5 ms · $0.0010"
    assert usage_line("Call", 1200, 10, 5.0, None) == "Call: 1,200 in · 10 out · 5 ms · —"
