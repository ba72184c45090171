"""Several api bases of one model: litellm's Router spreads the calls over them (two fake
OpenAI-compatible servers on 127.0.0.1) and keeps going when one of them is down."""

from __future__ import annotations

import asyncio
import socket

from s3gym_tui.cli import main
from s3gym_tui.engine.llm import CallSettings, complete
from s3gym_tui.store import Store

from tests.fake_openai import FakeOpenAI

MESSAGES = [{"role": "user", "content": "Your move. Answer: <ACTION>, Score: <S>"}]
PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"  # a valid Trust move


def _closed_port_base() -> str:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"http://127.0.0.1:{port}/v1"  # nothing listens there any more


def test_calls_are_spread_over_both_replicas():
    with FakeOpenAI(reply=PLAY) as a, FakeOpenAI(reply=PLAY) as b:
        settings = CallSettings("hosted_vllm/replicated", api_bases=(a.base, b.base), max_retries=0,
                                timeout_s=10)

        async def many() -> list:
            return await asyncio.gather(*(complete(settings, MESSAGES) for _ in range(40)))

        results = asyncio.run(many())
    assert all("Answer: collaborate" in r.reply for r in results)
    assert a.completed + b.completed == 40
    assert a.completed >= 5 and b.completed >= 5  # both replicas served (simple shuffle, 40 calls)
    sent = {r["body"]["model"] for r in a.requests + b.requests}
    assert sent == {"replicated"}  # the provider prefix is litellm's, not sent


def test_a_replica_that_is_down_does_not_stop_the_calls():
    with FakeOpenAI(reply=PLAY) as up:
        settings = CallSettings("hosted_vllm/replicated-2", api_bases=(_closed_port_base(), up.base),
                                max_retries=4, backoff_base_s=0, timeout_s=10)

        async def many() -> list:
            return [await complete(settings, MESSAGES) for _ in range(12)]

        results = asyncio.run(many())
    assert len(results) == 12 and up.completed == 12  # every call answered by the live replica


def test_a_run_over_two_replicas_from_the_cli(tmp_path, capsys):
    with FakeOpenAI(reply=PLAY) as a, FakeOpenAI(reply=PLAY) as b:
        db = tmp_path / "r.db"
        code = main(["run", "trust", "-m", "hosted_vllm/fake", "--api-base", a.base, "--api-base", b.base,
                     "--episodes", "2", "--eval-every", "2", "--eval-episodes", "1", "--db", str(db)])
        out = capsys.readouterr()
        assert code == 0, out.err
        assert a.completed > 0 and b.completed > 0
        with Store(db) as store:
            [run] = store.runs.list_runs()
            assert run.status == "finished" and run.config.api_bases == (a.base, b.base)
            steps = sum(e.n_steps for e in store.episodes.list(run.id))
            assert steps == a.completed + b.completed == 40
