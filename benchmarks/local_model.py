"""Tokens/s of the embedded model through litellm.acompletion vs raw llama-cpp-python (same process).

Both paths use the same loaded llama.cpp model, the same messages, grammar, max_tokens, temperature, seed
and repeat penalty; runs are interleaved so machine load hits both alike. Prints a table and the ratio
(litellm / raw; target >= 90%). Also times the scripted provider (handler alone and through litellm).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python benchmarks/local_model.py [--runs 5]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import litellm  # noqa: E402

import s3gym_games as games  # noqa: E402
from s3gym_tui import providers  # noqa: E402
from s3gym_tui.providers import local, make_context  # noqa: E402
from s3gym_tui.providers.scripted import ScriptedLLM  # noqa: E402

MODEL = "local/smollm2-135m"


def scenarios() -> list[dict]:
    env = games.make("trust")
    env.reset(0)
    act_messages = [{"role": "system", "content": env.rules()},
                    {"role": "user", "content": env.observation() + "\nEnd with: Answer: <ACTION>, Score: <SCORE>"}]
    summary_messages = [{"role": "system", "content": env.rules()},
                        {"role": "user", "content": "Hint Messages:\nEnv: Round: 1 of 10\n"
                         "LLM: Answer: collaborate, Score: 2\nEnv: Round: 2 of 10\nLLM: Answer: cheat, Score: -1\n"
                         "Write practical experience in three parts: strategies to retain, mistakes to avoid, "
                         "directions for the next episode."}]
    return [
        {"name": "summary (3 lines, ~250 tokens)", "messages": summary_messages, "max_tokens": 256,
         "ctx": make_context("summary", "trust", "explore", 0, [])},
        {"name": "act (trust, one line)", "messages": act_messages, "max_tokens": 64,
         "ctx": make_context("act", "trust", "explore", 0, [], grammar=env.action_grammar())},
    ]


def raw_call(scenario: dict) -> tuple[int, float]:
    """llama-cpp-python directly, with exactly the plan the provider would use."""
    handler = local.HANDLER
    plan = handler.request_plan(scenario["ctx"], {"max_tokens": scenario["max_tokens"], "temperature": 0.0,
                                                  "seed": 0})
    with handler.lock:
        llm = handler._load()
        started = time.perf_counter()
        result = llm.create_chat_completion(
            scenario["messages"], grammar=handler._llama_cpp.LlamaGrammar.from_string(plan["grammar"], verbose=False),
            max_tokens=plan["max_tokens"], temperature=plan["temperature"], seed=plan["seed"],
            repeat_penalty=plan["repeat_penalty"])
        elapsed = time.perf_counter() - started
    return result["usage"]["completion_tokens"], elapsed


async def litellm_call(scenario: dict) -> tuple[int, float]:
    started = time.perf_counter()
    response = await litellm.acompletion(model=MODEL, messages=scenario["messages"], max_tokens=scenario["max_tokens"],
                                         temperature=0.0, seed=0, extra_body={"s3gym": scenario["ctx"]})
    elapsed = time.perf_counter() - started
    return response.usage.completion_tokens, elapsed


def _row(name: str, samples: list[tuple[int, float]]) -> tuple[float, float]:
    tokens = sum(t for t, _ in samples)
    seconds = sum(s for _, s in samples)
    rate = tokens / seconds if seconds else 0.0
    median = statistics.median(t / s for t, s in samples if s)
    print(f"  {name:<22} {len(samples):>4} {tokens / len(samples):>10.1f} {seconds / len(samples):>9.3f} "
          f"{rate:>9.1f} {median:>10.1f}")
    return rate, median


async def scripted_timing(n: int = 200) -> tuple[float, float]:
    env = games.make("trust")
    env.reset(0)
    ctx = make_context("act", "trust", "explore", 0, ["collaborate"] * 5, grammar=env.action_grammar())
    messages = [{"role": "user", "content": env.observation()}]
    handler = ScriptedLLM()
    started = time.perf_counter()
    for _ in range(n):
        handler.completion("trust", messages, model_response=None, optional_params={"extra_body": {"s3gym": ctx}})
    alone = (time.perf_counter() - started) / n * 1000
    started = time.perf_counter()
    for _ in range(n):
        await litellm.acompletion(model="scripted/trust", messages=messages, extra_body={"s3gym": ctx})
    through = (time.perf_counter() - started) / n * 1000
    return alone, through


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7)
    args = parser.parse_args()
    litellm.suppress_debug_info = True
    providers.register()
    print(f"embedded model: {MODEL}, n_ctx={local.N_CTX}, n_threads={local.HANDLER.n_threads}/{local.HANDLER.n_threads_batch}, "
          f"load average {os.getloadavg()[0]:.2f}")
    ratios = []
    for scenario in scenarios():
        raw_call(scenario)  # warm-up both paths (model load, prompt cache, litellm's first-call setup)
        await litellm_call(scenario)
        raw, via = [], []
        for _ in range(args.runs):  # interleaved
            raw.append(raw_call(scenario))
            via.append(await litellm_call(scenario))
        print(f"\n{scenario['name']}")
        print(f"  {'path':<22} {'runs':>4} {'tokens/run':>10} {'s/run':>9} {'tokens/s':>9} {'median t/s':>10}")
        raw_rate, raw_median = _row("raw llama-cpp-python", raw)
        via_rate, via_median = _row("litellm.acompletion", via)
        ratio = via_rate / raw_rate if raw_rate else 0.0
        median_ratio = via_median / raw_median if raw_median else 0.0
        ratios.append((scenario["name"], ratio))
        print(f"  ratio litellm/raw: {ratio:.1%} (total tokens / total time), {median_ratio:.1%} (medians)")
    alone, through = await scripted_timing()
    print(f"\nscripted/trust: handler alone {alone:.3f} ms/call, through litellm.acompletion {through:.2f} ms/call")
    print("\nsummary: " + "; ".join(f"{name}: {ratio:.1%}" for name, ratio in ratios)
          + f" (target >= 90%), load average {os.getloadavg()[0]:.2f}")
    local.HANDLER.close()


if __name__ == "__main__":
    asyncio.run(main())
