"""A sweep reuses its connections: a handful per api base, however many calls (counted by the server)."""

from __future__ import annotations

import asyncio

from s3gym_tui.engine.sweep import SweepRunner
from s3gym_tui.models import SweepConfig
from s3gym_tui.store import Store
from tests.fake_openai import FakeOpenAI

PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"  # a valid Trust move
TINY = {"explore_episodes": 2, "eval_every": 2, "eval_episodes": 2}
CONCURRENCY = 3
HANDFUL = CONCURRENCY + 3  # one per call in flight, plus the server's description and a spare


def _sweep(tmp_path, bases: tuple[str, ...]):
    config = SweepConfig(games=("trust",), pathways=("none", "history", "summary"), models=("hosted_vllm/fake",),
                         settings=TINY, api_bases={"hosted_vllm/fake": bases}, concurrency=CONCURRENCY,
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
