"""Training speed and memory on CPU (or the GPU when present): examples/s, tokens/s and peak RSS for
SFT (the default settings of `s3gym train`), GRPO (self-judged reward), and both distillation phases
(phase 1: off-policy SFT on two games' data; phase 2: on-policy reverse KL with per-game teachers).

Each phase runs in its own process. Two memory figures per phase, each labelled: "phase peak" is the
figure a training stores (the resident high-water mark reset when the phase starts loading its models,
training/device.py; in a fresh process it is the phase's own), "process peak" the child's ru_maxrss at
its end, what it reached before the phase included (imports, the base's conversion): what the phase
needs as a process of its own.
All through the real code paths on the embedded SmolLM2-135M (converted once, cached); data
from scripted Trust and Snake runs. With --serve, also tokens/s of the served trained model.

    LITELLM_LOCAL_MODEL_COST_MAP=True nice -n 10 .venv/bin/python benchmarks/train.py [--examples 16]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

PHASES = ("sft", "grpo", "distill-off", "distill-on")


def _store(folder: Path):
    from s3gym_tui.store import Store

    return Store(folder / "bench.db")


def prepare(folder: Path, examples: int) -> dict:
    """Scripted exploration runs (trust, snake) and their datasets; returns ids."""
    from s3gym_tui.engine.runner import ProtocolRunner
    from s3gym_tui.models import RunConfig
    from s3gym_tui.training.dataset import build_dataset

    out = {}
    with _store(folder) as store:
        for game in ("trust", "snake"):
            run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway="none",
                                                  explore_episodes=max(1, (examples + 9) // 10), eval_every=1,
                                                  eval_episodes=0, step_cap=10))
            asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
            out[game] = {"run": run.id,
                         "dataset": asyncio.run(build_dataset(store, run.id, max_examples=examples)).dataset.id}
    return out


def _examples(folder: Path, dataset_ids: list[str]) -> list[dict]:
    from s3gym_tui.training.dataset import training_examples

    with _store(folder) as store:
        return [e for d in dataset_ids for e in training_examples(store, d)]


def child(phase: str, folder: Path, ids: dict, args) -> dict:
    """Run one phase in this process and return its figures."""
    from s3gym_tui.training.backend import resolve_base, train_lora
    from s3gym_tui.training.config import SftConfig
    from s3gym_tui.training.device import peak_rss_mb

    base = resolve_base(None)  # (converted once: the process peak below may include it)
    before_mb = peak_rss_mb()  # the process's peak before the phase: imports, the base's conversion
    started = time.perf_counter()
    if phase in ("sft", "distill-off"):
        games = ["trust"] if phase == "sft" else ["trust", "snake"]
        examples = _examples(folder, [ids[g]["dataset"] for g in games])
        config = SftConfig(epochs=1) if phase == "sft" else SftConfig(epochs=1, max_steps=args.steps)
        result = train_lora(examples, base, folder / phase, config)
    elif phase == "grpo":
        from s3gym_tui.training.grpo import train_grpo
        from s3gym_tui.training.config import GrpoConfig

        result = train_grpo("trust", [0, 1], base, folder / phase,
                            GrpoConfig(reward="self", updates=args.steps, num_generations=args.generations,
                                       states_per_update=1, save_every=args.steps, max_completion_length=24,
                                       rollout_step_cap=3, warm_start=0))
    else:
        from s3gym_games.prompt import SYSTEM_PROMPT
        from s3gym_games.trl_env import GameEnvironment
        from s3gym_tui.training.onpolicy import train_onpolicy

        env = GameEnvironment()
        rows = [{"prompt": [{"role": "system", "content": SYSTEM_PROMPT},
                            {"role": "user", "content": env.reset(game=g, seed=s)}], "game": g}
                for g in ("trust", "snake") for s in range(2)]
        teachers = {"trust": folder / "sft" / "checkpoint-1", "snake": folder / "grpo" / f"checkpoint-1"}
        result, _ = train_onpolicy(rows, base, teachers, folder / phase, updates=args.steps, batch=2,
                                   learning_rate=1e-4, max_completion_length=24, temperature=1.0,
                                   save_every=args.steps)
    return {"phase": phase, "examples": result.examples, "tokens": result.tokens, "steps": result.steps,
            "seconds": result.seconds, "examples_per_s": result.examples_per_s, "tokens_per_s": result.tokens_per_s,
            "phase_peak_rss_mb": result.peak_rss_mb, "phase_peak_scope": result.peak_rss_scope,
            "process_peak_rss_mb": max(before_mb, peak_rss_mb()),
            "peak_gpu_mb": result.peak_gpu_mb,
            "wall_s": time.perf_counter() - started,
            "loss": [result.losses[0].loss, result.losses[-1].loss] if result.losses else None}


def serve_figures(folder: Path, ids: dict, prompts: int) -> list[tuple]:
    """Completion tokens/s of the served SFT checkpoint vs the base through transformers and llama.cpp."""
    import litellm

    from s3gym_tui.providers import make_context
    from s3gym_tui.training import serve
    from s3gym_tui.training.backend import resolve_base

    serve.HANDLER.add_training("bench", resolve_base(None), {1: folder / "sft" / "checkpoint-1"})
    serve.register()
    messages = [e["prompt"] for e in _examples(folder, [ids["trust"]["dataset"]])[:prompts]]
    rows = []
    for label, model in (("trained (transformers+peft)", "trained/bench/1"), ("base (llama.cpp Q4_1)",
                                                                              "local/smollm2-135m")):
        async def call(m):
            started = time.perf_counter()
            response = await litellm.acompletion(model=model, messages=m, max_tokens=48, temperature=0,
                                                 extra_body={"s3gym": make_context(
                                                     "act", "trust", "explore", 0, [], grammar='"collaborate" | "cheat"')})
            return response.usage.completion_tokens, time.perf_counter() - started

        asyncio.run(call(messages[0]))
        results = [asyncio.run(call(m)) for m in messages]
        tokens, seconds = sum(n for n, _ in results), sum(s for _, s in results)
        rows.append((label, model, tokens / seconds, seconds / len(results)))
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--examples", type=int, default=16, help="SFT examples per game")
    parser.add_argument("--steps", type=int, default=2, help="optimizer steps of GRPO and the distillation phases")
    parser.add_argument("--generations", type=int, default=4, help="GRPO replies per state")
    parser.add_argument("--phases", default=",".join(PHASES))
    parser.add_argument("--serve", action="store_true", help="also measure the served trained model")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--folder", help=argparse.SUPPRESS)
    parser.add_argument("--ids", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print("RESULT " + json.dumps(child(args.child, Path(args.folder), json.loads(args.ids), args)))
        return
    from rich.console import Console
    from rich.table import Table

    console = Console(width=None if sys.stdout.isatty() else 160)
    console.print(f"load average before: {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        ids = prepare(folder, args.examples)
        for phase in args.phases.split(","):
            cmd = [sys.executable, __file__, "--child", phase, "--folder", str(folder), "--ids", json.dumps(ids),
                   "--steps", str(args.steps), "--generations", str(args.generations)]
            out = subprocess.run(cmd, capture_output=True, text=True)
            line = next((l for l in out.stdout.splitlines() if l.startswith("RESULT ")), None)
            if line is None:
                console.print(f"[red]{phase} failed[/]: {out.stderr[-800:]}")
                continue
            rows.append(json.loads(line[len("RESULT "):]))
            console.print(f"{phase}: done ({rows[-1]['wall_s']:.0f} s), load average {os.getloadavg()[0]:.1f}")
        served = serve_figures(folder, ids, 4) if args.serve and any(r["phase"] == "sft" for r in rows) else []
    table = Table(title=f"training throughput and memory ({args.examples} SFT examples per game; GRPO and "
                        f"distillation: {args.steps} updates; each phase in its own process)")
    for col in ("phase", "examples", "tokens", "updates", "train s", "examples/s", "tokens/s", "phase peak RSS MB",
                "process peak RSS MB", "loss first -> last"):
        table.add_column(col, justify="left" if col == "phase" else "right")
    for r in rows:
        loss = f"{r['loss'][0]:.3f} -> {r['loss'][1]:.3f}" if r["loss"] else "-"
        table.add_row(r["phase"], str(r["examples"]), str(r["tokens"]), str(r["steps"]), f"{r['seconds']:.1f}",
                      f"{r['examples_per_s'] or 0:.3f}", f"{r['tokens_per_s'] or 0:.1f}",
                      f"{r['phase_peak_rss_mb']:.0f}" + ("" if r["phase_peak_scope"] == "phase" else " (process)"),
                      f"{r['process_peak_rss_mb']:.0f}", loss)
    console.print(table)
    console.print("examples: SFT/phase 1 = examples seen; GRPO = sampled replies trained on; phase 2 = prompts. "
                  "tokens: prompt + completion tokens through the trainer")
    console.print("phase peak RSS: the resident high-water mark from the phase's start (loading its models) to "
                  "its end, what the process held before included (the figure a training stores); process peak "
                  "RSS: the same process's peak since it started (imports, the base's conversion). "
                  "'(process)': the mark could not be reset here, both are the process's peak")
    if served:
        gen = Table(title="generation on 4 step prompts (max_tokens 48, greedy, action calls)")
        for col in ("model", "string", "completion tokens/s", "s per call"):
            gen.add_column(col, justify="left" if col in ("model", "string") else "right")
        for label, model, rate, per_call in served:
            gen.add_row(label, model, f"{rate:.1f}", f"{per_call:.2f}")
        console.print(gen)
    console.print(f"load average after: {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
