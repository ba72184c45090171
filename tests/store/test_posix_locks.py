"""One process's connections must never lose their POSIX locks: opening and closing a second Store
(what every thread worker of the app does) while a first one is open, then letting another process
finish on the same file, must keep the -wal/-shm in place, every write visible to other processes
and the file intact. Before the fix, a header check with open()/close() dropped the locks, the other
process deleted the live -wal, the first connection's writes went to an unlinked file, and the
database ended "malformed"."""

from __future__ import annotations

import builtins
import io
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store

ROOT = Path(__file__).resolve().parents[2]
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True", "S3GYM_CONFIG": "/nonexistent/s3gym.toml"}

OTHER_WRITER = """
import sys
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store
with Store(sys.argv[1]) as store:
    for i in range(int(sys.argv[3])):
        store.runs.create_run(RunConfig(model="scripted/trust", game="trust"), run_id=f"{sys.argv[2]}-{i}")
"""

READER = """
import sys
from s3gym_tui.store import Store
with Store(sys.argv[1], read_only=True) as store:
    print(",".join(sorted(r.id for r in store.runs.list_runs(limit=10_000))))
"""


def _python(code: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], capture_output=True,
                          text=True, env=ENV, cwd=ROOT, timeout=120)


def _integrity(path: Path) -> str:
    conn = sqlite3.connect(path)
    try:
        return conn.execute("PRAGMA integrity_check").fetchone()[0]
    finally:
        conn.close()


def _config() -> RunConfig:
    return RunConfig(model="scripted/trust", game="trust")


@pytest.mark.parametrize("second_open", ["for_thread", "full_open", "read_only_open"])
def test_second_store_in_process_keeps_the_first_ones_locks(tmp_path: Path, second_open: str):
    path = tmp_path / "shared.db"
    first = Store(path)
    try:
        first.runs.create_run(_config(), run_id="app-0")
        for _ in range(3):  # a screen's thread worker opening and closing its own connection
            second = {"for_thread": first.for_thread,
                      "full_open": lambda: Store(path),
                      "read_only_open": lambda: Store(path, read_only=True)}[second_open]()
            second.runs.list_runs()
            second.close()
        done = _python(OTHER_WRITER, path, "headless", 3)  # another process writes, then closes
        assert done.returncode == 0, done.stderr
        assert Path(f"{path}-wal").exists() and Path(f"{path}-shm").exists(), \
            "the other process deleted the WAL while this process still had it open"
        first.runs.create_run(_config(), run_id="app-1")  # e.g. a summary edit in the app
        seen = _python(READER, path)
        assert seen.returncode == 0, seen.stderr
        assert seen.stdout.strip().split(",") == sorted(["app-0", "app-1", "headless-0", "headless-1",
                                                         "headless-2"])
        done = _python(OTHER_WRITER, path, "later", 2)
        assert done.returncode == 0, done.stderr
        assert {r.id for r in first.runs.list_runs()} >= {"later-0", "later-1", "app-1"}
    finally:
        first.close()
    assert _integrity(path) == "ok"
    with Store(path) as store:
        assert len(store.runs.list_runs()) == 7


def test_nothing_opens_the_database_file_outside_sqlite(tmp_path: Path, monkeypatch):
    """Every way the store, the audit and the exports touch the file goes through SQLite."""
    from s3gym_tui.engine.export import export_run
    from s3gym_tui.store import audit

    path = tmp_path / "watched.db"
    with Store(path) as store:
        run = store.runs.create_run(_config(), run_id="r")
    watched = {str(path.resolve()) + suffix for suffix in ("", "-wal", "-shm", "-journal")}
    opened: list[str] = []
    real_open, real_os_open = builtins.open, os.open

    def check(file) -> None:
        if isinstance(file, (str, os.PathLike)) and os.path.abspath(os.fspath(file)) in watched:
            opened.append(os.fspath(file))

    def fake_open(file, *args, **kwargs):
        check(file)
        return real_open(file, *args, **kwargs)

    def fake_os_open(file, *args, **kwargs):
        check(file)
        return real_os_open(file, *args, **kwargs)

    monkeypatch.setattr(builtins, "open", fake_open)
    monkeypatch.setattr(io, "open", fake_open)
    monkeypatch.setattr(os, "open", fake_os_open)
    with Store(path) as store:
        store.for_thread().close()
        Store(path, read_only=True).close()
        audit(store)
        export_run(store, store.runs.get_run(run.id), io.StringIO())
    assert opened == []
