"""Upgrading a file of an older schema (store/upgrade.py): a notice and a backup first, refusals that
leave the file byte-identical (short disk, another process, a reading opener, empty files), and
every pending migration in one transaction, so a failure leaves the original schema."""

from __future__ import annotations

import errno
import hashlib
import sqlite3
import subprocess
import sys
import time
from collections import namedtuple
from pathlib import Path

import pytest
from sqlite_utils import Database

from s3gym_tui.store import Store, StoreError, schema, upgrade
from s3gym_tui.store.upgrade import UpgradeRefused

from tests.store.old_schema import RUN_ID, build_old_store, stored_version

CURRENT = schema.current_version()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _counts(path: Path) -> dict[str, int]:
    conn = sqlite3.connect(path.resolve().as_uri() + "?mode=ro", uri=True)
    try:
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        return {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables}
    finally:
        conn.close()


def _old_chain_reads(path: Path, version: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The file is whole and an s3gym whose chain ends at `version` opens and reads it."""
    conn = sqlite3.connect(path)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    with monkeypatch.context() as patch:
        patch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:version])
        with Store(path, read_only=True) as old:
            assert old.schema_version == version
            assert old.runs.get_run(RUN_ID).note == "made by an older s3gym"


def _failing_after_the_real_ones(error: BaseException):
    def broken(db: Database) -> None:
        db["half_done"].create({"x": int})
        db.execute("UPDATE runs SET note = 'changed by a failed upgrade'")
        raise error

    return broken


def test_a_schema_2_file_upgrades_with_a_notice_and_a_backup(tmp_path: Path):
    path = tmp_path / "x.db"
    old = build_old_store(path, 2)
    lines: list[str] = []
    with Store(path, notify=lines.append) as store:
        done = store.upgraded
        assert store.schema_version == CURRENT
        run = store.runs.get_run(RUN_ID)
        assert run.note == "made by an older s3gym" and run.status_reason == "" and run.sweep_id is None
        episodes = store.episodes.list(RUN_ID)
        assert len(episodes) == old["episodes"]
        assert [s.reply for s in store.episodes.steps(episodes[0].id)] == [f"Answer: C, Score: {k}"
                                                                      for k in range(3)]
    backup = tmp_path / "x.db.schema2.bak"
    assert done is not None and done.backup == backup and done.from_version == 2
    assert lines == [f"upgrading {path} from schema 2 to {CURRENT} (backup: {backup}, "
                     f"{upgrade.human_bytes(backup.stat().st_size)})"]
    # the backup is the old file: schema 2, every row, readable on its own (no WAL beside it)
    assert stored_version(backup) == 2 and _counts(backup) == old
    conn = sqlite3.connect(backup)
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("delete",)
    conn.close()
    # and the upgraded file kept every row
    after = _counts(path)
    assert {t: after[t] for t in old if t != "meta"} == {t: n for t, n in old.items() if t != "meta"}
    with Store(path, notify=lines.append) as again:  # once only
        assert again.upgraded is None and len(lines) == 1


def test_an_existing_backup_is_never_replaced(tmp_path: Path):
    path = tmp_path / "x.db"
    build_old_store(path, 2)
    mine = tmp_path / "x.db.schema2.bak"
    mine.write_text("a backup someone keeps")
    with Store(path) as store:
        assert store.upgraded.backup == tmp_path / "x.db.schema2-2.bak"
    assert mine.read_text() == "a backup someone keeps"
    assert stored_version(tmp_path / "x.db.schema2-2.bak") == 2


@pytest.mark.parametrize("error", [sqlite3.OperationalError("database or disk is full"),
                                   OSError(errno.ENOSPC, "No space left on device")],
                         ids=["sqlite-full", "oserror-enospc"])
def test_a_failure_after_several_migrations_leaves_the_original_schema(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, error: BaseException):
    path = tmp_path / "x.db"
    old = build_old_store(path, 2)
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, _failing_after_the_real_ones(error)])
    with pytest.raises(StoreError) as raised:
        Store(path)
    message = str(raised.value)
    assert f"upgrading {path} from schema 2 to {CURRENT + 1} failed" in message
    assert "No space left on device" in message or "disk is full" in message
    assert f"unchanged at schema 2; the backup {tmp_path / 'x.db.schema2.bak'} is kept" in message
    monkeypatch.undo()
    assert stored_version(path) == 2 and _counts(path) == old  # no table of schemas 3..7 either
    _old_chain_reads(path, 2, monkeypatch)


def test_a_short_disk_is_refused_before_anything_is_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                           capsys: pytest.CaptureFixture):
    path = tmp_path / "x.db"
    build_old_store(path, 2)
    before = _sha(path)
    size = path.stat().st_size
    usage = namedtuple("usage", "total used free")
    monkeypatch.setattr(upgrade.shutil, "disk_usage", lambda p: usage(10 * size, 9 * size, 3 * size))
    with pytest.raises(UpgradeRefused) as raised:
        Store(path)
    assert capsys.readouterr().err == ""  # no notice: nothing was upgraded
    needed = size + int(size * upgrade.GROWTH_FACTOR)
    assert str(raised.value) == (
        f"not enough free space to upgrade {path}: it needs about {upgrade.human_bytes(needed)} "
        f"({upgrade.human_bytes(size)} for the backup and {upgrade.human_bytes(needed - size)} for "
        f"the migration), {upgrade.human_bytes(3 * size)} is free; the file is unchanged")
    assert _sha(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]
    # without a backup the same disk is enough
    with Store(path, backup=False, notify=lambda line: None) as store:
        assert store.upgraded.backup is None and store.schema_version == CURRENT
    assert not list(tmp_path.glob("*.bak"))


def test_a_reading_opener_refuses_an_older_schema_and_names_migrate(tmp_path: Path):
    path = tmp_path / "x.db"
    build_old_store(path, 2)
    before = _sha(path)
    with pytest.raises(StoreError, match=rf"is at schema 2 and this s3gym reads schema {CURRENT}: "
                                         r"upgrade it with `s3gym migrate --db .*x.db`"):
        Store(path, migrate=False)
    assert _sha(path) == before and stored_version(path) == 2


def _holder(path: Path) -> subprocess.Popen:
    """Another process with the file open, as an older s3gym leaves it between two steps."""
    proc = subprocess.Popen(
        [sys.executable, "-c", "import sqlite3, sys, time\n"
         f"c = sqlite3.connect({str(path)!r}, isolation_level=None)\n"
         "c.execute('SELECT count(*) FROM runs').fetchone()\n"
         "print('open', flush=True)\n"
         "sys.stdin.readline()\n"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "open"
    return proc


def test_a_file_another_process_has_open_is_not_upgraded(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                         capsys: pytest.CaptureFixture):
    path = tmp_path / "x.db"
    old = build_old_store(path, 2)  # schema 2: no leases to ask
    monkeypatch.setattr(upgrade, "LOCK_WAIT_S", 0.2)
    holder = _holder(path)
    try:
        before = _sha(path)
        with pytest.raises(UpgradeRefused, match=r"while another process has it open .*the file is "
                                                 r"unchanged: stop that process .*`s3gym migrate --db "):
            Store(path)
        assert capsys.readouterr().err == ""
        assert _sha(path) == before and stored_version(path) == 2 and not list(tmp_path.glob("*.bak"))
    finally:
        holder.communicate("\n", timeout=30)
    with Store(path) as store:  # once it is gone
        assert store.schema_version == CURRENT
    assert _counts(tmp_path / "x.db.schema2.bak") == old


def test_a_live_lease_names_the_run_and_its_driver(tmp_path: Path):
    path = tmp_path / "x.db"
    build_old_store(path, 3)
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        conn = sqlite3.connect(path)
        conn.execute("INSERT INTO leases (run_id, token, pid, host, command, acquired_at, heartbeat_at) "
                     "VALUES (?, 't', ?, ?, 's3gym resume', '2026-01-01T00:00:00+00:00', ?)",
                     (RUN_ID, driver.pid, upgrade_host(), time.time()))
        conn.commit()
        conn.close()
        before = _sha(path)
        with pytest.raises(UpgradeRefused, match=rf"while run {RUN_ID} is being driven by PID "
                                                 rf"{driver.pid} \(s3gym resume\)"):
            Store(path)
        assert _sha(path) == before and stored_version(path) == 3
    finally:
        driver.kill()
        driver.wait()


@pytest.mark.parametrize("table,key,parent,what", [
    ("training_leases", "training_id", "INSERT INTO trainings (id, created_at) VALUES ('tr-1', '2026-01-01')", "training tr-1"),
    ("aspire_leases", "aspire_id", "INSERT INTO aspire_runs (id, goal_id, goal_text, model, protocol, created_at) "
     "VALUES ('asp-1', 'planning', 'plan', 'scripted', 'final', '2026-01-01')", "ASPIRE run asp-1"),
])
def test_a_live_training_or_aspire_lease_refuses_an_upgrade_too(tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
                                                                 table, key, parent, what):
    path = tmp_path / "x.db"
    with Store(path):
        pass
    driver = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA foreign_keys = OFF")
        conn.execute(parent)
        conn.execute(f"INSERT INTO {table} ({key}, token, pid, host, command, acquired_at, heartbeat_at) "
                     f"VALUES (?, 't', ?, ?, 's3gym x', '2026-01-01T00:00:00+00:00', ?)",
                     (what.rsplit(" ", 1)[-1], driver.pid, upgrade_host(), time.time()))
        conn.commit()
        conn.close()

        def _v_next(db) -> None:
            db.execute("CREATE TABLE later (x INTEGER)")

        monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, _v_next])
        before = _sha(path)
        with pytest.raises(UpgradeRefused, match=rf"while {what} is being driven by PID {driver.pid}"):
            Store(path)
        assert _sha(path) == before
    finally:
        driver.kill()
        driver.wait()


def upgrade_host() -> str:
    from s3gym_tui.store.leases import HOST

    return HOST


def test_nobody_else_reads_or_writes_while_the_upgrade_runs(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    path = tmp_path / "x.db"
    build_old_store(path, 2)
    seen: list[str] = []

    def peek(db: Database) -> None:  # appended: runs last, inside the upgrade's transaction
        probe = sqlite3.connect(path, timeout=0.1)
        try:
            probe.execute("SELECT count(*) FROM runs").fetchone()
            seen.append("read")
        except sqlite3.OperationalError as err:
            seen.append(str(err))
        finally:
            probe.close()

    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, peek])
    with Store(path):
        pass
    assert seen == ["database is locked"]
    probe = sqlite3.connect(path, timeout=0.1)  # and the lock is let go afterwards
    assert probe.execute("SELECT value FROM meta").fetchone() == (str(CURRENT + 1),)
    probe.close()


@pytest.mark.parametrize("content", [b"", None], ids=["zero-bytes", "sqlite-without-tables"])
def test_empty_files_are_refused_unless_creating(tmp_path: Path, content):
    path = tmp_path / "x.db"
    if content is None:
        conn = sqlite3.connect(path)
        conn.execute("PRAGMA user_version = 7")  # a valid SQLite file with no table
        conn.commit()
        conn.close()
    else:
        path.write_bytes(content)
    before = _sha(path)
    with pytest.raises(StoreError, match="empty file \\(0 bytes\\)|SQLite database with no tables"):
        Store(path, create=False)
    assert _sha(path) == before and sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]
    with Store(path) as created:  # what run, sweep and the app do
        assert created.schema_version == CURRENT and created.upgraded is None


def test_no_migration_may_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """All-or-nothing needs every migration to stay inside the upgrade's transaction: the real chain
    does, and one that commits is stopped and named."""
    conn = sqlite3.connect(tmp_path / "chain.db", isolation_level=None)
    db = Database(conn)
    conn.execute("BEGIN")
    for i, migration in enumerate(schema.MIGRATIONS):
        migration(db)
        assert conn.in_transaction, f"MIGRATIONS[{i}] ({migration.__name__}) committed"
    conn.execute("ROLLBACK")
    assert conn.execute("SELECT count(*) FROM sqlite_master").fetchone() == (0,)
    conn.close()

    def committing(db: Database) -> None:
        db.execute("CREATE TABLE early (x)")
        db.conn.execute("COMMIT")

    path = tmp_path / "x.db"
    build_old_store(path, 2)
    monkeypatch.setattr(schema, "MIGRATIONS", [*schema.MIGRATIONS, committing])
    with pytest.raises(StoreError, match=rf"migration to schema {CURRENT + 1} ended the upgrade's "
                                         r"transaction \(a migration must not COMMIT\)"):
        Store(path)
