"""How fast the glass-box learner answers, in process: calls per second per game and pathway, measured on
the prompts of a real protocol (History of 6 previous episodes, or the summary written from them), called
directly and through litellm's custom-provider path (what a run does), per second of this process's CPU time.
Target: at least 1,000 calls a second.

    python benchmarks/learner_speed.py [--seconds 2] [--episodes 6]
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

import s3gym_games as games  # noqa: E402
from s3gym_games.reply import parse_reply  # noqa: E402
from s3gym_games.prompt import (TurnRecord, build_messages, build_summary_messages,  # noqa: E402
                                      parse_summary, render_episode_block)
from s3gym_tui.providers.learner import reply  # noqa: E402


def episode_prompts(game: str, mode: str, seed: int, hint: str | None) -> tuple[list[list[dict]], list[TurnRecord]]:
    """Every prompt of one episode the learner plays with `hint`, and the episode's turns."""
    env = games.make(game, mode)
    env.reset(seed)
    turns: list[TurnRecord] = []
    prompts, feedback, before = [], "", ""
    while not env.done:
        messages = build_messages(env, hint, turns, feedback)
        prompts.append(messages)
        parsed = parse_reply(reply(game, messages))
        observation = env.observation()
        result = env.step(parsed.action or "END")
        turns.append(TurnRecord(observation, parsed.action or "END", parsed.self_score, before))
        before = feedback = result.feedback
    return prompts, turns


def workload(game: str, episodes: int) -> dict[str, list[list[dict]]]:
    blocks = []
    for x in range(episodes):
        _, turns = episode_prompts(game, "explore", x, "\n\n".join(blocks) or None)
        blocks.append(render_episode_block(f"Previous episode {x + 1} (seed {x}, {len(turns)} steps)", turns))
    history = "\n\n".join(blocks)
    summary_ask = build_summary_messages(games.make(game, "explore"), None, history)
    retain, avoid, nxt = parse_summary(reply(game, summary_ask))
    summary = (f"Strategies to retain:\n{retain}\n\nMistakes to avoid:\n{avoid}\n\n"
               f"Directions for the next episode:\n{nxt}")
    return {"none": episode_prompts(game, "eval", 1_000_000, None)[0],
            "history": episode_prompts(game, "eval", 1_000_000, history)[0],
            "summary": episode_prompts(game, "eval", 1_000_000, summary)[0],
            "summarise": [summary_ask]}


def rate(call, prompts: list, seconds: float) -> tuple[float, int]:
    """Calls per second of this process's CPU time (what a loaded machine's other work does not change)."""
    n, start = 0, time.process_time()
    while time.process_time() - start < seconds:
        call(prompts[n % len(prompts)])
        n += 1
    return n / (time.process_time() - start), n


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--episodes", type=int, default=6)
    parser.add_argument("--games", default="all")
    args = parser.parse_args()
    from s3gym_tui.providers import configured_litellm

    litellm = configured_litellm()
    names = games.names() if args.games == "all" else args.games.split(",")
    rows = []
    for game in names:
        load = workload(game, args.episodes)
        for pathway, prompts in load.items():
            direct, n = rate(lambda m, g=game: reply(g, m), prompts, args.seconds)
            routed, _ = rate(lambda m, g=game: litellm.completion(model=f"learner/{g}", messages=m), prompts,
                             args.seconds)
            chars = sum(len(p[-1]["content"]) for p in prompts) // len(prompts)
            rows.append([game, pathway, len(prompts), f"{chars:,}", f"{direct:,.0f}", f"{1000 / direct:.3f}",
                         f"{routed:,.0f}", n])
    print_table("learner calls per second, in process (target >= 1,000 direct)",
                ["game", "prompts of", "distinct prompts", "chars a prompt", "direct calls/s", "ms a call",
                 "through litellm calls/s", "calls"], rows)


if __name__ == "__main__":
    main()
