"""Two threads, each with its own Store on one file, write at the same time without lock errors."""

from __future__ import annotations

import threading
from pathlib import Path

from s3gym_tui.models import Episode, RunConfig
from s3gym_tui.store import Store

STEPS = 150
SUMMARIES = 40


def _writer(path: Path, run_id: str, episode: Episode, barrier: threading.Barrier,
            errors: list[BaseException], make_step, opener) -> None:
    try:
        with opener(path) as store:
            barrier.wait()
            for i in range(STEPS):
                store.episodes.add_step(make_step(episode.id, i))
                if i % 4 == 0:
                    store.summaries.add_summary(run_id, f"r{i}", "a", "n", author=f"model:{episode.id}")
                store.runs.list_runs()  # interleave reads too
            for _ in range(SUMMARIES - (STEPS + 3) // 4):
                store.summaries.add_summary(run_id, "r", "a", "n", author=f"model:{episode.id}")
    except BaseException as err:  # noqa: BLE001 - reported by the test
        errors.append(err)


def test_two_threads_write_concurrently(db_path: Path, make_episode, make_step):
    with Store(db_path) as main:
        run = main.runs.create_run(RunConfig(model="m", game="trust"))
        episodes = [main.episodes.add_episode(make_episode(run, index=i)) for i in range(2)]
        barrier = threading.Barrier(2)
        errors: list[BaseException] = []
        openers = [lambda p: Store(p), lambda p: main.for_thread()]
        threads = [threading.Thread(target=_writer, args=(db_path, run.id, ep, barrier, errors,
                                                          make_step, opener))
                   for ep, opener in zip(episodes, openers)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(timeout=120)
        assert not errors, [str(e) for e in errors]
        for ep in episodes:
            assert main.episodes.get_episode(ep.id).n_steps == STEPS
            assert [s.index for s in main.episodes.steps(ep.id)] == list(range(STEPS))
        versions = [s.version for s in main.summaries.list(run.id)]
        assert versions == list(range(1, 2 * SUMMARIES + 1))  # no version handed out twice
        by_author = {ep.id: [s for s in main.summaries.list(run.id) if s.author == f"model:{ep.id}"]
                     for ep in episodes}
        assert all(len(v) == SUMMARIES for v in by_author.values())


def test_two_stores_opening_a_fresh_file_at_once(tmp_path: Path):
    """Both race to create the schema; the loser sees it done and just opens."""
    path = tmp_path / "fresh.db"
    barrier = threading.Barrier(4)
    errors: list[BaseException] = []
    versions: list[int] = []

    def open_it() -> None:
        try:
            barrier.wait()
            with Store(path) as store:
                versions.append(store.schema_version)
                store.runs.create_run(RunConfig(model="m", game="trust"))
        except BaseException as err:  # noqa: BLE001
            errors.append(err)

    threads = [threading.Thread(target=open_it) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=60)
    assert not errors, [str(e) for e in errors]
    with Store(path) as store:
        assert len(store.runs.list_runs()) == 4
        assert versions == [store.schema_version] * 4
