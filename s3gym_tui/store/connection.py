"""Opening an s3gym store file safely, its transactions and one-line errors (base of Store).

Threads: a Store wraps one sqlite3 connection, and a connection belongs to the thread that opened
it. Each thread (a Textual thread worker, a CLI worker) opens its own Store on the same file:
`Store(path)` (the full-file integrity check runs once per file per process), or
`store.for_thread()`. Opening is cheap (under a millisecond); close it with `close()` (or use it as
a context manager). Writers in different threads or processes serialise on SQLite's write lock:
each write is one short `BEGIN IMMEDIATE` transaction and a blocked writer waits up to
`busy_timeout` seconds instead of failing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import stat
import threading
import time
import uuid
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator, Optional, Self, Sequence

import platformdirs
from sqlite_utils import Database

from s3gym_tui.models import EVAL_SEED_BASE
from s3gym_tui.store import schema, upgrade
from s3gym_tui.store.errors import LeakageError, StoreError, one_line

ENV_VAR = "S3GYM_DB"
# New files use 1 KiB pages (SQLite's default is 4 KiB). Every table and index takes at least a page
# and a store has over a hundred of them, most empty until their feature is used (464 KB at 4 KiB);
# a step's row (about 1.4 KB) keeps its first part in the table's page and its tail in an overflow
# page filled to the byte. The scripted Tetris probe of benchmarks/store.py: 3,456 -> 2,221 bytes a
# step, index included; prompt and episode reads as fast (docs/database.md, Pages). Files made before keep
# their page size until `s3gym vacuum` rewrites them (Hygiene.vacuum, when it has the file alone).
PAGE_SIZE = 1024


def default_db_path() -> Path:
    """$S3GYM_DB if set, else `s3gym.db` in the platform's user data directory."""
    override = os.environ.get(ENV_VAR, "").strip()
    if override:
        return Path(override).expanduser()
    return platformdirs.user_data_path("s3gym", appauthor=False) / "s3gym.db"


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _insert_sql(table: str, cols: Sequence[str]) -> str:
    return (f"INSERT INTO {_q(table)} ({', '.join(_q(c) for c in cols)}) "
            f"VALUES ({', '.join('?' for _ in cols)})")


def _is_eval(phase: Any, mode: Any, seed: Any) -> bool:
    """Conservative: an episode is evaluation data if its phase, mode or seed says so."""
    return phase == "eval" or mode == "eval" or (isinstance(seed, int) and seed >= EVAL_SEED_BASE)


def _writable(path: Path) -> bool:
    """False when the file has no write permission bits or this process cannot write it."""
    try:
        mode = path.stat().st_mode
    except OSError:
        return False
    return bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH)) and os.access(path, os.W_OK)


# Files this process has already integrity-checked, by (path, device, inode): PRAGMA quick_check
# reads the whole file (about 0.2 s for 200 MB), so it runs once per file per process, not per
# thread. A damaged page met later still surfaces as a StoreError ("... is corrupt").
_CHECKED: set[tuple[str, int, int]] = set()
_CHECKED_LOCK = threading.Lock()


def _file_key(path: Path) -> Optional[tuple[str, int, int]]:
    try:
        st = path.stat()
        return (str(path.resolve()), st.st_dev, st.st_ino)
    except OSError:
        return None


def _new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:12]}"


class Connection:
    """One connection to a store file: safe opening, transactions, error wrapping and
    the leakage look-ups shared by the repositories of Store."""

    def __init__(self, path: str | os.PathLike[str] | None = None, *, read_only: bool = False,
                 check: bool = True, busy_timeout: float = 10.0, create: bool = True,
                 migrate: bool = True, backup: bool = True,
                 notify: Optional[Callable[[str], None]] = None) -> None:
        """Open (or create) the store at `path` (default: default_db_path()).

        read_only: open for reading only (also chosen when the file is not writable).
        check: run PRAGMA quick_check on an existing file, once per file per process.
        busy_timeout: seconds a writer waits for another writer's lock before StoreError.
        create: make a store where there is no file, an empty (0-byte) one, or an SQLite file with
        no tables; False refuses them (a reading command never turns a typo into a store).
        migrate: upgrade a file of an older schema (store/upgrade.py: refused while another process
        has it open or the disk is short; a backup `x.db.schemaN.bak` unless `backup` is False; one
        transaction); False refuses it with a line naming `s3gym migrate`.
        notify: receives the one-line notice of an upgrade (default: stderr); `upgraded` says
        what was done (None when nothing was upgraded).
        Raises StoreError, leaving the file untouched, if it is not SQLite, is corrupt, is not
        an s3gym store, or was written by a newer s3gym.
        """
        self.path = Path(path).expanduser() if path is not None else default_db_path()
        self.busy_timeout = float(busy_timeout)
        self.conn: Optional[sqlite3.Connection] = None
        self.upgraded: Optional[upgrade.Upgrade] = None
        existing = self._inspect_file()
        self.read_only = bool(read_only) or (existing and not _writable(self.path))
        if not existing:
            if not create:
                raise StoreError(self._absent_message())
            if self.read_only:
                raise StoreError(f"no s3gym database at {self.path} (opened read-only)")
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
            except OSError as err:
                raise StoreError(f"cannot create {self.path.parent}: {err.strerror or err}") from err
        self.immutable = False
        try:
            self.conn = self._connect()
            found = 0
            if existing:
                try:
                    found = self._check_file(check)  # reads only: a refused file is left byte-identical
                except sqlite3.OperationalError as err:
                    if not (self.read_only and "unable to open" in str(err)
                            and self._open_read_only_media()):
                        raise
                    found = self._check_file(check)
                self._refuse_unless_usable(found, create=create, migrate=migrate)
            self.conn.execute("PRAGMA foreign_keys = ON")
            self.db = Database(self.conn, execute_plugins=False)
            if not self.read_only:
                if not existing:  # before the first write: a file's page size is set then
                    self.conn.execute(f"PRAGMA page_size = {PAGE_SIZE}")
                if 0 < found < schema.current_version():  # refusals write nothing: before WAL
                    self.upgraded = upgrade.upgrade(self.conn, self.db, self.path, found,
                                                    backup=backup, notify=notify)
                self._retry_busy(self.db.enable_wal)
                self.conn.execute("PRAGMA synchronous = NORMAL")  # durable in WAL across app crashes
                self.schema_version = self._retry_busy(lambda: schema.migrate(self.db, self.path))
        except StoreError:
            self._close_quietly()
            raise
        except sqlite3.Error as err:
            self._close_quietly()
            raise self._wrap(err, f"open {self.path}") from err
        except BaseException:
            self._close_quietly()
            raise

    # ------------------------------------------------------------------ opening and closing

    def _inspect_file(self) -> bool:
        """True if a non-empty file exists; refuse at once a directory or a special file.

        Only stat(): the file is never opened outside SQLite. Closing *any* descriptor of a
        database file drops every POSIX lock the process holds on it, so a header check with
        open()/close() while another connection of this process is open lets another process
        delete the live -wal and -shm files under it (SQLite's "How To Corrupt An SQLite
        Database File", section 2.2). Whether the content is SQLite is asked of SQLite itself
        (_check_file), which shares one descriptor per file among a process's connections."""
        try:
            info = self.path.stat()
        except FileNotFoundError:
            return False
        except ValueError as err:  # e.g. an embedded NUL byte in the path
            raise StoreError(f"{self.path!r} is not a usable database path ({err})") from err
        except OSError as err:
            raise StoreError(f"cannot read {self.path}: {err.strerror or err}") from err
        if stat.S_ISDIR(info.st_mode):
            raise StoreError(f"{self.path} is a directory, not an s3gym database")
        if not stat.S_ISREG(info.st_mode):
            raise StoreError(f"{self.path} is not a regular file, not an s3gym database")
        return info.st_size > 0  # an empty file is an empty database

    def _retry_busy(self, action):
        """Run `action`, retrying for up to busy_timeout while SQLite answers "locked" without
        waiting (switching a fresh file to WAL, or two openers racing to create the schema: SQLite
        skips its busy handler there to avoid a deadlock)."""
        deadline = time.monotonic() + self.busy_timeout
        delay = 0.005
        while True:
            try:
                return action()
            except sqlite3.OperationalError as err:
                if "locked" not in str(err) or time.monotonic() >= deadline:
                    raise
                if self.conn is not None and self.conn.in_transaction:
                    self.conn.execute("ROLLBACK")
                time.sleep(delay)
                delay = min(delay * 2, 0.2)

    def _connect(self, immutable: bool = False) -> sqlite3.Connection:
        if self.read_only:
            query = "?immutable=1" if immutable else "?mode=ro"
            target, uri = self.path.resolve().as_uri() + query, True
        else:
            target, uri = str(self.path), False
        # isolation_level=None: no implicit transactions; every write below says BEGIN IMMEDIATE.
        # check_same_thread stays on: one connection per thread (see the module docstring).
        return sqlite3.connect(target, uri=uri, timeout=self.busy_timeout, isolation_level=None)

    def _open_read_only_media(self) -> bool:
        """A WAL database on read-only media (no -shm, and none can be created): SQLite can read it
        only as immutable, which is exact when there is no -wal holding uncheckpointed pages."""
        wal = Path(str(self.path) + "-wal")
        try:
            if wal.exists() and wal.stat().st_size > 0:
                return False
        except OSError:
            return False
        self._close_quietly()
        self.conn = self._connect(immutable=True)
        self.immutable = True
        return True

    def _check_file(self, integrity: bool) -> int:
        """The file's schema version, after the integrity check; StoreError if it is not ours."""
        assert self.conn is not None
        key = _file_key(self.path)
        try:
            if integrity and key not in _CHECKED:
                rows = self.conn.execute("PRAGMA quick_check").fetchall()
                if rows != [("ok",)]:
                    raise StoreError(f"{self.path} is corrupt (quick_check: {rows[0][0]}); "
                                     f"left untouched")
                if key is not None:
                    with _CHECKED_LOCK:
                        _CHECKED.add(key)
            found = schema.stored_version(self.conn)
        except sqlite3.OperationalError:
            raise  # locked, cannot open, ...: not a verdict on the file's content
        except sqlite3.DatabaseError as err:
            if getattr(err, "sqlite_errorname", "") == "SQLITE_NOTADB":
                raise StoreError(f"{self.path} is not an SQLite database (left untouched)") from err
            raise StoreError(f"{self.path} is corrupt ({one_line(err)}); left untouched") from err
        if found is None:
            raise StoreError(f"{self.path} is an SQLite database but not an s3gym store")
        if found > schema.current_version():
            raise StoreError(schema.newer_message(self.path, found))
        self.schema_version = found
        return found

    def _absent_message(self) -> str:
        try:
            if self.path.stat().st_size == 0:
                return (f"{self.path} is an empty file (0 bytes), not an s3gym database (left "
                        f"untouched; `s3gym run`, `s3gym sweep` or the app create a store)")
        except OSError:
            pass
        return f"no s3gym database at {self.path}"

    def _refuse_unless_usable(self, found: int, *, create: bool, migrate: bool) -> None:
        """Refuse, before anything is written, a file this opening may not turn into a store of
        today's schema: an SQLite file with no tables (unless creating), an older schema when
        upgrading is not allowed here or the file is read-only."""
        current = schema.current_version()
        if found == 0 and (not create or self.read_only):
            raise StoreError(f"{self.path} is an SQLite database with no tables, not an s3gym "
                             f"store (left untouched)")
        if 0 < found < current and self.read_only:
            raise StoreError(f"{self.path} is at schema {found} (this s3gym reads {current}) and is "
                             f"read-only: upgrade it where it is writable, with `s3gym migrate "
                             f"--db {self.path}`; the file is unchanged")
        if 0 < found < current and not migrate:
            raise StoreError(f"{self.path} is at schema {found} and this s3gym reads schema "
                             f"{current}: upgrade it with `s3gym migrate --db {self.path}` (a "
                             f"backup is kept); reading commands leave it unchanged")

    def for_thread(self) -> Self:
        """A new Store on the same file for another thread (its own connection, no re-check)."""
        return type(self)(self.path, read_only=self.read_only, check=False,
                     busy_timeout=self.busy_timeout)

    def _close_quietly(self) -> None:
        if self.conn is not None:
            try:
                self.conn.close()
            except sqlite3.Error:
                pass

    def close(self) -> None:
        """Close the connection (idempotent)."""
        if self.conn is not None:
            self._close_quietly()
            self.conn = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"{type(self).__name__}({str(self.path)!r}{', read_only=True' if self.read_only else ''})"

    # ------------------------------------------------------------------ transactions and errors

    def _wrap(self, err: BaseException, what: str) -> StoreError:
        msg = one_line(err)
        low = msg.lower()
        if "locked" in low or "busy" in low:
            text = (f"database {self.path} is locked by another writer (waited "
                    f"{self.busy_timeout:g} s); cannot {what}")
        elif "disk is full" in low or "database or disk is full" in low:
            text = f"disk full: cannot {what} in {self.path}"
        elif "readonly" in low or "read-only" in low:
            text = f"database {self.path} is read-only: cannot {what}"
        elif "closed database" in low:
            text = f"store {self.path} is closed: cannot {what}"
        elif "thread" in low and isinstance(err, sqlite3.ProgrammingError):
            text = (f"store {self.path} was opened in another thread: open one Store per thread "
                    f"(Store.for_thread()); cannot {what}")
        elif "malformed" in low or "not a database" in low:
            text = f"database {self.path} is corrupt ({msg}): cannot {what}"
        elif "i/o error" in low:
            text = f"disk I/O error on {self.path}: cannot {what}"
        else:
            text = f"cannot {what}: {msg}"
        return StoreError(text)

    def _live(self, what: str) -> sqlite3.Connection:
        if self.conn is None:
            raise StoreError(f"store {self.path} is closed: cannot {what}")
        return self.conn

    @contextmanager
    def _tx(self, what: str) -> Iterator[sqlite3.Connection]:
        """One write transaction (BEGIN IMMEDIATE: take the write lock first, wait if busy)."""
        conn = self._live(what)
        if self.read_only:
            raise StoreError(f"database {self.path} is open read-only: cannot {what}")
        if conn.in_transaction:  # nested: part of the caller's transaction
            yield conn
            return
        try:
            conn.execute("BEGIN IMMEDIATE")
        except sqlite3.Error as err:
            raise self._wrap(err, what) from err
        try:
            yield conn
            conn.execute("COMMIT")
        except BaseException as err:
            try:
                if conn.in_transaction:
                    conn.execute("ROLLBACK")
            except sqlite3.Error:
                pass
            if isinstance(err, sqlite3.Error):
                raise self._wrap(err, what) from err
            if isinstance(err, UnicodeEncodeError):  # a lone surrogate cannot be stored as UTF-8
                raise StoreError(f"cannot {what}: the text is not valid Unicode "
                                 f"({err.reason} at position {err.start}); nothing was stored") from err
            raise

    @contextmanager
    def snapshot(self, what: str = "read a consistent snapshot") -> Iterator[Self]:
        """Every read inside sees one consistent state of the file (one read transaction), however
        many statements it takes and whatever other processes commit meanwhile. Nests."""
        conn = self._live(what)
        if conn.in_transaction:
            yield self
            return
        try:
            conn.execute("BEGIN")
        except sqlite3.Error as err:
            raise self._wrap(err, what) from err
        try:
            yield self
        finally:
            try:
                if conn.in_transaction:
                    conn.execute("COMMIT" if not self.read_only else "ROLLBACK")
            except sqlite3.Error:
                pass

    @contextmanager
    def _reading(self, what: str) -> Iterator[sqlite3.Connection]:
        conn = self._live(what)
        try:
            yield conn
        except sqlite3.Error as err:
            raise self._wrap(err, what) from err

    # ------------------------------------------------------------------ held-out guard

    def _phases(self, conn: sqlite3.Connection, ids: Iterable[str]) -> dict[str, tuple]:
        """id -> (phase, mode, seed) for the given episode ids that exist."""
        ids = list(dict.fromkeys(ids))
        if not ids:
            return {}
        cursor = conn.execute(
            "SELECT id, phase, mode, seed FROM episodes WHERE id IN "
            "(SELECT value FROM json_each(?))", (json.dumps(ids),))
        return {r[0]: (r[1], r[2], r[3]) for r in cursor.fetchall()}

    def _require_experience(self, conn: sqlite3.Connection, ids: Sequence[str], role: str,
                            user: str) -> None:
        """Every id must exist and be exploration data, else StoreError / LeakageError."""
        found = self._phases(conn, ids)
        missing = [i for i in ids if i not in found]
        if missing:
            raise StoreError(f"{user}: unknown {role} episode {missing[0]!r}")
        leaked = [i for i in ids if _is_eval(*found[i])]
        if leaked:
            raise LeakageError(f"{user}: evaluation episode {leaked[0]!r} cannot be a {role} "
                               f"(held-out data never becomes experience)")
