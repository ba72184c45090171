"""Concurrency: a headless run (another process) writing while this process reads like the app
does and writes like a person does, on the same database: no "database is locked", no torn reads
(an episode's n_steps equals its stored steps in every read snapshot), and the headless run
finishes exactly as it would alone."""

from __future__ import annotations

import asyncio
import os
import threading
import time
from pathlib import Path

from s3gym_tui.engine.play import new_play_session
from s3gym_tui.engine.runner import call_settings
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, audit

from tests import cli_fork
from tests.engine.helpers import check_run_consistency, run_protocol, trajectory

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml"}
HEADLESS = dict(model="scripted/snake", game="snake", pathway="history", explore_episodes=2, eval_every=1,
                eval_episodes=1)

TORN_SQL = ('SELECT e.id, e.n_steps, (SELECT count(*) FROM steps s WHERE s.episode_id = e.id) '
            'FROM episodes e')


class Reader:
    """Polls like the app: single-statement snapshots, Store reads inside one read transaction,
    and the app's everyday reads outside any transaction."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.snapshots = 0
        self.torn: list[str] = []
        self.errors: list[str] = []

    def poll(self, store: Store) -> None:
        for episode_id, n_steps, count in store.conn.execute(TORN_SQL).fetchall():
            if n_steps != count:
                self.torn.append(f"sql: {episode_id} n_steps {n_steps} but {count} steps")
        store.conn.execute("BEGIN")  # one read snapshot across several Store calls
        try:
            for run in store.runs.list_runs():
                for episode in store.episodes.list(run.id):
                    steps = store.episodes.steps(episode.id, include_prompt=False)
                    if episode.n_steps != len(steps) or [s.index for s in steps] != list(range(len(steps))):
                        self.torn.append(f"tx: {episode.id} n_steps {episode.n_steps}, {len(steps)} steps")
                    if steps and episode.status == "running":
                        store.prompts.step_prompt(episode.id, steps[-1].index)
                for checkpoint in store.checkpoints.list(run.id):
                    for episode_id in checkpoint.episode_ids:
                        if store.episodes.get_episode(episode_id).status != "finished":
                            self.torn.append(f"checkpoint {checkpoint.x} before its episode {episode_id}")
        finally:
            store.conn.execute("COMMIT")
        for run in store.runs.list_runs():  # the app's everyday reads, no transaction
            store.summaries.current_summary(run.id)
            store.summaries.list(run.id)
        if not audit(store).ok:
            self.torn.append("audit not clean")
        self.snapshots += 1

    def loop(self, stop: threading.Event) -> None:
        try:
            with Store(self.path) as store:
                while not stop.is_set():
                    try:
                        self.poll(store)
                    except Exception as exc:  # noqa: BLE001 - the test reports it
                        self.errors.append(f"{type(exc).__name__}: {exc}")
                        if store.conn.in_transaction:
                            store.conn.execute("ROLLBACK")
        except Exception as exc:  # noqa: BLE001
            self.errors.append(f"{type(exc).__name__}: {exc}")


def human_writer(path: Path, run_id: str, stop: threading.Event, errors: list[str], counts: dict) -> None:
    """Writes like a person in the app: hand-played steps, summary edits, notes on the live run."""
    try:
        with Store(path) as store:
            own = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="summary"))
            summary = store.summaries.add_summary(own.id, "retain", "avoid", "next", author="human:tester")
            settings = call_settings(own.config, 0)
            seed = 500
            while not stop.is_set():
                try:
                    session = new_play_session(store, "trust", "explore", seed, settings)
                    seed += 1
                    while not session.done and not stop.is_set():
                        session.commit(None, action="collaborate", actor="human")
                        counts["steps"] += 1
                    summary = store.summaries.edit_summary(summary.id, f"retain {seed}", "avoid", "next",
                                                           author="human:tester")
                    store.runs.set_run_note(run_id, f"watched at {time.time():.3f}")
                    counts["edits"] += 1
                except Exception as exc:  # noqa: BLE001
                    errors.append(f"{type(exc).__name__}: {exc}")
    except Exception as exc:  # noqa: BLE001
        errors.append(f"{type(exc).__name__}: {exc}")


def test_headless_run_with_an_app_like_reader_and_a_human_writer(tmp_path):
    db = tmp_path / "shared.db"
    with Store(db) as store:
        run = store.runs.create_run(RunConfig(**HEADLESS), run_id="headless")
    stop = threading.Event()
    reader = Reader(db)
    errors: list[str] = []
    counts = {"steps": 0, "edits": 0}
    threads = [threading.Thread(target=reader.loop, args=(stop,)),
               threading.Thread(target=human_writer, args=(db, run.id, stop, errors, counts))]
    for thread in threads:
        thread.start()
    try:
        # `python -m s3gym_tui resume`, forked from the preloaded CLI (tests/cli_fork.py)
        proc = cli_fork.run(["resume", "headless", "--db", str(db)], env=ENV, cwd=ROOT, capture_output=True,
                            text=True, timeout=600)
    finally:
        stop.set()
        for thread in threads:
            thread.join(timeout=60)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert not reader.errors and not errors, (reader.errors[:3], errors[:3])
    assert not reader.torn, reader.torn[:5]
    assert reader.snapshots >= 5 and counts["steps"] >= 20 and counts["edits"] >= 1
    store = Store(db)
    final = store.runs.get_run("headless")
    assert final.status == "finished" and final.note.startswith("watched at")
    reference_store, _ = run_protocol(tmp_path / "ref.db", run_id="headless", **HEADLESS)
    assert trajectory(store, "headless") == trajectory(reference_store, "headless")
    check_run_consistency(store, final)


def test_two_protocol_runs_in_threads_and_a_reader_on_one_file(tmp_path):
    """Two runners writing concurrently from two threads (each its own Store), a reader polling."""
    db = tmp_path / "two.db"
    configs = {"a": dict(model="scripted/trust", game="trust", pathway="summary", explore_episodes=3,
                         eval_every=1, eval_episodes=2),
               "b": dict(model="fault/minesweeper", game="minesweeper", pathway="history", explore_episodes=2,
                         eval_every=1, eval_episodes=2)}
    with Store(db) as store:
        for run_id, config in configs.items():
            store.runs.create_run(RunConfig(**config), run_id=run_id)
    errors: list[str] = []

    def run(run_id: str) -> None:
        from s3gym_tui.engine.runner import ProtocolRunner

        try:
            with Store(db) as store:
                final = asyncio.run(ProtocolRunner(store, store.runs.get_run(run_id), backoff_base_s=0).run_protocol())
                if final.status != "finished":
                    errors.append(f"{run_id}: {final.status}")
        except Exception as exc:  # noqa: BLE001
            errors.append(f"{run_id}: {type(exc).__name__}: {exc}")

    stop = threading.Event()
    reader = Reader(db)
    reader_thread = threading.Thread(target=reader.loop, args=(stop,))
    reader_thread.start()
    writers = [threading.Thread(target=run, args=(run_id,)) for run_id in configs]
    for thread in writers:
        thread.start()
    for thread in writers:
        thread.join(timeout=600)
    stop.set()
    reader_thread.join(timeout=60)
    assert not errors and not reader.errors and not reader.torn, (errors, reader.errors[:3], reader.torn[:3])
    store = Store(db)
    for run_id, config in configs.items():
        reference_store, _ = run_protocol(tmp_path / f"ref-{run_id}.db", run_id=run_id, **config)
        assert trajectory(store, run_id) == trajectory(reference_store, run_id)
        check_run_consistency(store, store.runs.get_run(run_id))
