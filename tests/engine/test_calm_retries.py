"""Calm retries: full-jitter backoff (calls that failed together come back spread out), staggered
wake-up after a pause, and a replica that dies mid-run recorded on the step and counted in the
report. Statistical where randomness is the point; no clock is read (sleep and the clock patched)."""

from __future__ import annotations

import asyncio
import json
import random
import statistics

from s3gym_tui.cli import main
from s3gym_tui.engine import limits as limits_module
from s3gym_tui.engine import llm
from s3gym_tui.engine.limits import ModelGate
from s3gym_tui.engine.llm import CallSettings, backoff_delay, complete
from s3gym_tui.store import Store

from tests.fake_openai import FakeOpenAI

PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"


def test_full_jitter_spreads_delays_over_the_whole_window():
    rng = random.Random(7)
    draws = [backoff_delay(3, 0.5, 30.0, rng) for _ in range(2000)]
    assert all(0.0 <= d <= 4.0 for d in draws)  # 0 .. base * 2**3
    assert len({round(d, 6) for d in draws}) > 1900  # not a handful of fixed values
    assert 1.8 < statistics.mean(draws) < 2.2 and statistics.pstdev(draws) > 1.0  # uniform: mean 2, sd 1.15
    assert sum(d < 1.0 for d in draws) > 350 and sum(d > 3.0 for d in draws) > 350  # both ends are used
    capped = [backoff_delay(20, 0.5, 30.0, rng) for _ in range(500)]
    assert max(capped) <= 30.0 and max(capped) > 25.0


def test_calls_that_fail_together_do_not_retry_together(recorded_waits):
    """Forty calls hit a server error at the same moment: their retries are spread, not one burst."""
    settings = CallSettings("fault/trust", backoff_base_s=1.0, max_retries=1)

    async def many():
        return await asyncio.gather(*(complete(settings, [{"role": "user", "content": "go"}], {
            "task": "act", "game": "trust", "mode": "explore", "seed": i, "actions": [],
            "faults": ["server_error"], "transient_attempts": 1}) for i in range(40)))

    results = asyncio.run(many())
    waits = [d for d in recorded_waits if d > 0]
    assert all(r.faults == ("server_error",) for r in results) and len(waits) >= 35
    assert all(d <= 1.0 for d in waits)
    assert len({round(d, 6) for d in waits}) == len(waits)  # no two calls come back at the same moment
    assert max(waits) - min(waits) > 0.5 and statistics.pstdev(waits) > 0.15


def test_calls_waiting_on_a_paused_model_wake_at_spread_times(monkeypatch):
    clock = {"now": 1000.0}
    woke: list[float] = []

    async def scenario():
        gate = ModelGate(limit=64)
        gate.pause(4.0)

        async def waiter():
            await gate.wait_ready()

        real_sleep = limits_module.asyncio.sleep

        async def sleep_and_advance(delay, *args):
            wake = clock["now"] + delay
            woke.append(wake)
            await real_sleep(0)  # every waiter goes to sleep before the clock moves
            clock["now"] = max(clock["now"], wake)

        monkeypatch.setattr(limits_module.asyncio, "sleep", sleep_and_advance)
        monkeypatch.setattr(limits_module.time, "monotonic", lambda: clock["now"])
        gate.paused_until = clock["now"] + 4.0
        await asyncio.gather(*(waiter() for _ in range(50)))
        return gate

    asyncio.run(scenario())
    assert len(woke) == 50
    assert all(1004.0 <= t <= 1008.0 for t in woke)  # after the pause, within one pause-length more
    assert max(woke) - min(woke) > 2.0 and len({round(t, 6) for t in woke}) == 50  # spread, not one burst


def test_a_replica_that_dies_mid_run_is_recorded_on_its_steps_and_counted(tmp_path, capsys):
    with FakeOpenAI(reply=PLAY) as a, FakeOpenAI(reply=PLAY) as b:
        a.behave(die=True)  # a's first request: the connection drops and a is gone for good
        db = tmp_path / "f.db"
        code = main(["run", "trust", "-m", "hosted_vllm/fake", "--api-base", a.base, "--api-base", b.base,
                     "--episodes", "2", "--eval-every", "2", "--eval-episodes", "1", "--db", str(db)])
        out = capsys.readouterr()
        assert code == 0, out.err
        a_host, b_host = a.base.split("/")[2], b.base.split("/")[2]
    with Store(db) as store:
        [run] = store.runs.list_runs()
        faults = [s.fault for e in store.episodes.list(run.id) for s in store.episodes.steps(e.id) if s.fault]
        steps = sum(e.n_steps for e in store.episodes.list(run.id))
    assert run.status == "finished" and steps == b.completed  # every step answered by the live replica
    assert faults and all(f"(replica {a_host})" in f and f"failover to {b_host}" in f for f in faults)
    assert any(f"connection (replica {a_host})" in f for f in faults)  # the kind: nothing listens there
    code = main(["report", run.id, "--json", "--db", str(db)])
    [row] = json.loads(capsys.readouterr().out)["tables"]["runs"]["rows"]
    assert row["replica_failures"] >= len(faults) and row["failovers"] == len(faults)
    assert "replica faults" in out.out and "failovers" in out.out  # the run's own tables show them


def test_without_replicas_the_replica_figures_are_undefined(tmp_path, capsys):
    db = str(tmp_path / "s.db")
    assert main(["run", "trust", "-m", "scripted/trust", "--episodes", "1", "--eval-every", "1",
                 "--eval-episodes", "0", "--db", db]) == 0
    capsys.readouterr()
    main(["report", "--json", "--db", db])
    [row] = json.loads(capsys.readouterr().out)["tables"]["runs"]["rows"]
    assert row["replica_failures"] is None and row["failovers"] is None and row["decoding"] == "free"


def test_a_rate_limit_from_every_replica_pauses_the_model(monkeypatch):
    """The fault names the replica, and the rate limit still pauses every call of the model."""
    from s3gym_tui.engine.limits import CallLimits, use_limits

    real_sleep = asyncio.sleep

    async def no_wait(delay, *args):
        await real_sleep(0)

    monkeypatch.setattr(llm.asyncio, "sleep", no_wait)
    with FakeOpenAI(reply=PLAY) as a, FakeOpenAI(reply=PLAY) as b:
        for fake in (a, b):
            fake.behave(status=429, headers={"Retry-After": "0.05"}, times=1)
        settings = CallSettings("hosted_vllm/limited", api_bases=(a.base, b.base), max_retries=3, timeout_s=10)

        async def one():
            with use_limits(CallLimits()) as limits:
                result = await complete(settings, [{"role": "user", "content": "go"}])
                return result, limits.gate("hosted_vllm/limited")

        result, gate = asyncio.run(one())
    assert "Answer: collaborate" in result.reply
    assert any(f.startswith("rate_limit") for f in result.faults) and gate.pauses >= 1
    named = [f for f in result.faults if "(replica" in f]
    assert len(named) == len(set(named)) == 2  # each replica's refusal once, by name
