"""Upgrading a store file of an older schema safely: refuse while another process has it open or
the disk is short, keep a backup (SQLite's online backup API), say so in one line, then run every
pending migration in one transaction (schema.migrate), so a failure or a kill leaves the old file.
An upgrade killed after its backup leaves that backup: the next attempt keeps it instead of a second
copy when it is byte for byte the new one (the file unchanged since), so repeated kills add nothing.

Free space. An upgrade needs room for the backup (the file plus its WAL: the backup is a copy of
the database as SQLite reads it) and for the migration's growth. The growth estimate is
GROWTH_FACTOR x (file + WAL): the migrations rebuild tables inside one transaction, so the new pages
are written to the WAL first and then copied into the file at the checkpoint, while the old pages
stay as free pages (`s3gym vacuum` returns them). Measured (benchmarks/upgrade.py) on schema-2 files
of 2 to 64 MB, mostly steps, upgraded to schema 6: peak growth 1.99 to 2.01 x the file (1.0 x left
after the checkpoint); the factor adds a quarter as margin. An estimate short of the truth is safe:
the upgrade then fails with "disk full" and the file stays at its schema.

Another process. The upgrade holds the file alone: before anything is written it takes SQLite's
exclusive lock (`PRAGMA locking_mode = EXCLUSIVE`) and keeps it until the upgrade is committed, so no
other process reads or writes meanwhile (they wait their busy timeout, then fail "locked"). If the
lock cannot be had within LOCK_WAIT_S, the upgrade is refused and the file is unchanged; a live
lease (schema 3 and later) names the run and PID. What is seen: every process that has a WAL file
open and has read from it (any s3gym, old or new, the app, Datasette), idle or not: such a
connection keeps a shared lock on the file. What is not seen: a file in rollback-journal mode (s3gym
always uses WAL) whose other users are idle between transactions, and processes on another machine
whose network file system does not pass locks on (SQLite does not support that anyway).
"""

from __future__ import annotations

import filecmp
import os
import re
import shutil
import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional

from s3gym_tui.store import schema
from s3gym_tui.store.errors import StoreError, one_line
from s3gym_tui.store.lease_row import lease_from_row

GROWTH_FACTOR = 2.5  # peak growth of the migrations, as a multiple of file + WAL (see above)
LOCK_WAIT_S = 2.0  # how long the upgrade waits for other processes to let go of the file


class UpgradeRefused(StoreError):
    """The file was left untouched: another process has it open, or the disk is too full."""


def human_bytes(n: float) -> str:
    """Bytes in the CLI's units (1 KB = 1,024 B), one decimal from KB on."""
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} TB"  # pragma: no cover


def _sidecar(path: Path, suffix: str) -> Path:
    return path.with_name(path.name + suffix)


def file_bytes(path: Path) -> int:
    """The database file plus its WAL, in bytes (what a backup copies and what grows)."""
    total = 0
    for part in (path, _sidecar(path, "-wal")):
        try:
            total += part.stat().st_size
        except OSError:
            pass
    return total


def backup_path(path: Path, version: int) -> Path:
    """`x.db.schema2.bak`, or `x.db.schema2-2.bak`, `-3`... when that name is taken (never replaced)."""
    n = 1
    while True:
        candidate = _sidecar(path, f".schema{version}{'' if n == 1 else f'-{n}'}.bak")
        if not candidate.exists():
            return candidate
        n += 1


def earlier_backups(path: Path, version: int) -> list[Path]:
    """The backups of schema `version` already beside the file (an upgrade that was killed or failed
    after its backup leaves one: the file is still at that schema)."""
    name = re.compile(re.escape(path.name) + rf"\.schema{version}(-[0-9]+)?\.bak")
    return sorted(p for p in path.parent.iterdir() if name.fullmatch(p.name))


@dataclass(frozen=True)
class Upgrade:
    """What an upgrade did: from and to which schema, the backup, time and sizes."""

    path: Path
    from_version: int
    to_version: int
    backup: Optional[Path]
    backup_bytes: Optional[int]
    bytes_before: int
    bytes_after: int = 0
    seconds: float = 0.0
    backup_reused: bool = False  # the backup is an earlier attempt's, byte for byte what a new one would be

    def notice(self) -> str:
        """The one line said before the migrations run."""
        reused = ", an earlier attempt's: the file has not changed since" if self.backup_reused else ""
        kept = (f"backup: {self.backup}, {human_bytes(self.backup_bytes or 0)}{reused}" if self.backup
                else "no backup")
        return (f"upgrading {self.path} from schema {self.from_version} to {self.to_version} "
                f"({kept})")

    def transcript(self) -> list[str]:
        """What `s3gym migrate` prints once it is done."""
        lines = [f"upgraded {self.path} from schema {self.from_version} to {self.to_version} "
                 f"in {self.seconds:.2f} s",
                 f"size: {human_bytes(self.bytes_before)} -> {human_bytes(self.bytes_after)} "
                 f"(file and WAL; `s3gym vacuum` returns free pages to the disk)"]
        if self.backup is not None:
            lines.append(f"backup: {self.backup} ({human_bytes(self.backup_bytes or 0)}, schema "
                         f"{self.from_version}; an s3gym of that schema opens it)")
        else:
            lines.append("backup: none (--no-backup)")
        return lines


def space_needed(path: Path, backup: bool) -> tuple[int, int]:
    """(bytes for the backup, bytes the migration may grow by): see the module docstring."""
    size = file_bytes(path)
    return (size if backup else 0), int(size * GROWTH_FACTOR)


def check_space(path: Path, backup: bool,
                free_bytes: Callable[[Path], int] = lambda p: shutil.disk_usage(p).free) -> None:
    """Refuse, naming what is needed and what is free, when the disk cannot hold the upgrade."""
    for_backup, growth = space_needed(path, backup)
    try:
        free = free_bytes(path.parent)
    except OSError as err:
        raise UpgradeRefused(f"cannot upgrade {path}: cannot measure free space "
                             f"({err.strerror or err}); the file is unchanged") from err
    if free < for_backup + growth:
        parts = (f"{human_bytes(for_backup)} for the backup and {human_bytes(growth)} for the "
                 f"migration" if backup else f"{human_bytes(growth)} for the migration")
        raise UpgradeRefused(f"not enough free space to upgrade {path}: it needs about "
                             f"{human_bytes(for_backup + growth)} ({parts}), "
                             f"{human_bytes(free)} is free; the file is unchanged")


# every lease table (by the schema that added it) and what its key names
_LEASE_TABLES = (("leases", "run_id", "run"), ("training_leases", "training_id", "training"),
                 ("aspire_leases", "aspire_id", "ASPIRE run"))


def _lease_holder(conn: sqlite3.Connection) -> Optional[str]:
    """Who drives a run, a training or an ASPIRE run right now, from the lease tables the file has
    (schema 3 and later), or None."""
    tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    now = time.time()
    for table, key, what in _LEASE_TABLES:
        if table not in tables:
            continue
        try:
            rows = conn.execute(f"SELECT {key}, token, pid, host, command, acquired_at, heartbeat_at "
                                f"FROM {table}").fetchall()
        except sqlite3.OperationalError:  # a lease table of another shape: not ours to judge
            continue
        for row in rows:
            try:
                lease = lease_from_row(row)
            except (TypeError, ValueError):
                continue
            if lease.alive(now):
                return f"{what} {lease.run_id} is being driven by {lease.describe()}"
    return None


def hold_alone(conn: sqlite3.Connection, path: Path, found: int,
               wait_s: Optional[float] = None) -> None:
    """Take the file for `conn` alone until release() (nothing is written), or refuse naming who
    has it (a live lease) or saying that another process has it open."""
    target = schema.current_version()
    advice = (f"the file is unchanged: stop that process (or let it finish), then run "
              f"`s3gym migrate --db {path}`")
    holder = _lease_holder(conn)
    if holder:
        raise UpgradeRefused(f"cannot upgrade {path} from schema {found} to {target} while {holder}; "
                             f"{advice}")
    timeout_ms = conn.execute("PRAGMA busy_timeout").fetchone()[0]
    wait_s = LOCK_WAIT_S if wait_s is None else wait_s
    conn.execute(f"PRAGMA busy_timeout = {int(wait_s * 1000)}")
    conn.execute("PRAGMA locking_mode = EXCLUSIVE")
    try:
        conn.execute("BEGIN EXCLUSIVE")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # the lock is taken here
        conn.execute("COMMIT")  # ends the transaction; exclusive locking mode keeps the lock
    except sqlite3.OperationalError as err:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        release(conn)
        if "locked" in str(err) or "busy" in str(err):
            raise UpgradeRefused(f"cannot upgrade {path} from schema {found} to {target} while "
                                 f"another process has it open (an s3gym run or app, Datasette...); "
                                 f"{advice}") from err
        raise
    finally:
        conn.execute(f"PRAGMA busy_timeout = {int(timeout_ms)}")


def release(conn: sqlite3.Connection) -> None:
    """Back to normal locking: the exclusive lock goes at the next read."""
    try:
        conn.execute("PRAGMA locking_mode = NORMAL")
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()
    except sqlite3.Error:
        pass


def _make_backup(conn: sqlite3.Connection, path: Path, version: int) -> tuple[Path, int, bool]:
    """Copy the database with SQLite's online backup API to a new `x.db.schemaN.bak`, checked
    readable. `conn` holds the file alone (hold_alone) and has no transaction open (a connection in
    a write transaction cannot be a backup's source), so the copy is exactly what is upgraded. When an
    earlier backup of this schema is byte for byte the same copy (an upgrade killed after its backup,
    the file unchanged since), the new copy is dropped and that one kept: (backup, bytes, reused)."""
    target = backup_path(path, version)
    part = _sidecar(target, ".part")
    for leftover in (part, _sidecar(part, "-journal")):  # a backup killed half-way: ours to remove
        leftover.unlink(missing_ok=True)
    dest = sqlite3.connect(part, isolation_level=None)
    try:
        conn.backup(dest)
        dest.execute("PRAGMA journal_mode = DELETE")  # one self-contained file, no -wal beside it
        rows = dest.execute("PRAGMA quick_check").fetchall()
        if rows != [("ok",)] or schema.stored_version(dest) != version:
            raise StoreError(f"the copy does not read back ({rows[0][0]})")
    except BaseException:
        dest.close()
        for leftover in (part, _sidecar(part, "-journal")):  # a half copy is no backup
            leftover.unlink(missing_ok=True)
        raise
    dest.close()
    for earlier in earlier_backups(path, version):
        if filecmp.cmp(part, earlier, shallow=False):
            part.unlink()
            return earlier, earlier.stat().st_size, True
    while True:
        try:
            os.link(part, target)  # never replaces an existing file
            part.unlink()
            break
        except FileExistsError:  # taken meanwhile: the next free name
            target = backup_path(path, version)
        except OSError:  # a file system without hard links
            os.replace(part, target)
            break
    try:
        fd = os.open(target.parent, os.O_RDONLY)  # the directory entry is durable too
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    except OSError:
        pass
    return target, target.stat().st_size, False


def upgrade(conn: sqlite3.Connection, db, path: Path, found: int, *, backup: bool = True,
            notify: Optional[Callable[[str], None]] = None) -> Upgrade:
    """Upgrade the file behind `conn` (open, writable, no transaction) from schema `found`: check
    the free space, hold the file alone, back it up, say so, then run every pending migration in
    one transaction. Returns what was done. Raises UpgradeRefused (file untouched) or a StoreError
    naming the upgrade (the file left at schema `found`)."""
    target = schema.current_version()
    check_space(path, backup)
    hold_alone(conn, path, found)
    report: Optional[Upgrade] = None
    try:
        started = time.monotonic()
        before = file_bytes(path)
        try:
            copy, size, reused = _make_backup(conn, path, found) if backup else (None, None, False)
        except (sqlite3.Error, OSError, StoreError) as err:
            raise StoreError(f"cannot upgrade {path}: its backup failed ({_why(err)}); the file is "
                             f"unchanged at schema {found}") from err
        report = Upgrade(path, found, target, copy, size, before, backup_reused=reused)
        (notify or _stderr)(report.notice())
        schema.migrate(db, path)
        try:
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")  # fold the migration's WAL back now
        except sqlite3.Error:
            pass
        return Upgrade(path, found, target, copy, size, before, file_bytes(path),
                       time.monotonic() - started, backup_reused=reused)
    except (sqlite3.Error, OSError, StoreError) as err:
        if report is None:
            raise
        kept = f"; the backup {report.backup} is kept" if report.backup else ""
        raise StoreError(f"upgrading {path} from schema {found} to {target} failed ({_why(err)}); the "
                         f"file is unchanged at schema {found}{kept}") from err
    finally:
        release(conn)


def _why(err: BaseException) -> str:
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return one_line(err)


def _stderr(line: str) -> None:
    import sys

    from s3gym_tui.textgate import safe

    print(safe(line, one_line=True), file=sys.stderr, flush=True)
