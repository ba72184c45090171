"""How fast one sweep process drives an instant model: driver CPU per step, steps a second and TCP
connections opened (counted by the server), by concurrency.

A fake OpenAI-compatible server (tests/fake_openai.py, HTTP/1.1 keep-alive like vLLM) answers at
once from its own process, so what is timed is s3gym's own work per step: the prompt, the litellm
call, cost and token accounting, the stored step (prompt as sent, search index), leases, events.
Each row is a fresh server and store: a sweep of Trust runs (pathways none/history/summary, one
exploration episode, three evaluation episodes per checkpoint: 7 episodes of 10 steps a run), with
about c/12 model names of 3 runs each so that about c calls can be in flight.

    python benchmarks/driver_speed.py [--concurrency 1,16,96] [--replicas 1,2] [--profile out.prof]

CPU is this process's user+sys time (resource.getrusage), which the machine's other load
disturbs less than wall time; the 1-minute load average is printed beside each row.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import os
import resource
import subprocess
import sys
import tempfile
import time
import urllib.request
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


def litellm_alone(calls: int = 400, concurrency: int = 16, rounds: int = 3) -> dict[str, float]:
    """CPU ms per call of litellm.acompletion alone (no engine, no store) against the same kind of
    server: the floor under the driver's CPU per step while litellm makes the calls. Three ways, taken in
    turns (`rounds` each, the best kept): a served model litellm does not know, one entered in its model
    map with no price as the engine enters a served model (engine.llm.enter_unpriced), and one spread over
    two replicas by litellm's Router as the engine makes it (engine.llm.router_for; both api bases lead
    to the one server)."""
    from s3gym_tui.engine.llm import _litellm, enter_unpriced, router_for

    litellm = _litellm()
    server = ServerProcess()
    unknown, entered, routed = "hosted_vllm/floor-unknown", "hosted_vllm/floor-entered", "hosted_vllm/floor-routed"
    enter_unpriced(litellm, entered)
    router = router_for(litellm, routed, (server.base_url, server.base_url.replace("127.0.0.1", "localhost")))
    try:
        async def go(model: str) -> float:
            gate = asyncio.Semaphore(concurrency)
            messages = [{"role": "user", "content": "Your move? " * 200}]

            async def one() -> None:
                async with gate:
                    if model == routed:
                        await router.acompletion(model=model, messages=messages, max_tokens=200, num_retries=0)
                        return
                    await litellm.acompletion(model=model, api_base=server.base_url, messages=messages,
                                              max_tokens=200, num_retries=0)

            await one()  # first-call set-up
            cpu = _cpu_s()
            await asyncio.gather(*(one() for _ in range(calls)))
            return (_cpu_s() - cpu) * 1000 / calls

        best: dict[str, float] = {}
        for _ in range(rounds):
            for model in (unknown, entered, routed):
                best[model] = min(best.get(model, math.inf), asyncio.run(go(model)))
        return {"unknown to litellm": best[unknown], "entered with no price": best[entered],
                "through the Router (2 replicas, no price)": best[routed]}
    finally:
        server.close()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--concurrency", default="1,16,96",
                        help="calls in flight the sweep may have, one row each, e.g. 1,16,96 (the default)")
    parser.add_argument("--replicas", default="1", help="servers per model, e.g. 1,2 (2+: litellm's Router)")
    parser.add_argument("--profile", help="write a cProfile of the rows (driver process) to this file")
    args = parser.parse_args()
    from s3gym_tui.providers import configured_litellm

    configured_litellm()
    plan_cpu, plan_wall, plan_runs = plan_time()
    floor = litellm_alone()
    profiler = None
    if args.profile:
        import cProfile

        profiler = cProfile.Profile()
    rows = []
    with tempfile.TemporaryDirectory(prefix="driver-speed-") as tmp:
        for replicas in [int(x) for x in args.replicas.split(",")]:
            for concurrency in [int(x) for x in args.concurrency.split(",")]:
                if profiler is not None:
                    profiler.enable()
                rows.append(measure(concurrency, replicas, Path(tmp)))
                if profiler is not None:
                    profiler.disable()
    if profiler is not None:
        profiler.dump_stats(args.profile)
    print_table("driver speed against an instant OpenAI-compatible server (Trust sweep, keep-alive server)",
                ["concurrency", "replicas", "status", "steps", "calls", "peak in flight", "driver CPU ms/step",
                 "steps/s", "connections opened (all replicas)", "unpriced calls", "load (1 min)"],
                [[("—" if v is None else v) for v in row] for row in rows])
    print("litellm.acompletion alone (no engine, no store), 16 in flight, best of 3 in turns: " +
          ", ".join(f"{name} {ms:.2f} ms" for name, ms in floor.items()) + " CPU a call")
    print(f"plan of a {plan_runs}-run sweep: {plan_cpu:.2f} s CPU, {plan_wall:.2f} s wall (first in the process: "
          f"the tokenizer's load included)")


if __name__ == "__main__":
    main()
