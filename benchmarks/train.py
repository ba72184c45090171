"""Training pathway speed: examples/s of LoRA training on CPU, and tokens/s of the served trained model
(transformers + peft, `trained/<id>/<epoch>`) vs the same base through llama.cpp (`local/smollm2-135m`).

All through the real code paths: a dataset from a scripted Trust run, `train_lora` on the default base
(SmolLM2-135M converted from the embedded GGUF, cached), and `litellm.acompletion` for generation on
the dataset's own step prompts. Generation is measured twice: plain chat (no s3gym context: free
text, max_tokens each) and an action call as the evaluation makes it (contract enforced).

    LITELLM_LOCAL_MODEL_COST_MAP=True .venv/bin/python benchmarks/train.py [--examples 16] [--prompts 4]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from rich.console import Console  # noqa: E402
from rich.table import Table  # noqa: E402

from s3gym_tui.engine.runner import ProtocolRunner  # noqa: E402
from s3gym_tui.models import RunConfig  # noqa: E402
from s3gym_tui.providers import make_context  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402
from s3gym_tui.training.dataset import build_dataset, training_examples  # noqa: E402


def dataset(folder: Path, examples: int) -> list[dict]:
    store = Store(folder / "bench.db")
    run = store.create_run(RunConfig(model="scripted/trust", game="trust", pathway="none",
                                     explore_episodes=max(1, (examples + 9) // 10), eval_every=1, eval_episodes=0))
    asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    build = asyncio.run(build_dataset(store, run.id, max_examples=examples))
    out = training_examples(store, build.dataset.id)
    store.close()
    return out


def train(examples: list[dict], folder: Path, epochs: int, batch: int, accum: int) -> dict:
    from transformers import AutoTokenizer

    from s3gym_tui.training.backend import TrainConfig, resolve_base, train_lora

    started = time.perf_counter()
    base = resolve_base(None)
    prepare_s = time.perf_counter() - started
    marks: dict[str, float] = {}

    def progress(event) -> None:
        marks.setdefault(event.kind, time.perf_counter())
        if event.kind == "done":
            marks["done"] = time.perf_counter()

    result = train_lora(examples, base, folder / "adapters", TrainConfig(epochs=epochs, batch_size=batch,
                                                                          grad_accum=accum), progress)
    seconds = marks["done"] - marks["load"]
    tokenizer = AutoTokenizer.from_pretrained(base)
    tokens = sum(len(tokenizer.apply_chat_template(e["prompt"] + e["completion"], return_dict=False))
                 for e in examples) * epochs
    return {"base": base, "adapters": result.adapters, "seconds": seconds, "steps": result.steps,
            "examples_per_s": len(examples) * epochs / seconds, "tokens_per_s": tokens / seconds,
            "prepare_s": prepare_s, "loss": (result.losses[0][2], result.losses[-1][2])}


async def generate(model: str, prompts: list[list[dict]], max_tokens: int, act: bool) -> tuple[float, float, int]:
    """(completion tokens/s, mean seconds per call, tokens) over the prompts, after one warm-up call."""
    import litellm

    from s3gym_tui.training import serve

    serve.register()

    async def call(messages):
        extra = {"extra_body": {"s3gym": make_context("act", "trust", "explore", 0, [],
                                                      grammar='"collaborate" | "cheat"')}} if act else {}
        started = time.perf_counter()
        response = await litellm.acompletion(model=model, messages=messages, max_tokens=max_tokens, temperature=0,
                                             **extra)
        return response.usage.completion_tokens, time.perf_counter() - started

    await call(prompts[0])  # load and warm up
    results = [await call(p) for p in prompts]
    tokens = sum(n for n, _ in results)
    seconds = sum(s for _, s in results)
    return tokens / seconds, statistics.mean(s for _, s in results), tokens


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=16)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--batch-size", type=int, default=2)
    parser.add_argument("--grad-accum", type=int, default=2)
    parser.add_argument("--prompts", type=int, default=4)
    parser.add_argument("--max-tokens", type=int, default=48)
    args = parser.parse_args()
    console = Console(width=None if sys.stdout.isatty() else 140)
    console.print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        examples = dataset(folder, args.examples)
        trained = train(examples, folder, args.epochs, args.batch_size, args.grad_accum)
        from s3gym_tui.training import serve

        serve.HANDLER.add_training("bench", trained["base"], trained["adapters"])
        prompts = [e["prompt"] for e in examples[: args.prompts]]
        rows = []
        for label, model in (("trained (transformers+peft)", "trained/bench/1"),
                             ("base, epoch 0 (transformers)", "trained/bench/0"),
                             ("base (llama.cpp Q4_1)", "local/smollm2-135m")):
            for act in (False, True):
                rate, per_call, tokens = asyncio.run(generate(model, prompts, args.max_tokens, act))
                rows.append((label, model, "action (contract)" if act else "plain chat", rate, per_call, tokens))
    table = Table(title=f"training: {len(examples)} examples x {args.epochs} epoch(s), batch {args.batch_size} x "
                        f"accum {args.grad_accum}, CPU")
    for col in ("examples/s", "tokens/s", "steps", "seconds", "loss first -> last", "base ready s"):
        table.add_column(col, justify="right")
    table.add_row(f"{trained['examples_per_s']:.3f}", f"{trained['tokens_per_s']:.1f}", str(trained["steps"]),
                  f"{trained['seconds']:.1f}", f"{trained['loss'][0]:.3f} -> {trained['loss'][1]:.3f}",
                  f"{trained['prepare_s']:.1f}")
    console.print(table)
    gen = Table(title=f"generation on {len(prompts)} step prompts (max_tokens {args.max_tokens}, greedy)")
    for col in ("model", "string", "call", "completion tokens/s", "s per call", "tokens"):
        gen.add_column(col, justify="left" if col in ("model", "string", "call") else "right")
    for label, model, call, rate, per_call, tokens in rows:
        gen.add_row(label, model, call, f"{rate:.1f}", f"{per_call:.2f}", str(tokens))
    console.print(gen)
    console.print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
