"""The engine's own cost per step: prompt assembly over a full history window, reply parsing and one
stored step, with an instant model. Prints medians at several stored-history sizes.

    python benchmarks/engine_overhead.py [--episodes 5,15,30]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table, stats_ms  # noqa: E402

from s3gym_tui.engine.llm import CallResult, CallSettings  # noqa: E402
from s3gym_games.reply import parse_reply  # noqa: E402
from s3gym_tui.engine.runner import ProtocolRunner, explore_episode_id  # noqa: E402
from s3gym_tui.engine.session import EpisodeSession, Proposal  # noqa: E402
from s3gym_tui.engine import tokens  # noqa: E402
from s3gym_tui.models import Episode, RunConfig  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402

GAME = "snake"


def measure(n_previous: int, workdir: Path) -> list:
    store = Store(workdir / f"overhead-{n_previous}.db")
    config = RunConfig(model=f"scripted/{GAME}", game=GAME, pathway="history", explore_episodes=n_previous,
                       eval_every=max(1, n_previous), eval_episodes=0, history_budget=100_000)
    run = store.runs.create_run(config)
    runner = ProtocolRunner(store, run, backoff_base_s=0)
    asyncio.run(runner.run_protocol())
    tokens._CACHE.clear()
    t0 = time.perf_counter()
    state = asyncio.run(runner.experience_state(n_previous))
    first_state = time.perf_counter() - t0
    t0 = time.perf_counter()
    asyncio.run(runner.experience_state(n_previous))
    cached_state = time.perf_counter() - t0
    episode = Episode(id=f"bench-{n_previous}", run_id=None, game=GAME, mode="explore", phase="explore",
                      seed=500_000, index=0, model=config.model, pathway="history")
    session = EpisodeSession(store, episode, CallSettings(model=config.model), state)
    from s3gym_games import reference_policy

    policy = reference_policy(GAME)
    assemble, parse, commit, total = [], [], [], []
    while not session.done:
        move = policy.act(session.game.view())
        reply = f"Plan.\nAnswer: {move.action}, Score: {move.expected_reward:g}"
        t0 = time.perf_counter()
        messages = session.messages()
        t1 = time.perf_counter()
        parsed = parse_reply(reply)
        t2 = time.perf_counter()
        session.commit(Proposal(messages, CallResult(reply), parsed))
        t3 = time.perf_counter()
        assemble.append(t1 - t0)
        parse.append(t2 - t1)
        commit.append(t3 - t2)
        total.append(t3 - t0)
    history_tokens = state.history.tokens if state.history else 0
    med, p95 = stats_ms(total)
    return [n_previous, history_tokens, len(total), first_state * 1000, cached_state * 1000,
            stats_ms(assemble)[0], stats_ms(parse)[0], stats_ms(commit)[0], med, p95]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--episodes", default="5,15,30,60")
    args = parser.parse_args()
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for n in [int(x) for x in args.episodes.split(",")]:
            rows.append(measure(n, Path(tmp)))
    print_table("engine overhead per step (instant model; history pathway, 100k-token budget)",
                ["previous episodes", "history tokens", "steps", "window first ms", "window cached ms",
                 "assemble ms", "parse ms", "store ms", "step median ms", "step p95 ms"], rows)
    print("Token counts are cached per episode block (keyed by a digest of its text), so a finished\n"
          "episode is counted once; the window itself is rebuilt once per episode, not per step.")


if __name__ == "__main__":
    main()
