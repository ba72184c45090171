"""Prompt caching of a History run against a fake OpenAI-compatible server that caches prompts the way
OpenAI does (every prompt, the longest prefix seen before, at least 1,024 tokens, in steps of 128)
or Anthropic does (only up to the blocks the request marks with cache_control).

Prints, per provider style: how much of each prompt repeats the previous prompt of its episode
(characters of the common prefix, from the stored prompts, and where the first difference falls),
the share of input tokens the provider reported as read from its cache (as stored per step and
shown by the report), what the input cost with and without the cache, and the plan's expectation.

    python benchmarks/prompt_cache.py [--episodes 30] [--game trust]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

from s3gym_tui.engine.estimate import estimate_run  # noqa: E402
from s3gym_tui.engine.llm import _litellm  # noqa: E402
from s3gym_tui.engine.report import run_report  # noqa: E402
from s3gym_tui.engine.runner import ProtocolRunner  # noqa: E402
from s3gym_tui.models import RunConfig  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402
from tests.fake_openai import FakeOpenAI  # noqa: E402

PLAY = "I will cooperate.\nAnswer: collaborate, Score: 2"  # a valid Trust move
STYLES = {"openai": "openai/gpt-4o-mini", "anthropic": "anthropic/claude-haiku-4-5"}


def _text(prompt_json: str) -> str:
    return "".join(str(m.get("content", "")) for m in json.loads(prompt_json))


def _common(a: str, b: str) -> int:
    return len(os.path.commonprefix([a, b]))


def _where(before: str, after: str, at: int) -> str:
    """Where the first difference of two consecutive prompts falls: right where `before` had its
    step prompt (everything before it repeated: the new turn goes there), or in an earlier section."""
    if at >= before.rfind("Game rules:") - 2:
        return "at the last step prompt"
    marks = [("step prompt", after.rfind("Game rules:")), ("current episode", after.find("Current episode so far:")),
             ("Hint Messages", after.find("Hint Messages:"))]
    for name, start in marks:
        if 0 <= start <= at:
            return name
    return "system"


def run_style(style: str, episodes: int, game: str) -> list:
    model = STYLES[style]
    config = RunConfig(model=model, game=game, pathway="history", explore_episodes=episodes, eval_every=3,
                       eval_episodes=3, api_base=None)
    planned = estimate_run(config)
    with FakeOpenAI(reply=PLAY, cache=style) as server, tempfile.TemporaryDirectory() as tmp:
        base = server.base_url if style == "openai" else server.base_url.removesuffix("/v1")
        store = Store(Path(tmp) / "bench.db")
        run = store.runs.create_run(config.model_copy(update={"api_base": base}))
        started = time.perf_counter()
        final = asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        wall = time.perf_counter() - started
        shares, first_diff = [], {}
        steps = []
        for episode in store.episodes.list(run.id):
            stored = store.episodes.steps(episode.id, include_prompt=False)
            steps += stored
            texts = [_text(store.prompts.step_prompt(episode.id, s.index)) for s in stored]
            for before, after in zip(texts, texts[1:]):
                common = _common(before, after)
                shares.append(common / len(after))
                where = _where(before, after, common)
                first_diff[where] = first_diff.get(where, 0) + 1
        report = run_report(store, final)
        store.close()
    info = _litellm().get_model_info(model)
    tokens_in = sum(s.tokens_in for s in steps)
    cached = sum(s.tokens_cached or 0 for s in steps)
    written = sum(s.tokens_cache_write or 0 for s in steps)
    no_cache = tokens_in * info["input_cost_per_token"]
    with_cache = ((tokens_in - cached - written) * info["input_cost_per_token"]
                  + cached * info["cache_read_input_token_cost"]
                  + written * (info.get("cache_creation_input_token_cost") or info["input_cost_per_token"]))
    where = ", ".join(f"{k} {v}" for k, v in sorted(first_diff.items(), key=lambda kv: -kv[1]))
    return [style, model, final.status, len(steps), f"{tokens_in:,}", f"{statistics.mean(shares):.1%}", where,
            f"{report.usage.cache_share:.1%}", f"{written:,}", f"${no_cache:.4f}", f"${with_cache:.4f}",
            f"{planned.input_tokens_cached / planned.input_tokens:.0%}", wall]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", type=int, default=30, help="exploration episodes of the History run")
    parser.add_argument("--game", default="trust")
    parser.add_argument("--styles", default="openai,anthropic")
    args = parser.parse_args()
    os.environ.setdefault("OPENAI_API_KEY", "sk-bench-0000000000000000")
    os.environ.setdefault("ANTHROPIC_API_KEY", "sk-ant-bench-0000000000000000")
    rows = [run_style(style, args.episodes, args.game) for style in args.styles.split(",")]
    print_table(f"History run on {args.game}: {args.episodes} exploration episodes, 3 eval episodes every 3, "
                f"against a fake server that caches prompts",
                ["cache style", "model", "status", "calls", "input tokens", "prefix repeated (mean)",
                 "first difference in", "cached share (reported)", "cache writes", "input $ no cache",
                 "input $ with cache", "plan expects", "wall s"], rows)
    print("prefix repeated: characters of a prompt equal to the previous prompt of its episode, from its start; "
          "cached share: input tokens the server reported as read from its cache / all input tokens (steps)")


if __name__ == "__main__":
    main()
