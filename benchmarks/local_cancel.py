"""How fast a given-up call frees the embedded model: cancelled and timed-out calls stop between tokens.

For each trial a long free-text generation starts through litellm; once it has produced a few
tokens it is cancelled (as asyncio.wait_for does on a timeout), and we time how long the model's
lock stays held afterwards and how many more evaluations ran, next to one token's time. The same
is done the old way (the generation ignores the cancel and runs to its token cap, which is what a
retry had to wait behind), and for a real timed-out call through the engine's `complete` followed
by a short call: the time that call waits.

    python benchmarks/local_cancel.py [--trials 5] [--tokens 200]
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

MODEL = "local/smollm2-135m"
CHAT = [{"role": "user", "content": "Tell a very long story about a dragon who learns to count."}]


async def trial(litellm, handler, tokens: int, stop_between_tokens: bool) -> tuple[float, int, float]:
    """(ms the lock stays held after the cancel, evaluations after the cancel, ms per token)."""
    stamps: list[float] = []
    generating = threading.Event()

    def on_eval(n: int, stopping: bool) -> None:
        stamps.append(time.perf_counter())
        if n >= 6:
            generating.set()

    handler.on_eval = on_eval
    original = handler.generate
    if not stop_between_tokens:  # the old behaviour: the thread never hears of the cancel
        handler.generate = lambda messages, plan, model, cancel=None, deadline=None: original(messages, plan, model)
    try:
        task = asyncio.ensure_future(litellm.acompletion(model=MODEL, messages=CHAT, max_tokens=tokens))
        await asyncio.to_thread(generating.wait)
        cancelled_at = time.perf_counter()
        n_before = len(stamps)
        task.cancel()
        try:
            await task
        except asyncio.CancelledError:
            pass
        await asyncio.to_thread(handler.lock.acquire)
        freed_at = time.perf_counter()
        handler.lock.release()
    finally:
        handler.on_eval = None
        handler.generate = original
    per_token = statistics.median(b - a for a, b in zip(stamps[1:n_before], stamps[2:n_before]))
    return (freed_at - cancelled_at) * 1000, len(stamps) - n_before, per_token * 1000


async def timed_out_then_next(handler, timeout_s: float) -> tuple[float, str]:
    """A call through the engine that times out, then a short call: (ms the short call waited for
    the model, the first call's fault)."""
    from s3gym_tui.engine.llm import CallSettings, complete

    settings = CallSettings(model=MODEL, max_tokens=400, timeout_s=timeout_s, max_retries=0)
    first = asyncio.ensure_future(asyncio.wait_for(complete(settings, CHAT), timeout_s))
    try:
        await first
        fault = "none (finished in time)"
    except (asyncio.TimeoutError, Exception) as exc:  # noqa: BLE001 - whatever the engine raises
        fault = type(exc).__name__
    asked = time.perf_counter()
    waited: list[float] = []
    handler.on_eval = lambda n, stop: waited.append(time.perf_counter()) if not waited else None
    try:
        await complete(CallSettings(model=MODEL, max_tokens=4, max_retries=0), [{"role": "user", "content": "Hi"}])
    finally:
        handler.on_eval = None
    return (waited[0] - asked) * 1000 if waited else float("nan"), fault


async def main_async(args) -> None:
    import litellm

    from s3gym_tui import providers
    from s3gym_tui.providers import local

    litellm.suppress_debug_info = True
    providers.register()
    handler = local.HANDLER
    await litellm.acompletion(model=MODEL, messages=[{"role": "user", "content": "Hi"}], max_tokens=2)  # load
    rows = []
    for stop in (True, False):
        results = [await trial(litellm, handler, args.tokens, stop) for _ in range(args.trials)]
        held = [r[0] for r in results]
        extra = [r[1] for r in results]
        token = statistics.median(r[2] for r in results)
        rows.append(["stop between tokens" if stop else "old: runs to its cap", f"{token:.1f}",
                     f"{statistics.median(held):.1f}", f"{max(held):.1f}",
                     f"{statistics.median(held) / token:.2f}", f"{max(extra)}"])
    print_table(f"cancelled call ({args.tokens}-token cap), {args.trials} trials",
                ["generation", "ms/token", "lock held after cancel, median ms", "max ms",
                 "median in tokens", "evaluations after cancel (max)"], rows)
    waits = [await timed_out_then_next(handler, args.timeout) for _ in range(args.trials)]
    print_table(f"a call timing out after {args.timeout}s through the engine, then a short call",
                ["trial", "first call", "short call waited for the model, ms"],
                [[i + 1, fault, f"{ms:.1f}"] for i, (ms, fault) in enumerate(waits)])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--tokens", type=int, default=200, help="token cap of the cancelled generation")
    parser.add_argument("--timeout", type=float, default=0.5, help="seconds before the engine call times out")
    args = parser.parse_args()
    asyncio.run(main_async(args))


if __name__ == "__main__":
    main()
