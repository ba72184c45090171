"""The database file: creation, pragmas, refusing corrupt/newer/foreign files untouched,
read-only use, and one-line errors for locks, full disks and misuse."""

from __future__ import annotations

import os
import sqlite3
import stat
import sys
import threading
from pathlib import Path

import platformdirs
import pytest

from s3gym_tui.models import RunConfig
from s3gym_tui.store import SCHEMA_VERSION, Store, StoreError, default_db_path


def _populated(path: Path) -> str:
    with Store(path) as store:
        run = store.runs.create_run(RunConfig(model="m", game="trust"))
        for i in range(30):
            store.summaries.add_summary(run.id, "retain " * 50, "avoid " * 50, f"next {i}")
        return run.id


def _snapshot(path: Path) -> tuple[bytes, list[str]]:
    return path.read_bytes(), sorted(os.listdir(path.parent))


def _assert_one_line(err: pytest.ExceptionInfo) -> None:
    assert "\n" not in str(err.value) and str(err.value).strip() == str(err.value)


def test_creates_parent_dirs_wal_foreign_keys_and_busy_timeout(db_path: Path):
    assert not db_path.parent.exists()
    with Store(db_path, busy_timeout=7) as store:
        assert db_path.exists()
        assert store.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        assert store.conn.execute("PRAGMA foreign_keys").fetchone()[0] == 1
        assert store.conn.execute("PRAGMA busy_timeout").fetchone()[0] == 7000
        assert store.schema_version == SCHEMA_VERSION
        assert store.conn.execute("SELECT value FROM meta WHERE key = 'schema_version'"
                                  ).fetchone()[0] == str(SCHEMA_VERSION)


def test_plain_tables_for_datasette(store: Store):
    """No STRICT or WITHOUT ROWID tables, JSON columns are TEXT: any SQLite tool can read them."""
    rows = store.conn.execute("SELECT name, sql FROM sqlite_master WHERE type='table'").fetchall()
    fts = {name for name, sql in rows if sql.upper().startswith("CREATE VIRTUAL TABLE")}
    assert fts == {"search_steps", "search_summaries", "search_notes"}  # FTS5 (its own storage tables aside)
    sqls = [sql for name, sql in rows if not any(name.startswith(f) for f in fts)]
    # meta, runs, episodes, steps, summaries, checkpoints, datasets, dataset_rows, texts, leases,
    # experience_states, summary_actions, sweeps, trainings, training_checkpoints, training_losses,
    # training_evals, training_sources, studies, annotations, search_pending, step_repairs, training_leases,
    # pi_extractions, pi_items, pi_evidence, episode_credits, action_credits,
    # aspire_runs, aspire_decisions, aspire_candidates, aspire_claims, aspire_scores, aspire_run_links,
    # aspire_leases, aspire_suite_secret
    assert len(sqls) == 36
    assert not any("STRICT" in s.upper() or "WITHOUT ROWID" in s.upper() for s in sqls)
    types = {r[1]: r[2] for r in store.conn.execute("PRAGMA table_info(episodes)")}
    assert types["history_episode_ids"] == "TEXT"


def test_garbage_file_refused_and_left_byte_identical(tmp_path: Path):
    path = tmp_path / "garbage.db"
    path.write_bytes(os.urandom(8192))
    before = _snapshot(path)
    with pytest.raises(StoreError, match="is not an SQLite database") as err:
        Store(path)
    _assert_one_line(err)
    assert _snapshot(path) == before


def test_text_file_refused(tmp_path: Path):
    path = tmp_path / "notes.db"
    path.write_text("hello, this is not a database\n" * 10)
    before = _snapshot(path)
    with pytest.raises(StoreError, match="not an SQLite database"):
        Store(path)
    assert _snapshot(path) == before


def test_damaged_pages_refused_and_left_byte_identical(tmp_path: Path):
    path = tmp_path / "damaged.db"
    _populated(path)
    data = bytearray(path.read_bytes())
    page = int.from_bytes(data[16:18], "big")
    assert len(data) > 4 * page
    data[page + 10: 3 * page] = os.urandom(2 * page - 10)  # smash pages 2 and 3, keep the header
    path.write_bytes(bytes(data))
    before = path.read_bytes()
    with pytest.raises(StoreError, match="corrupt") as err:
        Store(path)
    _assert_one_line(err)
    assert path.read_bytes() == before


def test_foreign_sqlite_database_refused(tmp_path: Path):
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE things (x)")
    conn.commit()
    conn.close()
    before = path.read_bytes()
    with pytest.raises(StoreError, match="not an s3gym store"):
        Store(path)
    assert path.read_bytes() == before


def test_newer_schema_refused_and_left_byte_identical(db_path: Path):
    _populated(db_path)
    conn = sqlite3.connect(db_path)
    conn.execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                 (str(SCHEMA_VERSION + 5),))
    conn.commit()
    conn.close()
    before = _snapshot(db_path)
    expected = (f"was written by a newer s3gym \\(schema {SCHEMA_VERSION + 5} > "
                f"{SCHEMA_VERSION}\\); upgrade s3gym$")
    with pytest.raises(StoreError, match=expected) as err:
        Store(db_path)
    _assert_one_line(err)
    assert _snapshot(db_path) == before  # no -wal/-shm left behind either
    with pytest.raises(StoreError, match=expected):
        Store(db_path, read_only=True)
    # a read-only open of a WAL file may leave SQLite's empty companions; the file is untouched
    assert db_path.read_bytes() == before[0]


def test_empty_file_becomes_a_store(tmp_path: Path):
    path = tmp_path / "empty.db"
    path.touch()
    with Store(path) as store:
        assert store.runs.list_runs() == []


def test_directory_refused(tmp_path: Path):
    with pytest.raises(StoreError, match="is a directory"):
        Store(tmp_path)


@pytest.fixture
def read_only_file(db_path: Path):
    run_id = _populated(db_path)
    db_path.chmod(stat.S_IRUSR | stat.S_IRGRP | stat.S_IROTH)
    yield db_path, run_id
    db_path.chmod(stat.S_IRUSR | stat.S_IWUSR)


def test_read_only_file_opens_for_reading(read_only_file):
    path, run_id = read_only_file
    before = path.read_bytes()
    with Store(path) as store:
        assert store.read_only
        assert store.runs.get_run(run_id).id == run_id
        assert len(store.summaries.list(run_id)) == 30
        assert store.summaries.current_summary(run_id).version == 30
        with pytest.raises(StoreError, match="read-only: cannot set a run's status") as err:
            store.runs.set_run_status(run_id, "finished")
        _assert_one_line(err)
        with pytest.raises(StoreError, match="read-only"):
            store.runs.create_run(RunConfig(model="m", game="trust"))
    assert path.read_bytes() == before


def test_read_only_on_request(db_path: Path):
    run_id = _populated(db_path)
    with Store(db_path, read_only=True) as store:
        assert store.runs.get_run(run_id).id == run_id
        with pytest.raises(StoreError, match="read-only"):
            store.summaries.add_summary(run_id, "r", "a", "n")
        # even around the guard, SQLite itself refuses, and the error is still one line
        with pytest.raises(StoreError, match="read-only"):
            with store._reading("write behind the store's back"):
                store.conn.execute("DELETE FROM runs")
    with Store(db_path) as store:
        assert len(store.summaries.list(run_id)) == 30


def test_read_only_without_a_file(tmp_path: Path):
    with pytest.raises(StoreError, match="no s3gym database"):
        Store(tmp_path / "missing.db", read_only=True)
    assert not (tmp_path / "missing.db").exists()


def test_locked_database_is_a_one_line_store_error(db_path: Path):
    run_id = _populated(db_path)
    blocker = sqlite3.connect(db_path, isolation_level=None)
    blocker.execute("BEGIN IMMEDIATE")
    try:
        with Store(db_path, busy_timeout=0.2) as store:
            assert store.runs.get_run(run_id).id == run_id  # readers are not blocked in WAL mode
            with pytest.raises(StoreError, match=r"is locked by another writer \(waited 0.2 s\)"
                               ) as err:
                store.runs.set_run_status(run_id, "running")
            _assert_one_line(err)
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def test_disk_full_is_a_one_line_store_error(store: Store):
    run = store.runs.create_run(RunConfig(model="m", game="trust"))
    pages = store.conn.execute("PRAGMA page_count").fetchone()[0]
    store.conn.execute(f"PRAGMA max_page_count = {pages + 1}")
    with pytest.raises(StoreError, match="disk full: cannot add a summary") as err:
        for i in range(200):
            store.summaries.add_summary(run.id, "x" * 5000, "y" * 5000, "z")
    _assert_one_line(err)
    store.conn.execute("PRAGMA max_page_count = 1073741823")
    assert store.summaries.add_summary(run.id, "r", "a", "n").version == len(store.summaries.list(run.id))


def test_closed_store(db_path: Path):
    store = Store(db_path)
    store.close()
    store.close()  # idempotent
    with pytest.raises(StoreError, match="is closed"):
        store.runs.list_runs()
    with pytest.raises(StoreError, match="is closed"):
        store.runs.create_run(RunConfig(model="m", game="trust"))


def test_using_a_store_from_another_thread_says_what_to_do(store: Store):
    errors: list[BaseException] = []

    def use() -> None:
        try:
            store.runs.list_runs()
        except BaseException as err:  # noqa: BLE001 - collected for the assertion
            errors.append(err)

    thread = threading.Thread(target=use)
    thread.start()
    thread.join()
    assert len(errors) == 1 and isinstance(errors[0], StoreError)
    assert "open one Store per thread" in str(errors[0])


def test_default_db_path(monkeypatch: pytest.MonkeyPatch, tmp_path: Path):
    monkeypatch.delenv("S3GYM_DB", raising=False)
    expected = platformdirs.user_data_path("s3gym", appauthor=False) / "s3gym.db"
    assert default_db_path() == expected
    monkeypatch.setenv("S3GYM_DB", str(tmp_path / "elsewhere.db"))
    assert default_db_path() == tmp_path / "elsewhere.db"
    with Store() as store:
        assert store.path == tmp_path / "elsewhere.db"
    assert (tmp_path / "elsewhere.db").exists()


def test_store_imports_no_textual(tmp_path: Path):
    """The store is core: importing it with Textual blocked must work."""
    code = ("import sys; sys.modules['textual'] = None; import s3gym_tui.store, "
            "s3gym_tui.store.audit; assert 'textual' not in {m.split('.')[0] for m in sys.modules "
            "if sys.modules[m] is not None}")
    import subprocess

    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=Path(__file__).resolve().parents[2])
    assert result.returncode == 0, result.stderr


def test_quick_check_runs_once_per_file_per_process(db_path: Path, monkeypatch):
    from s3gym_tui.store import connection as store_module

    _populated(db_path)
    monkeypatch.setattr(store_module, "_CHECKED", set())
    statements: list[str] = []
    real_connect = sqlite3.connect

    def traced(*args, **kwargs):
        conn = real_connect(*args, **kwargs)
        conn.set_trace_callback(statements.append)
        return conn

    monkeypatch.setattr(store_module.sqlite3, "connect", traced)
    Store(db_path).close()
    Store(db_path).close()
    with Store(db_path) as store:
        store.for_thread().close()
    assert statements.count("PRAGMA quick_check") == 1
