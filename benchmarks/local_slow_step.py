"""The embedded model's chess step when a call takes longer than its timeout: wall time, the retries
it made (the step's faults) and the prompt tokens llama.cpp read for it, all attempts together.

Chess fills the embedded model's 8,192-token window from its second step on; on a loaded 2-core
machine reading that prompt takes minutes, longer than the default 120 s timeout. Before issue 36 the
timeout counted the whole call, so a call still reading its prompt was timed out and retried; now it
counts silence (no prompt chunk read, no token written for the timeout), and a retry reuses the
prompt already read (llama.cpp's KV cache).

Run it niced on a shared machine; `--timeout` below the step's prompt time shows what a slower
machine meets at 120 s (the load is printed). `--code DIR` times another copy of s3gym (e.g. an
older commit exported with `git archive`), for a before/after:

    nice -n 10 python benchmarks/local_slow_step.py [--steps 3] [--timeout 120] [--retries 2] [--code DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import tempfile
import time
from pathlib import Path


def _code_path() -> str:
    for i, arg in enumerate(sys.argv):
        if arg == "--code" and i + 1 < len(sys.argv):
            return str(Path(sys.argv[i + 1]).resolve())
        if arg.startswith("--code="):
            return str(Path(arg.split("=", 1)[1]).resolve())
    return str(Path(__file__).resolve().parent.parent)


os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")  # as the provider sets it: llama_cpp is imported here first
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

sys.path.insert(0, _code_path())  # the s3gym timed (this tree unless --code)

MODEL = "local/smollm2-135m"


class EvalCount:
    """Tokens llama.cpp evaluates (every prompt chunk and written token) and generations started,
    counted at the class so that every attempt of a call is seen, whichever code drives it."""

    def __init__(self) -> None:
        import llama_cpp

        self.tokens = 0
        self.generations = 0
        original_eval, original_chat = llama_cpp.Llama.eval, llama_cpp.Llama.create_chat_completion
        count = self

        def eval_(llm, tokens):
            count.tokens += len(tokens)
            return original_eval(llm, tokens)

        def chat(llm, *args, **kwargs):
            count.generations += 1
            return original_chat(llm, *args, **kwargs)

        llama_cpp.Llama.eval = eval_
        llama_cpp.Llama.create_chat_completion = chat

    def take(self) -> tuple[int, int]:
        out = (self.tokens, self.generations)
        self.tokens = self.generations = 0
        return out


def play(steps: int, timeout_s: float, retries: int) -> list[list]:
    from s3gym_tui.engine.experience import ExperienceState
    from s3gym_tui.engine.llm import CallSettings, ModelUnavailable
    from s3gym_tui.engine.session import EpisodeSession
    from s3gym_tui.models import Episode, RunConfig
    from s3gym_tui.store import Store

    counter = EvalCount()
    rows: list[list] = []
    with tempfile.TemporaryDirectory(prefix="servers-slow-step-") as tmp:
        store = Store(Path(tmp) / "bench.db")
        run = store.runs.create_run(RunConfig(model=MODEL, game="chess", explore_episodes=1))
        episode = Episode(id=f"{run.id}-x000", run_id=run.id, game="chess", mode="explore", phase="explore",
                          seed=0, index=0, model=MODEL, pathway="none")
        settings = CallSettings(model=MODEL, timeout_s=timeout_s, max_retries=retries, seed=0)
        session = EpisodeSession(store, episode, settings, ExperienceState(0, "none"), step_cap=steps)

        async def drive() -> None:
            while not session.done:
                started = time.perf_counter()
                try:
                    proposal = await session.propose()
                except ModelUnavailable as exc:
                    evaluated, generations = counter.take()
                    rows.append([len(rows), time.perf_counter() - started, "—", "—", evaluated, generations,
                                 f"FAILED: {str(exc)[:70]}"])
                    return
                wall = time.perf_counter() - started
                call = proposal.call
                step = session.commit(proposal)
                evaluated, generations = counter.take()
                rows.append([step.index, wall, call.tokens_in, call.tokens_cached if call.tokens_cached is not None
                             else "—", evaluated, generations, "; ".join(call.faults) or "none"])

        asyncio.run(drive())
        store.close()
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--timeout", type=float, default=120.0, help="the call's timeout (s)")
    parser.add_argument("--retries", type=int, default=2, help="retries of a failed call (Play's: 2)")
    parser.add_argument("--code", default=None, help="the s3gym tree to time (default: this one)")
    args = parser.parse_args()
    import s3gym_tui

    load_before = os.getloadavg()
    started = time.perf_counter()
    rows = play(args.steps, args.timeout, args.retries)
    total = time.perf_counter() - started
    load_after = os.getloadavg()
    print(f"code: {Path(s3gym_tui.__file__).resolve().parent.parent}")
    print(f"machine: {os.cpu_count()} cores; load average (1, 5, 15 min) before {load_before[0]:.2f} "
          f"{load_before[1]:.2f} {load_before[2]:.2f}, after {load_after[0]:.2f} {load_after[1]:.2f} "
          f"{load_after[2]:.2f}")
    print_table(f"chess with {MODEL}: timeout {args.timeout:g} s, {args.retries} retries; {total:,.1f} s in all",
                ["step", "wall s", "prompt tokens", "reused (KV)", "tokens evaluated (all attempts)",
                 "generations", "faults (retries)"], rows)


if __name__ == "__main__":
    main()
