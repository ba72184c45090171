"""`rm` removes a run with everything derived from it and nothing else; `vacuum` returns the space."""

from __future__ import annotations

import asyncio
import sqlite3
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.play import fork_session
from s3gym_tui.engine.runner import ProtocolRunner, call_settings
from s3gym_tui.engine.trial import try_summary
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, StoreError
from s3gym_tui.store.leases import RunBusy


def _run(store: Store, pathway: str, game: str = "trust") -> str:
    run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway=pathway,
                                          explore_episodes=3, eval_every=3, eval_episodes=1))
    asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    return run.id


def _rows(path: Path, run_id: str) -> dict[str, list]:
    """Everything stored about a run, table by table."""
    conn = sqlite3.connect(path)
    try:
        eps = [r[0] for r in conn.execute("SELECT id FROM episodes WHERE run_id = ?", (run_id,))]
        q = ",".join("?" * len(eps))
        return {
            "runs": conn.execute("SELECT * FROM runs WHERE id = ?", (run_id,)).fetchall(),
            "episodes": conn.execute("SELECT * FROM episodes WHERE run_id = ? ORDER BY id",
                                     (run_id,)).fetchall(),
            "steps": conn.execute(f"SELECT * FROM steps WHERE episode_id IN ({q}) ORDER BY "
                                  f"episode_id, \"index\"", eps).fetchall(),
            "summaries": conn.execute("SELECT * FROM summaries WHERE run_id = ? ORDER BY id",
                                      (run_id,)).fetchall(),
            "checkpoints": conn.execute("SELECT * FROM checkpoints WHERE run_id = ?",
                                        (run_id,)).fetchall(),
        }
    finally:
        conn.close()


def test_rm_takes_the_run_and_what_was_made_from_it_and_nothing_else(tmp_path: Path):
    path = tmp_path / "rm.db"
    with Store(path) as store:
        keep = _run(store, "history")
        doomed = _run(store, "history", game="snake")  # its shared prompt parts are its own
        summary_run = _run(store, "summary")
        source = store.episodes.list(doomed, phase="explore")[1]
        fork = fork_session(store, source.id, 2, call_settings(store.runs.get_run(doomed).config))
        fork.commit(None, "UP", actor="human")
        refork = fork_session(store, fork.episode.id, 1, call_settings(store.runs.get_run(doomed).config))
        store.datasets.add_dataset(doomed, {"threshold": 0}, [{"episode_id": source.id, "step_index": 0,
                                                       "kind": "kept"}])
        summary = store.summaries.current_summary(summary_run)
        store.summaries.edit_summary(summary.id, "r", "a", "n", author="human:t")
        before_keep = _rows(path, keep)
        before_summary = _rows(path, summary_run)
        texts_before = store.conn.execute("SELECT count(*) FROM texts").fetchone()[0]
        plan = store.hygiene.removal_plan([doomed])
        assert (plan.episodes, plan.forks_and_trials, plan.datasets) == (5, 2, 1)
        assert _rows(path, doomed)["steps"]  # planning changed nothing
        done = store.hygiene.remove_runs([doomed])
        assert done.texts >= 1 and done.free_bytes > 0
        assert store.episodes.find_episode(fork.episode.id) is None
        assert store.episodes.find_episode(refork.episode.id) is None
        with pytest.raises(StoreError, match="no run"):
            store.runs.get_run(doomed)
        assert store.datasets.list(doomed) == []
        assert store.conn.execute("SELECT count(*) FROM texts").fetchone()[0] == texts_before - done.texts
        for run_id in (keep, summary_run):  # every other run's prompts still expand exactly
            for episode in store.episodes.list(run_id):
                for step in store.episodes.steps(episode.id):
                    assert "[[text:" not in store.prompts.step_prompt(episode.id, step.index)
        trial = asyncio.run(try_summary(store, store.runs.get_run(summary_run), summary))
        removed = store.hygiene.remove_runs([summary_run])
        assert removed.summaries == len(before_summary["summaries"])
        assert removed.forks_and_trials == len(trial.episode_ids) == 1
        assert all(store.episodes.find_episode(e) is None for e in trial.episode_ids)
        assert store.conn.execute("SELECT count(*) FROM summary_actions").fetchone()[0] == 0
    assert _rows(path, keep) == before_keep
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"
    assert conn.execute("PRAGMA foreign_key_check").fetchall() == []
    conn.close()


def test_rm_refuses_a_driven_run_an_unknown_one_and_a_run_another_dataset_trains_on(tmp_path: Path):
    path = tmp_path / "refuse.db"
    with Store(path) as store:
        a, b = _run(store, "none"), _run(store, "none")
        lease = store.leases.acquire_lease(a, "s3gym run")
        with pytest.raises(RunBusy, match=f"run {a} is being driven by PID"):
            store.hygiene.remove_runs([a])
        store.leases.release_lease(lease)
        with pytest.raises(StoreError, match="no run 'nope'"):
            store.hygiene.remove_runs([a, "nope"])
        episode = store.episodes.list(a, phase="explore")[0]
        store.datasets.add_dataset(b, {"threshold": 0}, [{"episode_id": episode.id, "step_index": 0,
                                                  "kind": "kept"}])
        with pytest.raises(StoreError, match="of another run trains on these runs' steps"):
            store.hygiene.remove_runs([a])
        assert store.runs.get_run(a) and store.episodes.list(a)
        store.hygiene.remove_runs([a, b])  # together they can go
        assert store.runs.list_runs() == []


def test_vacuum_returns_the_space_and_the_cli_asks_first(tmp_path: Path, capsys):
    path = tmp_path / "vac.db"
    with Store(path) as store:
        run_id = _run(store, "history", game="snake")
        other = _run(store, "none")
    assert main(["rm", run_id, "--db", str(path)]) == 2  # stdin is not a terminal: needs --yes
    assert "add --yes" in capsys.readouterr().err
    with Store(path) as store:
        assert store.runs.get_run(run_id)
    assert main(["rm", run_id, "--db", str(path), "--yes"]) == 0
    before = path.stat().st_size
    assert main(["vacuum", "--db", str(path)]) == 0
    out = capsys.readouterr().out
    assert "reclaimed" in out
    assert path.stat().st_size < before
    with Store(path) as store:
        assert [r.id for r in store.runs.list_runs()] == [other]


# ----- page size: new files use small pages, vacuum brings older files to them ---------------------
def _older_file(path: Path) -> None:
    """An SQLite file of 4 KiB pages with no tables: Store makes a store in it as files were made
    before new files used PAGE_SIZE."""
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA page_size = 4096")
    conn.execute("CREATE TABLE scratch (a)")
    conn.execute("DROP TABLE scratch")
    conn.close()


def _page_size(path: Path) -> int:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA page_size").fetchone()[0]
    finally:
        conn.close()


def test_a_new_store_uses_small_pages(tmp_path: Path):
    from s3gym_tui.store.connection import PAGE_SIZE

    with Store(tmp_path / "new.db") as store:
        _run(store, "none")
    assert _page_size(tmp_path / "new.db") == PAGE_SIZE == 1024


def test_vacuum_rewrites_an_older_file_into_small_pages_keeping_everything(tmp_path: Path, capsys):
    path = tmp_path / "old.db"
    _older_file(path)
    with Store(path) as store:
        run_id = _run(store, "summary")
        hits = len(store.search.find("collaborate", limit=500).hits)
        prompts = [store.prompts.step_prompt(e.id, i) for e in store.episodes.list(run_id) for i in range(e.n_steps)]
    assert _page_size(path) == 4096 and hits > 0
    rows = _rows(path, run_id)
    assert main(["vacuum", "--db", str(path)]) == 0
    assert "4,096 B -> 1,024 B" in capsys.readouterr().out
    assert _page_size(path) == 1024
    assert _rows(path, run_id) == rows
    with Store(path) as store:
        assert len(store.search.find("collaborate", limit=500).hits) == hits
        assert [store.prompts.step_prompt(e.id, i)
                for e in store.episodes.list(run_id) for i in range(e.n_steps)] == prompts
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


def test_vacuum_keeps_the_pages_while_another_connection_has_the_file(tmp_path: Path):
    path = tmp_path / "shared.db"
    _older_file(path)
    with Store(path) as store:
        _run(store, "none")
    other = sqlite3.connect(path)
    other.execute("BEGIN")
    other.execute("SELECT count(*) FROM steps").fetchone()  # a reader in another connection
    try:
        with Store(path) as store:
            result = store.hygiene.vacuum()
        assert result.page_before == result.page_after == 4096  # refused at once: nothing waited for
    finally:
        other.execute("COMMIT")
        other.close()
    assert _page_size(path) == 4096
