"""Search benchmark: query time over a large store, index size on scripted runs, step store time.

    python benchmarks/search.py                      # 1,000,000 synthesised steps (several minutes)
    python benchmarks/search.py --steps 100000       # quicker
    python benchmarks/search.py --path big.db --keep # keep the big file (reused when it exists)

Figures (targets of issue 26):
1. p50 / p95 of a query with two words and two filters over N stored steps (target p95 < 200 ms), warm,
   over a set of word pairs of mixed frequency and filter pairs; plus the first (cold) query.
   The steps are synthesised directly in SQLite (the triggers index them as a run would): observations,
   actions and feedback from real scripted games, replies with ~40 words drawn (Zipf) from a
   5,000-word vocabulary as a model writes them.
2. Bytes per step of real scripted runs (7 games, pathway none and summary) with and without the index,
   after VACUUM (target: the index adds at most 30 %).
3. Time to store one step (add_step, one transaction, as the runner does) with and without the index
   triggers, on the scripted runs' own steps (target: within 10 %).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from s3gym_tui.models import Episode, RunConfig, Step, utcnow  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402
from s3gym_tui.store.search import SearchFilters  # noqa: E402
from s3gym_tui.store.search_schema import TRIGGERS  # noqa: E402

GAMES = ("chess", "minesweeper", "nullify", "tetris", "snake", "pvz", "trust")
PATHWAYS = ("none", "history", "summary")
STEPS_PER_EPISODE = 50


def _python() -> list[str]:
    return [sys.executable, "-m", "s3gym_tui"]


def scripted_db(path: Path) -> Path:
    """Real scripted runs on every game, pathways none and summary (the templates and figures 2-3)."""
    if path.exists():
        return path
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LITELLM_LOCAL_MODEL_COST_MAP": "True",
           "S3GYM_CONFIG": "/nonexistent.toml"}
    for game in GAMES:
        for pathway in ("none", "summary"):
            subprocess.run([*_python(), "run", game, "-m", f"scripted/{game}", "-p", pathway, "--episodes", "3",
                            "--eval-every", "3", "--eval-episodes", "1", "--progress", "none", "--db", str(path)],
                           check=True, env=env, stdout=subprocess.DEVNULL, cwd=ROOT)
    return path


def _vocabulary(rng: random.Random, n: int = 5000) -> list[str]:
    letters = "abcdefghijklmnopqrstuvwxyz"
    words = set()
    while len(words) < n:
        words.add("".join(rng.choice(letters) for _ in range(rng.randint(3, 9))))
    return sorted(words)


def synthesise(path: Path, templates: Path, n_steps: int) -> float:
    """n_steps steps (runs of 3 pathways x 7 games, 50-step episodes) inserted with plain SQL inside
    the store's schema: the index triggers fire as for a run. Returns the seconds it took."""
    rng = random.Random(26)
    vocab = _vocabulary(rng)
    weights = [1 / (i + 1) for i in range(len(vocab))]  # Zipf: a few common words, a long tail
    src = sqlite3.connect(templates)
    by_game: dict[str, list[tuple]] = {}
    for game, action, feedback, observation in src.execute(
            "SELECT e.game, s.action, s.feedback, s.observation FROM steps s JOIN episodes e ON e.id = s.episode_id"):
        by_game.setdefault(game, []).append((action, feedback, observation))
    src.close()
    started = time.perf_counter()
    with Store(path) as store:
        conn = store.conn
        episodes_needed = -(-n_steps // STEPS_PER_EPISODE)
        run_ids = []
        for game in GAMES:
            for pathway in PATHWAYS:
                run_ids.append((store.runs.create_run(RunConfig(model=f"bench/{game}", game=game, pathway=pathway,
                                                                explore_episodes=30)).id, game, pathway))
        made = 0
        episode_no = 0
        while made < n_steps:
            conn.execute("BEGIN IMMEDIATE")
            for _ in range(200):
                if made >= n_steps:
                    break
                run_id, game, pathway = run_ids[episode_no % len(run_ids)]
                index = episode_no // len(run_ids)
                phase = "eval" if index % 3 == 2 else "explore"
                eid = f"{run_id}-b{episode_no}"
                conn.execute("INSERT INTO episodes (id, run_id, game, mode, phase, seed, \"index\", checkpoint, model, "
                             "pathway, status, n_steps, history_episode_ids, history_cut, started_at) VALUES "
                             "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 'finished', ?, '[]', 0, ?)",
                             (eid, run_id, game, phase, phase, (1_000_000 if phase == "eval" else 0) + episode_no,
                              index, 0 if phase == "eval" else None, f"bench/{game}", pathway,
                              STEPS_PER_EPISODE, utcnow()))
                pool = by_game[game]
                rows = []
                for i in range(min(STEPS_PER_EPISODE, n_steps - made)):
                    action, feedback, observation = pool[rng.randrange(len(pool))]
                    words = rng.choices(vocab, weights, k=40)
                    s = None if rng.random() < 0.05 else float(rng.randint(-1, 3))
                    reply = " ".join(words) + f"\nAnswer: {action}, Score: {s}"
                    rows.append((eid, i, action, s, float(rng.randint(-1, 3)), 1, 0, 0, "model", None, None, 100, 50,
                                 500.0, None, utcnow(), feedback, observation, reply, ""))
                conn.executemany('INSERT INTO steps (episode_id, "index", action, self_score, reward, valid, terminated, '
                                 "truncated, actor, proposed_action, fault, tokens_in, tokens_out, latency_ms, cost, "
                                 "created_at, feedback, observation, reply, prompt) VALUES "
                                 "(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)", rows)
                made += len(rows)
                episode_no += 1
            conn.execute("COMMIT")
            if made % 100_000 < 10_000:
                print(f"  {made:,} steps ({time.perf_counter() - started:.0f} s)", flush=True)
        inserted = time.perf_counter() - started
        print(f"  {made:,} steps stored in {inserted:.0f} s; indexing them (as the first search of an "
              f"upgraded file does) ...", flush=True)
        started = time.perf_counter()
        store.search.index_backlog()
        indexed = time.perf_counter() - started
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return inserted, indexed


def query_times(path: Path, n: int = 60) -> dict:
    rng = random.Random(5)
    vocab = _vocabulary(random.Random(26))
    filters = [SearchFilters(games=("minesweeper",), verdicts=("over",)),
               SearchFilters(pathways=("summary",), phases=("eval",)),
               SearchFilters(games=("trust",), reward_min=1.0),
               SearchFilters(games=("chess",), actors=("model",)),
               SearchFilters(models=("bench/tetris",), verdicts=("under",))]
    times = []
    hits = []
    with Store(path, read_only=True) as store:
        started = time.perf_counter()
        store.search.find(f"{vocab[3]} {vocab[40]}", filters[0])
        cold = time.perf_counter() - started
        for i in range(n):
            # one common word (rank < 50) and one of the tail (rank 50..2000): mixed frequency
            words = f"{vocab[rng.randrange(50)]} {vocab[rng.randrange(50, 2000)]}"
            f = filters[i % len(filters)]
            started = time.perf_counter()
            result = store.search.find(words, f)
            times.append(time.perf_counter() - started)
            hits.append(len(result.hits))
    times.sort()
    return {"cold_ms": cold * 1000, "p50_ms": statistics.median(times) * 1000,
            "p95_ms": times[int(0.95 * (len(times) - 1))] * 1000, "max_ms": times[-1] * 1000,
            "queries": n, "median_hits": statistics.median(hits)}


def _drop_index(path: Path) -> None:
    conn = sqlite3.connect(path)
    for name in TRIGGERS:
        conn.execute(f"DROP TRIGGER IF EXISTS {name}")
    conn.execute("DROP VIEW IF EXISTS summary_search")
    for table in ("search_steps", "search_summaries", "search_notes"):
        conn.execute(f"DROP TABLE IF EXISTS {table}")
    conn.commit()
    conn.close()


def _vacuumed_bytes(path: Path) -> int:
    conn = sqlite3.connect(path)
    conn.execute("VACUUM")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return path.stat().st_size


def index_size(scripted: Path, work: Path) -> dict:
    with_index, without = work / "with.db", work / "without.db"
    for target in (with_index, without):
        src = sqlite3.connect(scripted)
        dst = sqlite3.connect(target)
        src.backup(dst)
        src.close()
        dst.close()
    _drop_index(without)
    steps = sqlite3.connect(scripted).execute("SELECT count(*) FROM steps").fetchone()[0]
    a, b = _vacuumed_bytes(without), _vacuumed_bytes(with_index)
    conn = sqlite3.connect(with_index)
    fts = conn.execute("SELECT sum(pgsize) FROM dbstat WHERE name LIKE 'search%'").fetchone()[0]
    conn.close()
    return {"steps": steps, "bytes_per_step_without": a / steps, "bytes_per_step_with": b / steps,
            "overhead_pct": 100 * (b - a) / a, "index_bytes_per_step": fts / steps}


def store_times(scripted: Path, work: Path, rounds: int = 3) -> dict:
    """add_step per step, with and without the index triggers, interleaved rounds (medians)."""
    with Store(scripted, read_only=True) as src:
        episodes = [e for e in src.episodes.list() if e.n_steps][:40]
        steps = [(e, [s.model_copy(update={"prompt": src.prompts.prompt_of(s)}) for s in src.episodes.steps(e.id)])
                 for e in episodes]  # the prompts as sent, as the engine hands them to add_step
    results: dict[str, list[float]] = {"with": [], "without": []}  # medians of add_step; *_total: means
    for r in range(rounds):
        for kind in ("without", "with") if r % 2 else ("with", "without"):
            path = work / f"store-{kind}-{r}.db"
            with Store(path) as store:
                if kind == "without":
                    for name in TRIGGERS:
                        store.conn.execute(f"DROP TRIGGER IF EXISTS {name}")
                run = store.runs.create_run(RunConfig(model="bench/x", game="trust"))
                per_step = []
                total = 0.0
                for e, ss in steps:
                    ep = store.episodes.add_episode(Episode(**{**e.model_dump(), "id": e.id + "-copy", "run_id": run.id,
                                                               "game": "trust", "n_steps": 0, "history_episode_ids": (),
                                                               "summary_id": None, "fork_of": None, "fork_step": None,
                                                               "experience_run_id": None, "experience_x": None,
                                                               "experience_source": None, "mode": e.phase,
                                                               "checkpoint": e.checkpoint}))
                    for s in ss:
                        step = Step(**{**s.model_dump(), "episode_id": ep.id})
                        started = time.perf_counter()
                        store.episodes.add_step(step)
                        per_step.append(time.perf_counter() - started)
                    started = time.perf_counter()
                    store.episodes.finish_episode(ep.id, e.score)  # indexes the episode's steps (with the index)
                    total += time.perf_counter() - started
                results[kind].append(statistics.median(per_step))
                results[kind + "_total"] = results.get(kind + "_total", []) + [(sum(per_step) + total) / len(per_step)]
    w, wo = statistics.median(results["with"]), statistics.median(results["without"])
    tw, two = statistics.median(results["with_total"]), statistics.median(results["without_total"])
    return {"with_ms": w * 1000, "without_ms": wo * 1000, "change_pct": 100 * (w - wo) / wo,
            "with_incl_end_ms": tw * 1000, "without_incl_end_ms": two * 1000,
            "change_incl_end_pct": 100 * (tw - two) / two, "steps_per_round": sum(len(ss) for _, ss in steps)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--steps", type=int, default=1_000_000)
    parser.add_argument("--path", type=Path, default=None)
    parser.add_argument("--keep", action="store_true")
    parser.add_argument("--scripted", type=Path, default=None, help="reuse the scripted runs of a kept earlier run")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="s3gym-search-bench-"))
    try:
        scripted = scripted_db(args.scripted or work / "scripted.db")
        big = args.path or work / "big.db"
        if not big.exists():
            print(f"synthesising {args.steps:,} steps in {big} ...", flush=True)
            inserted, indexed = synthesise(big, scripted, args.steps)
            print(f"  stored in {inserted:.0f} s, indexed in {indexed:.0f} s ({args.steps / indexed:,.0f} steps/s)")
        with sqlite3.connect(big) as conn:
            n = conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        q = query_times(big)
        size = index_size(scripted, work)
        store = store_times(scripted, work)
        print()
        print(f"{'figure':<58} {'value':>12}  target")
        print(f"{'stored steps':<58} {n:>12,}")
        print(f"{'query: 2 words + 2 filters, first (cold) ms':<58} {q['cold_ms']:>12.1f}")
        print(f"{'query: 2 words + 2 filters, p50 ms':<58} {q['p50_ms']:>12.1f}")
        print(f"{'query: 2 words + 2 filters, p95 ms':<58} {q['p95_ms']:>12.1f}  < 200")
        print(f"{'query: max ms (' + str(q['queries']) + ' queries, median hits ' + str(q['median_hits']) + ')':<58} "
              f"{q['max_ms']:>12.1f}")
        print(f"{'scripted runs: steps':<58} {size['steps']:>12,}")
        print(f"{'scripted runs: bytes per step without the index':<58} {size['bytes_per_step_without']:>12,.0f}")
        print(f"{'scripted runs: bytes per step with the index':<58} {size['bytes_per_step_with']:>12,.0f}")
        print(f"{'scripted runs: index overhead %':<58} {size['overhead_pct']:>12.1f}  <= 30")
        print(f"{'store one step without the index triggers, ms (median)':<58} {store['without_ms']:>12.3f}")
        print(f"{'store one step with the index triggers, ms (median)':<58} {store['with_ms']:>12.3f}")
        print(f"{'store one step: change %':<58} {store['change_pct']:>12.1f}  <= 10")
        print(f"{'per step incl. episode end (its batch indexed), without ms':<58} "
              f"{store['without_incl_end_ms']:>12.3f}")
        print(f"{'per step incl. episode end (its batch indexed), with ms':<58} {store['with_incl_end_ms']:>12.3f}")
        print(f"{'per step incl. episode end: change %':<58} {store['change_incl_end_pct']:>12.1f}")
        print(json.dumps({"steps": n, "query": q, "size": size, "store": store}))
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
