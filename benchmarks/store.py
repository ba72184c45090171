"""Store benchmark: builds a large database, then times episode loads, step inserts and opening.

    python benchmarks/store.py                    # 100,000 episodes (about a minute)
    python benchmarks/store.py --episodes 5000    # quicker
    python benchmarks/store.py --path big.db --keep

Figures tracked: median time to load one 64-step episode (target < 20 ms), add_step throughput
(one transaction per step, as the runner writes them), DB size; plus open, list_runs and audit;
and, from a real scripted Tetris run (pathway none, 3 exploration + 1 evaluation episode per
checkpoint, 320 steps): bytes per stored step, full-text index included (target <= 3,072 B;
prompts are parts, mostly copies of an earlier prompt, see store/stored_prompt.py; pages of store.connection.PAGE_SIZE) and the time to read a prompt back (target < 1 ms).
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from s3gym_tui.models import EVAL_SEED_BASE, Episode, RunConfig, Step, utcnow  # noqa: E402
from s3gym_tui.store import Store, audit  # noqa: E402
from s3gym_tui.store import connection as store_module  # noqa: E402

GAMES = ("chess", "minesweeper", "nullify", "tetris", "snake", "pvz", "trust")
PATHWAYS = ("none", "history", "summary", "trained")
EPISODES_PER_RUN = 63  # 30 exploration + 11 checkpoints x 3 evaluation episodes
STEPS = 64


def _text(rng: random.Random, n: int) -> str:
    words = ("cell", "row", "piece", "score", "move", "left", "right", "drop", "safe", "mine",
             "cooperate", "defect", "zombie", "sun", "apple", "wall", "queen", "pawn", "0", "1")
    out, size = [], 0
    while size < n:
        w = rng.choice(words)
        out.append(w)
        size += len(w) + 1
    return " ".join(out)


def _step_row(rng: random.Random, episode_id: str, index: int, prompt_bytes: int) -> dict:
    board = _text(rng, 400)
    prompt = json.dumps([{"role": "system", "content": _text(rng, prompt_bytes // 2)},
                         {"role": "user", "content": board + _text(rng, prompt_bytes // 2)}])
    self_score = None if rng.random() < 0.03 else float(rng.randint(-1, 3))
    return {"episode_id": episode_id, "index": index, "observation": board, "prompt": prompt,
            "reply": _text(rng, 500) + f"\nAnswer: move{index}, Score: {self_score}",
            "action": f"move{index}", "self_score": self_score,
            "reward": float(rng.randint(-1, 3)), "feedback": _text(rng, 80),
            "valid": rng.random() > 0.05, "terminated": index == STEPS - 1, "truncated": False,
            "actor": "model", "proposed_action": None, "fault": None,
            "tokens_in": prompt_bytes // 4, "tokens_out": 150, "latency_ms": 800.0 + index,
            "cost": 0.0004, "created_at": utcnow()}


def build(store: Store, n_episodes: int, n_with_steps: int, prompt_bytes: int,
          rng: random.Random) -> list[str]:
    """Bulk-load runs and episodes (insert_all in batches); steps for a sample of episodes."""
    db = store.db
    n_runs = max(1, n_episodes // EPISODES_PER_RUN)
    runs = []
    for r in range(n_runs):
        cfg = RunConfig(model="openai/gpt-4.1", game=GAMES[r % len(GAMES)],
                        pathway=PATHWAYS[r % len(PATHWAYS)])
        runs.append({"id": f"run-{r:06d}", "config": cfg.model_dump_json(), "game": cfg.game,
                     "model": cfg.model, "pathway": cfg.pathway, "status": "finished",
                     "created_at": f"2026-{1 + r % 12:02d}-01T00:00:{r % 60:02d}.000+00:00",
                     "note": ""})
    db["runs"].insert_all(runs, batch_size=2000)

    def episodes():
        for i in range(n_episodes):
            r, k = divmod(i, EPISODES_PER_RUN)
            run = runs[min(r, n_runs - 1)]
            explore = k < 30
            prev = [f"ep-{i - j:07d}" for j in range(1, min(k, 30) + 1)] if explore else []
            yield {"id": f"ep-{i:07d}", "run_id": run["id"], "game": run["game"],
                   "mode": "explore" if explore else "eval",
                   "phase": "explore" if explore else "eval",
                   "seed": k if explore else EVAL_SEED_BASE + (k - 30) % 3,
                   "index": k if explore else (k - 30) % 3,
                   "checkpoint": None if explore else 3 * ((k - 30) // 3),
                   "model": run["model"], "pathway": run["pathway"], "status": "finished",
                   "score": float(rng.randint(0, 40)), "n_steps": 0, "summary_id": None,
                   "history_episode_ids": json.dumps(prev[-8:]), "history_cut": max(0, len(prev) - 8),
                   "fork_of": None, "fork_step": None, "started_at": utcnow(),
                   "finished_at": utcnow()}

    db["episodes"].insert_all(episodes(), batch_size=5000)
    sampled = [f"ep-{i:07d}" for i in sorted(rng.sample(range(n_episodes),
                                                       min(n_with_steps, n_episodes)))]
    for start in range(0, len(sampled), 50):
        chunk = sampled[start:start + 50]
        db["steps"].insert_all((_step_row(rng, e, i, prompt_bytes) for e in chunk
                                for i in range(STEPS)), batch_size=1000)
    db.execute("UPDATE episodes SET n_steps = (SELECT count(*) FROM steps s "
               "WHERE s.episode_id = episodes.id) WHERE id IN (SELECT DISTINCT episode_id FROM steps)")
    return sampled


def scripted_run_figures(path: Path, game: str = "tetris", pathway: str = "none") -> list[tuple[str, str]]:
    """Run the protocol with the game's scripted player (3 exploration episodes, 1 evaluation
    episode at x = 0 and x = 3), then measure what it stored and how fast prompts read back."""
    import asyncio

    from s3gym_tui.engine.runner import ProtocolRunner

    with Store(path) as store:
        run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway=pathway,
                                              explore_episodes=3, eval_every=3, eval_episodes=1))
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        episodes = store.episodes.list(run.id)
        n = sum(e.n_steps for e in episodes)
        stored = store.conn.execute("SELECT sum(length(prompt)) FROM steps").fetchone()[0]
        full = sum(len(store.prompts.step_prompt(e.id, i)) for e in episodes for i in range(e.n_steps))
    size = path.stat().st_size
    cold_last, cold_any, sequential = [], [], []
    rng = random.Random(1)
    for _ in range(10):
        for e in episodes:
            for target, samples in ((e.n_steps - 1, cold_last), (rng.randrange(e.n_steps), cold_any)):
                with Store(path, check=False) as fresh:
                    t = time.perf_counter()
                    fresh.prompts.step_prompt(e.id, target)
                    samples.append(time.perf_counter() - t)
    with Store(path, check=False) as fresh:
        for e in episodes:
            for i in range(e.n_steps):
                t = time.perf_counter()
                fresh.prompts.step_prompt(e.id, i)
                sequential.append(time.perf_counter() - t)
    verdict = "ok" if size / n <= 3072 else "TOO BIG (target <= 3,072 B)"
    return [
        (f"scripted {game} run, pathway {pathway}", f"{len(episodes)} episodes, {n} steps"),
        ("  database size per step", f"{size / n:,.0f} B ({size / 1e6:.2f} MB)  {verdict}"),
        ("  stored prompt chars per step", f"{stored / n:,.0f} (full prompts: {full / n:,.0f}, "
                                           f"{full / stored:.0f}x)"),
        ("  prompt read, last step, cold store", _ms(cold_last)),
        ("  prompt read, random step, cold store", _ms(cold_any)),
        ("  prompt read, episode in order", _ms(sequential)),
    ]


def _ms(samples: list[float]) -> str:
    p95 = sorted(samples)[int(len(samples) * 0.95)]
    return f"{statistics.median(samples) * 1000:.2f} ms (p95 {p95 * 1000:.2f})"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--episodes", type=int, default=100_000)
    ap.add_argument("--with-steps", type=int, default=300,
                    help="episodes that get 64 stored steps (default 300 = 19,200 steps)")
    ap.add_argument("--prompt-bytes", type=int, default=6000, help="size of each stored prompt")
    ap.add_argument("--loads", type=int, default=300, help="episode loads to time")
    ap.add_argument("--inserts", type=int, default=2000, help="steps to add through add_step")
    ap.add_argument("--path", type=Path, default=None)
    ap.add_argument("--keep", action="store_true", help="keep the database file")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    rng = random.Random(args.seed)
    tmp = None
    if args.path is None:
        tmp = tempfile.TemporaryDirectory(prefix="s3gym-bench-")
        args.path = Path(tmp.name) / "bench.db"
    if args.path.exists():
        ap.error(f"{args.path} exists; choose a new path")
    rows: list[tuple[str, str]] = []

    t = time.perf_counter()
    with Store(args.path) as store:
        sampled = build(store, args.episodes, args.with_steps, args.prompt_bytes, rng)
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    build_s = time.perf_counter() - t
    n_steps = len(sampled) * STEPS
    rows.append(("build (bulk insert_all)",
                 f"{args.episodes:,} episodes, {n_steps:,} steps in {build_s:.1f} s"))

    opens, opens_nocheck = [], []
    for _ in range(5):
        store_module._CHECKED.clear()  # force the once-per-process quick_check
        t = time.perf_counter()
        Store(args.path).close()
        opens.append(time.perf_counter() - t)
        t = time.perf_counter()
        Store(args.path, check=False).close()
        opens_nocheck.append(time.perf_counter() - t)
    rows.append(("first open in a process (quick_check)", _ms(opens)))
    rows.append(("open, already checked / for_thread()", _ms(opens_nocheck)))

    with Store(args.path) as store:
        full, light = [], []
        for n in range(args.loads):
            episode_id = sampled[n % len(sampled)]
            t = time.perf_counter()
            episode = store.episodes.get_episode(episode_id)
            steps = store.episodes.steps(episode_id)
            full.append(time.perf_counter() - t)
            assert len(steps) == STEPS == episode.n_steps
            t = time.perf_counter()
            store.episodes.get_episode(episode_id)
            store.episodes.steps(episode_id, include_prompt=False)
            light.append(time.perf_counter() - t)
        verdict = "ok" if statistics.median(full) < 0.020 else "TOO SLOW (target < 20 ms)"
        rows.append((f"load one {STEPS}-step episode ({args.prompt_bytes} B prompts)",
                     f"{_ms(full)}  {verdict}"))
        rows.append(("  same, include_prompt=False", _ms(light)))

        t_list = []
        for _ in range(50):
            t = time.perf_counter()
            store.runs.list_runs(limit=50)
            t_list.append(time.perf_counter() - t)
        rows.append(("list_runs(limit=50)", _ms(t_list)))
        t = time.perf_counter()
        run_eps = store.episodes.list("run-000007")
        rows.append(("episodes(run) (63 rows)", f"{(time.perf_counter() - t) * 1000:.2f} ms"
                                                f" ({len(run_eps)} episodes)"))

        run = store.runs.create_run(RunConfig(model="openai/gpt-4.1", game="tetris"))
        episodes = [Episode(id=f"ins-{e}", run_id=run.id, game="tetris", mode="explore",
                            phase="explore", seed=e, index=e, model="openai/gpt-4.1",
                            pathway="none") for e in range((args.inserts + STEPS - 1) // STEPS)]
        pending = [Step(**_step_row(rng, f"ins-{n // STEPS}", n % STEPS, args.prompt_bytes))
                   for n in range(args.inserts)]  # built before timing: only the store is timed
        t = time.perf_counter()
        for episode in episodes:
            store.episodes.add_episode(episode)
        for step in pending:
            store.episodes.add_step(step)
        elapsed = time.perf_counter() - t
        rows.append(("add_step (1 transaction each)",
                     f"{len(pending) / elapsed:,.0f} steps/s ({elapsed / len(pending) * 1000:.2f}"
                     f" ms/step, {len(episodes)} add_episode included)"))

        t = time.perf_counter()
        report = audit(store)
        rows.append(("leakage audit", f"{(time.perf_counter() - t) * 1000:.0f} ms, "
                                      f"{'clean' if report.ok else len(report.problems)}"))
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    size = args.path.stat().st_size
    rows.append(("database size", f"{size / 1e6:.1f} MB ({args.path})"))
    rows += scripted_run_figures(args.path.with_name(args.path.stem + "-tetris.db"))

    width = max(len(k) for k, _ in rows)
    print(f"{'figure'.ljust(width)}  value")
    print(f"{'-' * width}  {'-' * 40}")
    for key, value in rows:
        print(f"{key.ljust(width)}  {value}")
    if tmp is not None and not args.keep:
        tmp.cleanup()
    elif args.keep:
        print(f"kept {args.path}")
    return 0 if statistics.median(full) < 0.020 else 1


if __name__ == "__main__":
    raise SystemExit(main())
