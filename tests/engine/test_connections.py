"""A sweep reuses its connections: a bounded pool per api base (engine.pools), however many calls
(counted by the server): at most one per call the sweep can have in flight there, never one per call."""

from __future__ import annotations

import asyncio

from s3gym_tui.engine.limits import CallLimits, use_limits
from s3gym_tui.engine.llm import CallSettings, complete
from s3gym_tui.engine.pools import ConnectionPool
from s3gym_tui.engine.sweep import SweepRunner
from s3gym_tui.models import SweepConfig
from s3gym_tui.store import Store
from tests.fake_openai import FakeOpenAI

PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"  # a valid Trust move
TINY = {"explore_episodes": 2, "eval_every": 2, "eval_episodes": 2}
CONCURRENCY = 3
HANDFUL = CONCURRENCY + 3  # one per call in flight, plus the server's description and a spare


def _sweep(tmp_path, bases: tuple[str, ...], concurrency: int = CONCURRENCY, models=("hosted_vllm/fake",),
           settings=TINY):
    config = SweepConfig(games=("trust",), pathways=("none", "history", "summary"), models=models,
                         settings=settings, api_bases={m: bases for m in models}, concurrency=concurrency,
                         runs_per_model=3)
    store = Store(tmp_path / "c.db")
    stored, _ = store.sweeps.create_sweep(config)
    final = asyncio.run(SweepRunner(store, stored, backoff_base_s=0).run())
    return store, final


def test_a_sweep_opens_a_handful_of_connections_to_its_api_base(tmp_path):
    with FakeOpenAI(reply=PLAY, keep_alive=True) as server:
        store, final = _sweep(tmp_path, (server.base,))
    assert final.status == "finished", final.note
    assert server.completed == store.sweeps.sweep_usage(final.id)["calls"] >= 150
    assert 1 <= server.connections <= HANDFUL, server.connections


def test_a_sweep_over_replicas_opens_a_handful_of_connections_to_each(tmp_path):
    with FakeOpenAI(reply=PLAY, keep_alive=True) as one, FakeOpenAI(reply=PLAY, keep_alive=True) as two:
        store, final = _sweep(tmp_path, (one.base, two.base))
    assert final.status == "finished", final.note
    assert one.completed + two.completed == store.sweeps.sweep_usage(final.id)["calls"] >= 150
    assert one.completed and two.completed  # the Router spread the calls
    for server in (one, two):
        assert 1 <= server.connections <= HANDFUL, server.connections


def test_the_fake_server_counts_a_connection_per_call_when_it_closes_them(tmp_path):
    """The counter the tests above rely on: an HTTP/1.0 server (no keep-alive) sees one per call."""
    with FakeOpenAI(reply=PLAY) as server:
        store, final = _sweep(tmp_path, (server.base,))
    assert final.status == "finished", final.note
    assert server.connections >= server.completed >= 150


def test_a_sweep_at_concurrency_16_opens_at_most_one_connection_per_call_in_flight(tmp_path):
    """Two models on one server, 8 calls in flight each: its pool holds at most 16 connections, opened
    once for many times as many calls (and the server's description on its own)."""
    settings = {"explore_episodes": 4, "eval_every": 2, "eval_episodes": 2}
    with FakeOpenAI(reply=PLAY, keep_alive=True, delay_s=0.01) as server:
        store, final = _sweep(tmp_path, (server.base,), concurrency=8,
                              models=("hosted_vllm/fake", "hosted_vllm/fake-2"), settings=settings)
    assert final.status == "finished", final.note
    calls = store.sweeps.sweep_usage(final.id)["calls"]
    assert server.completed == calls >= 600
    assert 1 <= server.connections <= 16 + 2, server.connections  # the pool, plus the two descriptions


def test_a_pool_holds_no_more_connections_to_each_server_than_its_bound(tmp_path):
    """More calls in flight than the bound, to two servers: the calls wait for a free connection;
    neither server sees more than the bound, and every call is answered by the server it was sent to."""
    async def go(servers) -> list:
        limits = CallLimits(concurrency=12, pool=ConnectionPool({s.base: 3 for s in servers}))
        calls = []
        for server in servers:
            settings = CallSettings(model="hosted_vllm/fake", api_base=server.base, max_retries=0,
                                    context_tokens=32_768)
            calls += [complete(settings, [{"role": "user", "content": f"move {i}"}]) for i in range(24)]
        try:
            with use_limits(limits):
                return await asyncio.gather(*calls)
        finally:
            await limits.pool.close()

    with FakeOpenAI(reply=PLAY, keep_alive=True, delay_s=0.02) as one, \
            FakeOpenAI(reply=PLAY, keep_alive=True, delay_s=0.02) as two:
        results = asyncio.run(go((one, two)))
    assert [r.reply for r in results] == [PLAY] * 48
    for server in (one, two):
        assert server.completed == 24 and server.connections <= 3 and server.peak <= 3, (
            server.connections, server.peak)
