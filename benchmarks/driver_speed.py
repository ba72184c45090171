"""How fast one sweep process drives an instant model: driver CPU per step, steps a second and TCP
connections opened (counted by the server), by concurrency.

A fake OpenAI-compatible server (tests/fake_openai.py, HTTP/1.1 keep-alive like vLLM) answers at
once from its own process, so what is timed is s3gym's own work per step: the prompt, the litellm
call, cost and token accounting, the stored step (prompt as sent, search index), leases, events.
Each row is a fresh server and store: a sweep of Trust runs (pathways none/history/summary, one
exploration episode, three evaluation episodes per checkpoint: 7 episodes of 10 steps a run), with
about c/12 model names of 3 runs each so that about c calls can be in flight.

    python benchmarks/driver_speed.py [--concurrency 1,16,96] [--replicas 1,2] [--profile out.prof] [--phases]

CPU is this process's user+sys time (resource.getrusage), which the machine's other load
disturbs less than wall time; the 1-minute load average is printed beside each row.

Beside the rows, where a step's CPU goes: litellm's call alone against the same server (the floor while
litellm makes the calls: no engine, no store), with and without the thread hop `acompletion` makes for
its set-up, and s3gym's own share, the same sweep with `litellm.acompletion` answered in-process by a
canned response (engine, store, leases, events, search index: everything but litellm and HTTP), each
in turns, medians. `--phases` breaks litellm's call down by its internal phases (cProfile).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import math
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import Future, ThreadPoolExecutor
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"
ROOT = Path(__file__).resolve().parent.parent


def _cpu_s() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


class ServerProcess:
    """tests/fake_openai.py in a child process, kept alive between requests; its counters by HTTP."""

    def __init__(self) -> None:
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "tests.fake_openai", "--keep-alive", "--usage-auto", "--reply", PLAY],
            cwd=ROOT, stdout=subprocess.PIPE, text=True)
        self.base_url = self.proc.stdout.readline().strip()
        if not self.base_url.startswith("http"):
            raise SystemExit("the fake server did not start")

    def stats(self) -> dict:
        """The server's counters (this request's own connection is taken off the count)."""
        with urllib.request.urlopen(self.base_url.rsplit("/v1", 1)[0] + "/_fake/stats", timeout=10) as answer:
            stats = json.loads(answer.read())
        stats["connections"] -= 1
        return stats

    def close(self) -> None:
        self.proc.terminate()
        self.proc.wait(timeout=10)


def sweep_config(concurrency: int, base_urls: tuple[str, ...]):
    from s3gym_tui.models import SweepConfig

    n_models = max(1, math.ceil(concurrency / 12))
    models = tuple(f"hosted_vllm/bench-{i}" for i in range(n_models))
    return SweepConfig(games=("trust",), pathways=("none", "history", "summary"), models=models,
                       settings={"explore_episodes": 1, "eval_every": 1, "eval_episodes": 3,
                                 "context_tokens": 32_768},
                       api_bases={m: base_urls for m in models},
                       concurrency=max(1, math.ceil(concurrency / n_models)), runs_per_model=3)


def warm_up(base_url: str) -> None:
    """One call before timing: litellm's lazy imports and first-call set-up are not per step."""
    from s3gym_tui.engine.llm import CallSettings, complete

    asyncio.run(complete(CallSettings(model="hosted_vllm/warm", api_base=base_url, context_tokens=32_768),
                         [{"role": "user", "content": "hello"}]))


def _total(servers: list[ServerProcess]) -> dict:
    counts = [server.stats() for server in servers]
    return {key: sum(c[key] for c in counts) for key in ("connections", "completed")} | {
        "peak": max(c["peak"] for c in counts)}


def measure(concurrency: int, replicas: int, workdir: Path) -> list:
    from s3gym_tui.engine.sweep import SweepRunner
    from s3gym_tui.store import Store

    servers = [ServerProcess() for _ in range(replicas)]
    try:
        for server in servers:
            warm_up(server.base_url)
        before = _total(servers)
        store = Store(workdir / f"driver-{concurrency}-{replicas}.db")
        sweep, _ = store.sweeps.create_sweep(sweep_config(concurrency, tuple(s.base_url for s in servers)))
        cpu, wall = _cpu_s(), time.perf_counter()
        final = asyncio.run(SweepRunner(store, sweep, backoff_base_s=0).run())
        cpu, wall = _cpu_s() - cpu, time.perf_counter() - wall
        after = _total(servers)
        with store._reading("count the steps") as conn:  # noqa: SLF001 - a benchmark's look inside
            steps = conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        usage = store.sweeps.sweep_usage(sweep.id)
        store.close()
    finally:
        for server in servers:
            server.close()
    calls = after["completed"] - before["completed"]
    return [concurrency, replicas, final.status, steps, calls, after["peak"],
            cpu * 1000 / steps if steps else None, steps / wall if wall else None,
            after["connections"] - before["connections"], int(usage["unpriced"]), os.getloadavg()[0]]


def plan_time() -> tuple[float, float, int]:
    """(CPU s, wall s, runs) of planning the issue's 21-run sweep (7 served model names x Trust x
    none/history/summary, 6 exploration episodes, 3 evaluation episodes every 3), tokenizer included."""
    from s3gym_tui.engine.sweep_plan import plan
    from s3gym_tui.models import SweepConfig

    models = tuple(f"hosted_vllm/plan-{i}" for i in range(7))
    config = SweepConfig(games=("trust",), pathways=("none", "history", "summary"), models=models,
                         settings={"explore_episodes": 6, "eval_every": 3, "eval_episodes": 3},
                         api_bases={m: ("http://127.0.0.1:9/v1",) for m in models})
    cpu, wall = _cpu_s(), time.perf_counter()
    planned = plan(config.run_configs())
    return _cpu_s() - cpu, time.perf_counter() - wall, len(planned.runs)


class SetupInline(ThreadPoolExecutor):
    """A loop's default executor that runs litellm's `completion()` set-up (what `acompletion` hands to
    `loop.run_in_executor` on every call) on the loop's own thread, and everything else (getaddrinfo,
    `asyncio.to_thread`) in its threads as usual: the thread hop measured apart. A benchmark's tool."""

    def submit(self, fn, /, *args, **kwargs):
        if _is_completion_setup(fn):
            done: Future = Future()
            try:
                done.set_result(fn(*args, **kwargs))
            except BaseException as exc:  # noqa: BLE001 - handed to the awaiting call as the executor would
                done.set_exception(exc)
            return done
        return super().submit(fn, *args, **kwargs)


def _is_completion_setup(fn) -> bool:
    """`partial(context.run, partial(litellm.main.completion, ...))`, as litellm 1.110.2's acompletion makes it."""
    import litellm.main

    inner = fn.args[0] if isinstance(fn, functools.partial) and fn.args else None
    return isinstance(inner, functools.partial) and inner.func is litellm.main.completion


def _call_cpu(litellm, server: ServerProcess, model: str, concurrency: int, calls: int, *, engine_like: bool = True,
              inline: bool = False, router=None, profiler=None, bare: bool = False) -> float:
    """CPU ms a call of `calls` litellm.acompletion calls, `concurrency` in flight, in a fresh event loop.
    `engine_like`: the call as the engine makes it for a served model (its provider named, the sweep's
    bounded pool, its timeout and temperature); `inline`: SetupInline as the loop's default executor;
    `bare`: no litellm, the same request posted through the pool with aiohttp and its answer parsed."""
    from s3gym_tui.engine.pools import _session

    async def go() -> float:
        if inline:
            asyncio.get_running_loop().set_default_executor(SetupInline())
        gate = asyncio.Semaphore(concurrency)
        messages = [{"role": "user", "content": "Your move? " * 200}]
        pool = _session(concurrency, concurrency) if engine_like and router is None else None
        extra = ({"custom_llm_provider": model.partition("/")[0], "shared_session": pool, "timeout": 120.0,
                  "temperature": 0.0} if pool is not None else {})

        async def one() -> None:
            async with gate:
                if bare:
                    body = {"model": model.partition("/")[2], "messages": messages, "max_tokens": 200,
                            "temperature": 0.0}
                    async with pool.post(server.base_url + "/chat/completions", json=body) as answer:
                        data = json.loads(await answer.read())
                    if not data["choices"][0]["message"]["content"]:
                        raise SystemExit("the fake server sent no reply")
                    return
                if router is not None:
                    await router.acompletion(model=model, messages=messages, max_tokens=200, num_retries=0)
                    return
                await litellm.acompletion(model=model, api_base=server.base_url, messages=messages,
                                          max_tokens=200, num_retries=0, **extra)

        try:
            await one()  # first-call set-up
            if profiler is not None:
                profiler.enable()
            cpu = _cpu_s()
            await asyncio.gather(*(one() for _ in range(calls)))
            cpu = _cpu_s() - cpu
            if profiler is not None:
                profiler.disable()
            return cpu * 1000 / calls
        finally:
            if pool is not None:
                await pool.close()

    return asyncio.run(go())


def litellm_alone(calls: int = 300, rounds: int = 5) -> dict[str, float]:
    """CPU ms per call of litellm.acompletion alone (no engine, no store) against the same kind of
    server: the floor under the driver's CPU per step while litellm makes the calls. Each way `rounds`
    times in turns, the median kept: a served model litellm does not know and one entered in its model
    map with no price (engine.llm.enter_unpriced), both called bare, 16 in flight (the figures of earlier
    runs); the entered one called as the engine calls it (its provider named, the sweep's pool), 16 and
    1 in flight (a sweep against an instant server has 1-2 in flight: its driver is the bottleneck), and
    both with its set-up on the loop's thread (SetupInline: no executor hop); one spread over two
    replicas by litellm's Router as the engine makes it (engine.llm.router_for; both api bases lead to
    the one server); and, for reference, the same request without litellm (aiohttp and json.loads)."""
    from s3gym_tui.engine.llm import _litellm, enter_unpriced, router_for

    litellm = _litellm()
    server = ServerProcess()
    unknown, entered, routed = "hosted_vllm/floor-unknown", "hosted_vllm/floor-entered", "hosted_vllm/floor-routed"
    enter_unpriced(litellm, entered)
    router = router_for(litellm, routed, (server.base_url, server.base_url.replace("127.0.0.1", "localhost")))
    ways = {
        "unknown to litellm, bare, 16 in flight": dict(model=unknown, concurrency=16, engine_like=False),
        "entered with no price, bare, 16 in flight": dict(model=entered, concurrency=16, engine_like=False),
        "entered, as the engine calls it, 16 in flight": dict(model=entered, concurrency=16),
        "entered, as the engine calls it, 1 in flight": dict(model=entered, concurrency=1),
        "entered, as the engine calls it, 1 in flight, set-up on the loop's thread (no executor hop)":
            dict(model=entered, concurrency=1, inline=True),
        "entered, as the engine calls it, 16 in flight, set-up on the loop's thread (no executor hop)":
            dict(model=entered, concurrency=16, inline=True),
        "through the Router (2 replicas, no price), 16 in flight": dict(model=routed, concurrency=16, router=router),
        "no litellm: an aiohttp POST through the same pool and json.loads, 1 in flight (HTTP's own cost)":
            dict(model=entered, concurrency=1, bare=True),
    }
    try:
        taken: dict[str, list[float]] = {name: [] for name in ways}
        for _ in range(rounds):
            for name, way in ways.items():
                taken[name].append(_call_cpu(litellm, server, calls=calls, **way))
        return {name: statistics.median(values) for name, values in taken.items()}
    finally:
        server.close()


def _canned_response(litellm):
    response = litellm.ModelResponse(
        model="canned",
        choices=[{"index": 0, "finish_reason": "stop", "message": {"role": "assistant", "content": PLAY}}],
        usage={"prompt_tokens": 700, "completion_tokens": 12, "total_tokens": 712})
    response._hidden_params["response_cost"] = None  # noqa: SLF001 - as litellm stamps an unpriced call
    return response


def own_share(concurrency: int, workdir: Path, rounds: int = 3) -> float:
    """CPU ms per step (median of `rounds`) of the same sweep with `litellm.acompletion` answered in this
    process by a canned reply: no litellm, no HTTP, everything else a step does (prompt, engine, store,
    leases, events, search index): s3gym's own share of a step."""
    from s3gym_tui.engine.llm import _litellm
    from s3gym_tui.engine.sweep import SweepRunner
    from s3gym_tui.store import Store

    litellm = _litellm()
    canned = _canned_response(litellm)

    async def answer(**_kwargs):
        await asyncio.sleep(0)  # a call yields to the loop once, as a real one does (more than once)
        return canned

    real, litellm.acompletion = litellm.acompletion, answer
    per_step = []
    try:
        for i in range(rounds):
            store = Store(workdir / f"own-{concurrency}-{i}.db")
            sweep, _ = store.sweeps.create_sweep(sweep_config(concurrency, ("http://127.0.0.1:9/v1",)))
            cpu = _cpu_s()
            final = asyncio.run(SweepRunner(store, sweep, backoff_base_s=0).run())
            cpu = _cpu_s() - cpu
            with store._reading("count the steps") as conn:  # noqa: SLF001 - a benchmark's look inside
                steps = conn.execute("SELECT count(*) FROM steps").fetchone()[0]
            store.close()
            if final.status != "finished" or not steps:
                raise SystemExit(f"the in-process sweep ended {final.status} with {steps} steps")
            per_step.append(cpu * 1000 / steps)
    finally:
        litellm.acompletion = real
    return statistics.median(per_step)


# litellm 1.110.2's phases of one call: (what, the file and function whose cumulative time it is);
# indented rows are parts of the row above them
PHASES = (
    ("call set-up and the Logging object (function_setup)", "litellm/utils.py", "function_setup"),
    ("completion(): the request built (acompletion runs it in the executor)", "litellm/main.py", "completion"),
    ("  its optional parameters", "litellm/main.py", "optional_params_for_model_info"),
    ("  its Responses-API bridge checks", "litellm/responses/bridge_check.py", "responses_api_bridge_check"),
    ("  the provider's request (hosted_vllm)", "litellm/main.py", "_complete_hosted_vllm"),
    ("HTTP: httpx over litellm's aiohttp transport, send and read", "litellm/llms/custom_httpx/http_handler.py",
     "post"),
    ("the reply into a ModelResponse", "litellm/llms/openai/chat/gpt_transformation.py", "transform_response"),
    ("pricing the response (cost, zero-cost diagnostic)",
     "litellm/litellm_core_utils/llm_response_utils/response_metadata.py", "update_response_metadata"),
    ("success logging, no callback registered (payload, cost again)",
     "litellm/litellm_core_utils/litellm_logging.py", "async_success_handler"),
)


def phases(calls: int = 400) -> tuple[list[list], float]:
    """(rows of litellm's phases with their share of a call, Python calls a call): one cProfile of
    `calls` calls 1 in flight as the engine makes them, the set-up on the loop's thread (SetupInline) so
    that the profile sees it, timed in CPU time. cProfile's own cost per Python call weighs Python-heavy
    phases above C-heavy ones (sockets, JSON): shares, not milliseconds."""
    import cProfile
    import pstats

    from s3gym_tui.engine.llm import _litellm, enter_unpriced

    litellm = _litellm()
    model = "hosted_vllm/phases"
    enter_unpriced(litellm, model)
    server = ServerProcess()
    profiler = cProfile.Profile(time.thread_time)  # CPU time: the machine's load and the waits do not count
    try:
        _call_cpu(litellm, server, model, 1, calls, inline=True, profiler=profiler)
    finally:
        server.close()
    stats = pstats.Stats(profiler)
    total = stats.total_tt
    rows, top = [], 0.0
    for what, path, name in PHASES:
        cum = sum(v[3] for (file, _line, func), v in stats.stats.items()  # type: ignore[attr-defined]
                  if func == name and file.replace(os.sep, "/").endswith(path))
        if not what.startswith(" "):
            top += cum
        rows.append([what, f"{100 * cum / total:.0f}%"])
    rows.append(["the rest: acompletion's wrappers, the event loop, aiohttp's reading",
                 f"{100 * (total - top) / total:.0f}%"])
    return rows, stats.total_calls / calls  # type: ignore[attr-defined]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", default="1,16,96",
                        help="calls in flight the sweep may have, one row each, e.g. 1,16,96 (the default)")
    parser.add_argument("--replicas", default="1", help="servers per model, e.g. 1,2 (2+: litellm's Router)")
    parser.add_argument("--profile", help="write a cProfile of the rows (driver process) to this file")
    parser.add_argument("--rounds", type=int, default=5, help="rounds in turns of litellm's call alone (median kept)")
    parser.add_argument("--phases", action="store_true", help="also break litellm's call down by its phases (cProfile)")
    args = parser.parse_args()
    from s3gym_tui.providers import configured_litellm

    configured_litellm()
    plan_cpu, plan_wall, plan_runs = plan_time()
    floor = litellm_alone(rounds=args.rounds)
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    rows = []
    concurrencies = [int(x) for x in args.concurrency.split(",")]
    with tempfile.TemporaryDirectory(prefix="driver-speed-") as tmp:
        for replicas in [int(x) for x in args.replicas.split(",")]:
            for concurrency in concurrencies:
                if profiler is not None:
                    profiler.enable()
                rows.append(measure(concurrency, replicas, Path(tmp)))
                if profiler is not None:
                    profiler.disable()
        own = {c: own_share(c, Path(tmp)) for c in concurrencies}
    if profiler is not None:
        profiler.dump_stats(args.profile)
    print_table("driver speed against an instant OpenAI-compatible server (Trust sweep, keep-alive server)",
                ["concurrency", "replicas", "status", "steps", "calls", "peak in flight", "driver CPU ms/step",
                 "steps/s", "connections opened (all replicas)", "unpriced calls", "load (1 min)"],
                [[("—" if v is None else v) for v in row] for row in rows])
    print(f"litellm.acompletion alone (no engine, no store), CPU ms a call, median of {args.rounds} in turns:")
    for name, ms in floor.items():
        print(f"  {name}: {ms:.2f}")
    print("s3gym's own share, CPU ms a step (the same sweep, litellm.acompletion answered in-process, median of 3): "
          + ", ".join(f"concurrency {c} {ms:.2f}" for c, ms in own.items()))
    print(f"plan of a {plan_runs}-run sweep: {plan_cpu:.2f} s CPU, {plan_wall:.2f} s wall (first in the process: "
          f"the tokenizer's load included)")
    if args.phases:
        table, python_calls = phases()
        print_table(f"litellm's call by phase (cProfile, 1 in flight, as the engine calls it; {python_calls:,.0f} "
                    "Python calls a call)", ["phase", "share of the call"], table)


if __name__ == "__main__":
    main()
