"""The embedded model's step time within one episode: the first step reads the whole prompt, later steps
only what llama.cpp cannot reuse from the KV state of the previous call (the common prefix).

Two episodes through the real path (EpisodeSession -> litellm -> the local provider):
- chess (no history): the brief's case. Every chess observation is seven 15x15 boards (~3,800 tokens)
  and the protocol puts the current observation after the episode's earlier turns, so each step
  brings ~4,400 new tokens whatever is reused; the window (8,192) is full from step 1 on.
- History on snake (or --game): Hint Messages as large as the embedded model's history budget allows,
  so the window fills after a few steps and the cut of old text starts to move (in blocks).

Per step: prompt tokens, tokens reused from the KV state (the usage's cached_tokens), tokens
evaluated, call seconds; then first step / median of the later steps. `--simulate-steps N` also
counts, without generating, the tokens evaluated per step of a longer History episode with the cut
moving in blocks (today) and per step (before).

    python benchmarks/local_prefix.py [--chess-steps 5] [--history-steps 12] [--game snake] [--simulate-steps 40]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._util import print_table  # noqa: E402

import s3gym_games as games  # noqa: E402
from s3gym_tui.engine.experience import ExperienceState, HistoryWindow, effective_budget  # noqa: E402
from s3gym_tui.engine.llm import CallSettings  # noqa: E402
from s3gym_games.prompt import TurnRecord, build_messages, render_episode_block  # noqa: E402
from s3gym_tui.engine.session import EpisodeSession  # noqa: E402
from s3gym_tui.models import Episode, RunConfig  # noqa: E402
from s3gym_tui.providers import local  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402

MODEL = "local/smollm2-135m"
EPISODE_STEPS = 16  # steps of each previous episode in the hint (a whole 64-step one exceeds the budget)


def history_hint(game: str, budget: int) -> HistoryWindow:
    """Reference-policy exploration episodes of `game` (their first EPISODE_STEPS steps), serialised as
    History ICL does, newest kept within `budget` tokens of the embedded model."""
    blocks: list[str] = []
    for seed in range(40):
        env = games.make(game, "explore")
        env.reset(seed)
        policy = games.reference_policy(game)
        turns, feedback = [], ""
        while not env.done and len(turns) < EPISODE_STEPS:
            observation = env.observation()
            move = policy.act(env.view())
            result = env.step(move.action)
            turns.append(TurnRecord(observation, move.action, 1.0 if result.reward > 0 else 0.0, feedback))
            feedback = result.feedback
        blocks.append(render_episode_block(f"Previous episode {seed + 1} (seed {seed}, {len(turns)} steps)", turns))
    kept: list[str] = []
    total = 0
    for block in reversed(blocks):
        tokens = local.count_tokens(block)
        if total + tokens > budget:
            break
        kept.insert(0, block)
        total += tokens
    return HistoryWindow("\n\n".join(kept), tuple(f"e{i}" for i in range(len(kept))), len(blocks) - len(kept), total)


def episode_steps(store: Store, game: str, steps: int, experience: ExperienceState, max_tokens: int,
                  seed: int) -> list[list]:
    run = store.runs.create_run(RunConfig(
        model=MODEL, game=game, pathway=experience.pathway, explore_episodes=1, max_tokens=max_tokens))
    episode = Episode(id=f"{run.id}-x000", run_id=run.id, game=game, mode="explore", phase="explore", seed=seed,
                      index=0, model=MODEL, pathway=experience.pathway)
    settings = CallSettings(model=MODEL, max_tokens=max_tokens, seed=0, timeout_s=3600, max_retries=0)
    session = EpisodeSession(store, episode, settings, experience, step_cap=steps)
    rows = []

    async def play() -> None:
        while not session.done:
            proposal = await session.propose()
            call = proposal.call
            step = session.commit(proposal)
            cached = call.tokens_cached or 0
            rows.append([step.index, call.tokens_in, cached, call.tokens_in - cached, call.latency_ms / 1000,
                         step.action[:24]])

    asyncio.run(play())
    return rows


def simulate_cut(game: str, steps: int, hint: HistoryWindow) -> list[list]:
    """Without generating: the prompt tokens llama.cpp would evaluate at each step of a History episode
    (the fitted prompt minus its common prefix with the previous one), with the cut moving in blocks
    (today) and by exactly what each step needs (before: one block = one token)."""
    handler = local.HANDLER
    env = games.make(game, "explore")
    env.reset(1000)
    policy = games.reference_policy(game)
    turns: list[TurnRecord] = []
    previous = {"blocks": None, "per step": None}
    totals = {"blocks": [], "per step": []}
    feedback = ""
    for _ in range(steps):
        if env.done:
            break
        messages = build_messages(env, hint.text, turns, feedback)
        for name, blocks in (("blocks", local.CUT_BLOCKS), ("per step", handler.n_ctx)):
            with handler.lock:
                llm = handler._load()
                saved = local.CUT_BLOCKS
                local.CUT_BLOCKS = blocks
                try:
                    fitted, _ = handler._fit(llm, [dict(m) for m in messages], 48)
                finally:
                    local.CUT_BLOCKS = saved
                tokens = [t for m in fitted for t in handler._tokenize(llm, m["content"])]
            before = previous[name]
            common = 0
            if before is not None:
                while common < min(len(before), len(tokens)) and before[common] == tokens[common]:
                    common += 1
            totals[name].append((len(tokens), len(tokens) - common))
            previous[name] = tokens
        observation = env.observation()
        move = policy.act(env.view())
        result = env.step(move.action)
        turns.append(TurnRecord(observation, move.action, 1.0, feedback))
        feedback = result.feedback
    rows = []
    for name in ("per step", "blocks"):
        evaluated = [e for _, e in totals[name][1:]]
        full = sum(1 for n, e in totals[name][1:] if e > n // 2)
        rows.append([name, len(totals[name]), statistics.mean(evaluated), statistics.median(evaluated), full])
    return rows


def summary(name: str, rows: list[list]) -> list:
    first = rows[0][4]
    later = [r[4] for r in rows[1:]]
    median = statistics.median(later) if later else float("nan")
    return [name, len(rows), first, median, first / median if later else float("nan"),
            statistics.mean(r[3] for r in rows[1:]) if later else float("nan")]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--chess-steps", type=int, default=5)
    parser.add_argument("--history-steps", type=int, default=12)
    parser.add_argument("--game", default="snake", help="the History episode's game")
    parser.add_argument("--simulate-steps", type=int, default=0,
                        help="also count (without generating) the tokens evaluated per step of a History "
                             "episode this long, cut in blocks and cut per step")
    args = parser.parse_args()
    results = []
    with tempfile.TemporaryDirectory() as tmp:
        store = Store(Path(tmp) / "bench.db")
        header = ["step", "prompt tokens", "reused (KV)", "evaluated", "call s", "action"]
        if args.chess_steps:
            rows = episode_steps(store, "chess", args.chess_steps, ExperienceState(0, "none"), 224, 0)
            print_table("chess, no history (window 8,192)", header, rows)
            results.append(summary("chess", rows))
        if args.simulate_steps:
            budget = effective_budget(MODEL, 100_000, 48)
            rows = simulate_cut(args.game, args.simulate_steps, history_hint(args.game, budget))
            print_table(f"{args.game}, History ICL, {args.simulate_steps} steps: prompt tokens llama.cpp evaluates "
                        f"per step after the first (no generation)",
                        ["cut moves", "steps", "evaluated (mean)", "evaluated (median)",
                         "steps re-reading over half the prompt"], rows)
        if args.history_steps:
            budget = effective_budget(MODEL, 100_000, 48)
            hint = history_hint(args.game, budget)
            experience = ExperienceState(len(hint.episode_ids), "history", history=hint)
            rows = episode_steps(store, args.game, args.history_steps, experience, 48, 1000)
            print_table(f"{args.game}, History ICL: {len(hint.episode_ids)} previous episodes, {hint.tokens:,} tokens "
                        f"(the budget for this model: {budget:,})", header, rows)
            results.append(summary(f"{args.game} History", rows))
        store.close()
    if results:
        print_table("first step vs later steps of one episode (goal: later >= 5x faster)",
                    ["episode", "steps", "first s", "later s (median)", "first / later", "later evaluated (mean)"],
                    results)


if __name__ == "__main__":
    main()
