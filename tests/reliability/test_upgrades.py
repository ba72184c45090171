"""Safe upgrades through the command line: reading commands leave an older file (and an empty one)
byte-identical, `s3gym migrate` and writing commands upgrade with a notice and a backup, and a
kill or a full disk during the upgrade leaves the original schema, readable by the older chain."""

from __future__ import annotations

import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest

from s3gym_tui.cli import main
from s3gym_tui.store import Store, schema, upgrade

from tests.reliability.support import dump, file_bytes, one_line
from tests.store.old_schema import RUN_ID, build_old_store, stored_version

ROOT = Path(__file__).resolve().parents[2]
CURRENT = schema.current_version()
READING = [["runs"], ["runs", "--json"], ["report"], ["audit"], ["sweeps"], ["trainings"], ["matrix"],
           ["export", RUN_ID], ["datasette-metadata"]]


def _old_chain_reads(path: Path, version: int, counts: dict[str, int]) -> None:
    """Whole, at `version`, every row there, and an s3gym whose chain ends at `version` reads it."""
    conn = sqlite3.connect(path)
    try:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        assert schema.stored_version(conn) == version
        tables = [r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
        assert {t: conn.execute(f'SELECT count(*) FROM "{t}"').fetchone()[0] for t in tables} == counts
    finally:
        conn.close()
    saved = schema.MIGRATIONS
    schema.MIGRATIONS = saved[:version]
    try:
        with Store(path, read_only=True) as old:
            assert old.runs.get_run(RUN_ID).note == "made by an older s3gym"
    finally:
        schema.MIGRATIONS = saved


@pytest.mark.parametrize("args", READING, ids=lambda a: " ".join(a))
def test_reading_commands_leave_an_older_file_alone_and_name_migrate(tmp_path, capsys, args):
    db = tmp_path / "x.db"
    build_old_store(db, 2)
    before, content = file_bytes(db), dump(db)
    assert main([*args, "--db", str(db)]) == 2
    line = " ".join(one_line(capsys.readouterr().err).split())
    assert f"{db} is at schema 2 and this s3gym reads schema {CURRENT}" in line
    assert f"`s3gym migrate --db {db}`" in line
    assert file_bytes(db) == before and dump(db) == content
    assert not list(tmp_path.glob("*.bak*"))


@pytest.mark.parametrize("args", READING, ids=lambda a: " ".join(a))
def test_reading_commands_refuse_a_zero_byte_file_and_leave_it_empty(tmp_path, capsys, args):
    db = tmp_path / "x.db"
    db.write_bytes(b"")
    assert main([*args, "--db", str(db)]) == 2
    line = one_line(capsys.readouterr().err)
    assert "is an empty file (0 bytes), not an s3gym database" in " ".join(line.split())
    assert db.read_bytes() == b"" and sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]


def test_migrate_upgrades_with_a_transcript_then_has_nothing_to_do(tmp_path, capsys):
    db = tmp_path / "x.db"
    old = build_old_store(db, 2, episodes=20)
    size = db.stat().st_size
    assert main(["migrate", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    backup = tmp_path / "x.db.schema2.bak"
    assert one_line(err) == (f"upgrading {db} from schema 2 to {CURRENT} (backup: {backup}, "
                             f"{upgrade.human_bytes(backup.stat().st_size)})")
    lines = out.strip().splitlines()
    assert lines[0].startswith(f"upgraded {db} from schema 2 to {CURRENT} in ")
    assert lines[1].startswith(f"size: {upgrade.human_bytes(size)} -> ")
    assert lines[2].startswith(f"backup: {backup} ({upgrade.human_bytes(backup.stat().st_size)}, schema 2")
    assert stored_version(db) == CURRENT and stored_version(backup) == 2
    _old_chain_reads(backup, 2, old)
    assert main(["migrate", "--db", str(db)]) == 0
    out, err = capsys.readouterr()
    assert out.strip() == f"{db} is at schema {CURRENT}, this s3gym's: nothing to upgrade" and err == ""
    assert main(["runs", "--db", str(db)]) == 0 and RUN_ID in capsys.readouterr().out


def test_migrate_no_backup_keeps_none(tmp_path, capsys):
    db = tmp_path / "x.db"
    build_old_store(db, 2)
    assert main(["migrate", "--db", str(db), "--no-backup"]) == 0
    out, err = capsys.readouterr()
    assert one_line(err) == f"upgrading {db} from schema 2 to {CURRENT} (no backup)"
    assert "backup: none (--no-backup)" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["x.db"]


def test_a_writing_command_upgrades_with_the_notice_first(tmp_path, capsys):
    db = tmp_path / "x.db"
    build_old_store(db, 2)
    assert main(["vacuum", "--db", str(db)]) == 0
    err = capsys.readouterr().err
    assert err.startswith(f"upgrading {db} from schema 2 to {CURRENT} (backup: {db}.schema2.bak, ")
    assert stored_version(db) == CURRENT and stored_version(tmp_path / "x.db.schema2.bak") == 2


_PAUSING_UPGRADE = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from s3gym_tui.store import Store, schema

def pause(db):  # after every real migration, inside the upgrade's one transaction
    db.execute("CREATE TABLE half_done (x)")
    db.execute("UPDATE runs SET note = 'half upgraded'")
    Path({marker!r}).write_text("paused")
    time.sleep(120)

schema.MIGRATIONS.append(pause)
Store({db!r})
"""


def test_a_kill_during_the_upgrade_leaves_the_original_schema(tmp_path):
    db = tmp_path / "x.db"
    old = build_old_store(db, 2, episodes=40, steps=10)
    marker = tmp_path / "paused"
    proc = subprocess.Popen([sys.executable, "-c", _PAUSING_UPGRADE.format(root=str(ROOT), marker=str(marker),
                                                                             db=str(db))],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 120
    while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.02)
    assert marker.exists(), proc.stderr.read() if proc.poll() is not None else "never paused"
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait(timeout=30)
    assert proc.returncode == -signal.SIGKILL
    _old_chain_reads(db, 2, old)  # schemas 3..6 had run in the killed transaction: none of it stays
    assert f"upgrading {db} from schema 2 to {CURRENT + 1}" in proc.stderr.read()  # it was said first
    _old_chain_reads(tmp_path / "x.db.schema2.bak", 2, old)
    with Store(db, notify=lambda line: None) as store:  # and today's s3gym upgrades it afterwards
        assert store.schema_version == CURRENT and store.runs.get_run(RUN_ID).note == "made by an older s3gym"
    assert sorted(p.name for p in tmp_path.glob("x.db.schema2*")) == ["x.db.schema2.bak"]  # the killed one's, reused


_KILLABLE_MIGRATE = """
import sys, time
from pathlib import Path
sys.path.insert(0, {root!r})
from s3gym_tui.cli import main
from s3gym_tui.store import schema

def pause(db):  # after every real migration, inside the upgrade's one transaction
    Path({marker!r}).write_text("paused")
    time.sleep(120)

schema.MIGRATIONS.append(pause)
sys.exit(main(["migrate", "--db", {db!r}]))
"""


def test_killed_migrates_leave_one_backup_not_one_each(tmp_path):
    """Each `s3gym migrate` killed after its backup left a new x.db.schema2-N.bak (8 MB each on a real
    file): a later attempt keeps the earlier backup, byte for byte its own copy, and says so; a file
    written since gets a backup of its own (the earlier one stays: it is a different state)."""
    db = tmp_path / "x.db"
    old = build_old_store(db, 2, episodes=40, steps=10)
    marker = tmp_path / "paused"
    for attempt in range(3):
        marker.unlink(missing_ok=True)
        proc = subprocess.Popen([sys.executable, "-c", _KILLABLE_MIGRATE.format(root=str(ROOT), marker=str(marker),
                                                                                 db=str(db))],
                                stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 120
        while not marker.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        assert marker.exists(), proc.stderr.read() if proc.poll() is not None else "never paused"
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        said = one_line(proc.stderr.read())
        assert sorted(p.name for p in tmp_path.glob("x.db.schema2*")) == ["x.db.schema2.bak"], attempt
        assert ("an earlier attempt's: the file has not changed since" in said) == (attempt > 0), said
        _old_chain_reads(db, 2, old)
    _old_chain_reads(tmp_path / "x.db.schema2.bak", 2, old)
    with sqlite3.connect(db) as conn:  # an s3gym of schema 2 writes to the file meanwhile
        conn.execute("UPDATE runs SET note = 'changed since'")
    conn.close()
    marker.unlink()
    proc = subprocess.run([sys.executable, "-m", "s3gym_tui", "migrate", "--db", str(db)], cwd=ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.glob("x.db.schema2*")) == ["x.db.schema2-2.bak", "x.db.schema2.bak"]
    assert "earlier attempt" not in proc.stderr and stored_version(db) == CURRENT
    _old_chain_reads(tmp_path / "x.db.schema2.bak", 2, old)  # the older state is kept as it was


@pytest.fixture
def small_disk(tmp_path):
    """A directory on a tmpfs of the given size (needs root and `mount`; else the test is skipped:
    the simulated ENOSPC tests of tests/store/test_upgrade.py cover the same paths everywhere)."""
    mounted: list[Path] = []

    def make(size_bytes: int) -> Path:
        where = tmp_path / f"disk{len(mounted)}"
        where.mkdir()
        if os.geteuid() != 0 or shutil.which("mount") is None:
            pytest.skip("mounting a small tmpfs needs root")
        done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size_bytes}", "tmpfs", str(where)],
                              capture_output=True, text=True, timeout=30)
        if done.returncode != 0:
            pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
        mounted.append(where)
        return where

    yield make
    for where in mounted:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, timeout=30)


def _old_file_on(disk: Path, tmp_path: Path) -> tuple[Path, dict[str, int]]:
    source = tmp_path / "made.db"
    counts = build_old_store(source, 2, episodes=60, steps=20, prompt_chars=2000)
    db = disk / "x.db"
    shutil.copyfile(source, db)
    return db, counts


def test_a_nearly_full_disk_is_refused_before_anything_is_written(tmp_path, small_disk, capsys):
    size = 5 * 1024 * 1024
    disk = small_disk(3 * size)
    db, counts = _old_file_on(disk, tmp_path)
    before = file_bytes(db)
    assert main(["vacuum", "--db", str(db)]) == 2  # a writing command, which upgrades on opening
    line = " ".join(one_line(capsys.readouterr().err).split())
    assert f"not enough free space to upgrade {db}: it needs about " in line and " is free" in line
    assert file_bytes(db) == before and sorted(p.name for p in disk.iterdir()) == ["x.db"]
    _old_chain_reads(db, 2, counts)


def test_a_disk_that_fills_up_during_the_upgrade_leaves_the_original(tmp_path, small_disk, capsys,
                                                                       monkeypatch):
    disk = small_disk(int(2.3 * 5 * 1024 * 1024))
    db, counts = _old_file_on(disk, tmp_path)
    assert 4_500_000 < db.stat().st_size < 5 * 1024 * 1024
    # the free-space estimate lets it start (as if something else filled the disk afterwards);
    # a writing command upgrades on opening as `s3gym migrate` does
    monkeypatch.setattr(upgrade, "GROWTH_FACTOR", 0.0, raising=False)
    assert main(["vacuum", "--db", str(db)]) == 2
    line = " ".join(one_line(capsys.readouterr().err.splitlines()[-1]).split())
    assert f"upgrading {db} from schema 2 to {CURRENT} failed (" in line and "full" in line
    assert f"unchanged at schema 2; the backup {disk / 'x.db.schema2.bak'} is kept" in line
    _old_chain_reads(db, 2, counts)
    _old_chain_reads(disk / "x.db.schema2.bak", 2, counts)


async def test_the_app_upgrades_an_older_file_with_a_notification(tmp_path):
    from s3gym_tui.app import S3GymApp
    from s3gym_tui.config import Settings

    db = tmp_path / "x.db"
    build_old_store(db, 2)
    app = S3GymApp(db_path=db, settings=Settings(default_model="scripted/trust", theme="dark"))
    async with app.run_test(size=(120, 40)) as pilot:
        await pilot.pause(0.2)
        notes = [(n.title, str(n.message)) for n in app._notifications]
        backup = tmp_path / "x.db.schema2.bak"
        assert notes == [("Database", f"upgrading {db} from schema 2 to {CURRENT} (backup: {backup}, "
                                      f"{upgrade.human_bytes(backup.stat().st_size)})")]
        assert app.store.runs.get_run(RUN_ID).note == "made by an older s3gym"
    assert stored_version(backup) == 2


def test_the_app_command_says_it_on_stderr_and_passes_it_to_the_app(tmp_path, capsys, monkeypatch):
    from s3gym_tui.app import S3GymApp

    db = tmp_path / "x.db"
    build_old_store(db, 2)
    from s3gym_tui.cli import misc

    handed: list[list[str]] = []
    monkeypatch.setattr(misc, "terminal_attached", lambda: True)  # as in a terminal
    monkeypatch.setattr(S3GymApp, "run", lambda self: handed.append(list(self._upgrade_notices)))
    assert main(["tui", "--db", str(db)]) == 0
    notice = one_line(capsys.readouterr().err)
    assert notice.startswith(f"upgrading {db} from schema 2 to {CURRENT} (backup: {db}.schema2.bak, ")
    assert handed == [[notice]]  # shown as a notification once the app is up
