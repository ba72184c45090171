"""One driver per run: a lease row names the process driving a run and is renewed by a heartbeat.

A lease is alive while its heartbeat is fresh (LEASE_TTL_S) and, on this host, its process exists.
A run whose lease is dead (kill -9, a crash, a frozen machine) can be resumed by anyone; a live one
is refused with a line saying who drives it. Taking over a dead lease and renewing one are single
write transactions, so two processes never both believe they drive a run.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Optional

from s3gym_tui.models import utcnow
from s3gym_tui.store.connection import Connection
from s3gym_tui.store.errors import StoreError

LEASE_TTL_S = 20.0  # a driver silent this long is gone
HEARTBEAT_S = 2.0  # how often a driver renews its lease

HOST = socket.gethostname()


class RunBusy(StoreError):
    """The run is driven by another live process (one line: who and since when)."""


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by another user
        return True
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class Lease:
    run_id: str
    token: str
    pid: int
    host: str
    command: str
    acquired_at: str
    heartbeat_at: float  # unix time of the last renewal

    def alive(self, now: Optional[float] = None, ttl: float = LEASE_TTL_S) -> bool:
        """Fresh heartbeat and, when the driver is on this host, its process still exists."""
        now = time.time() if now is None else now
        if now - self.heartbeat_at > ttl:
            return False
        return _pid_alive(self.pid) if self.host == HOST else True

    @property
    def mine(self) -> bool:
        return self.host == HOST and self.pid == os.getpid()

    def since(self) -> str:
        """The start time as local 'YYYY-MM-DD HH:MM:SS'."""
        try:
            stamp = datetime.fromisoformat(self.acquired_at).astimezone()
        except ValueError:
            return self.acquired_at[:19]
        return stamp.strftime("%Y-%m-%d %H:%M:%S")

    def describe(self) -> str:
        where = "" if self.host == HOST else f" on {self.host}"
        what = f" ({self.command})" if self.command else ""
        return f"PID {self.pid}{where}{what} since {self.since()}"


def _lease(row: tuple) -> Lease:
    return Lease(run_id=row[0], token=row[1], pid=int(row[2]), host=row[3], command=row[4],
                 acquired_at=row[5], heartbeat_at=float(row[6]))


_SELECT = "SELECT run_id, token, pid, host, command, acquired_at, heartbeat_at FROM leases"


class LeaseRecords(Connection):
    """Acquire, renew, read and release run leases."""

    def acquire_lease(self, run_id: str, command: str = "") -> Lease:
        """Become the run's driver, or raise RunBusy naming the live driver."""
        now = time.time()
        lease = Lease(run_id, uuid.uuid4().hex, os.getpid(), HOST, " ".join(command.split())[:80],
                      utcnow(), now)
        with self._tx(f"take the lease of run {run_id!r}") as conn:
            if not conn.execute("SELECT 1 FROM runs WHERE id = ?", (run_id,)).fetchone():
                raise StoreError(f"no run {run_id!r}")
            row = conn.execute(_SELECT + " WHERE run_id = ?", (run_id,)).fetchone()
            if row is not None and _lease(row).alive(now):
                held = _lease(row)
                raise RunBusy(f"run {run_id} is being driven by {held.describe()}; follow it in "
                              f"the app, or stop that process first")
            conn.execute("INSERT OR REPLACE INTO leases (run_id, token, pid, host, command, "
                         "acquired_at, heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (lease.run_id, lease.token, lease.pid, lease.host, lease.command,
                          lease.acquired_at, lease.heartbeat_at))
            # A state whose summary the previous driver never fixed was used by nothing: the new
            # driver begins it afresh, so curation done meanwhile reaches it (see begin_state).
            conn.execute("DELETE FROM experience_states WHERE run_id = ? AND x > 0 AND "
                         "summary_id IS NULL", (run_id,))
        return lease

    def renew_lease(self, lease: Lease) -> bool:
        """Refresh the heartbeat; False if the lease was lost (taken over after expiring)."""
        with self._tx(f"renew the lease of run {lease.run_id!r}") as conn:
            cur = conn.execute("UPDATE leases SET heartbeat_at = ? WHERE run_id = ? AND token = ?",
                               (time.time(), lease.run_id, lease.token))
            return cur.rowcount == 1

    def release_lease(self, lease: Lease) -> None:
        with self._tx(f"release the lease of run {lease.run_id!r}") as conn:
            conn.execute("DELETE FROM leases WHERE run_id = ? AND token = ?",
                         (lease.run_id, lease.token))

    def lease(self, run_id: str) -> Optional[Lease]:
        """The run's lease row (alive or not), or None."""
        with self._reading("read a lease") as conn:
            row = conn.execute(_SELECT + " WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else _lease(row)

    def live_leases(self) -> dict[str, Lease]:
        """run id -> lease, for every run driven right now."""
        with self._reading("read leases") as conn:
            rows = conn.execute(_SELECT).fetchall()
        now = time.time()
        return {lease.run_id: lease for lease in map(_lease, rows) if lease.alive(now)}


def shown_status(status: str, lease: Optional[Lease]) -> str:
    """A run's status as a person should read it: who drives a running run, and 'interrupted'
    for a run marked running whose driver is gone (killed, crashed, the machine stopped)."""
    if lease is not None and lease.alive():
        return f"running · PID {lease.pid}" if lease.host == HOST else f"running · {lease.host}"
    if status == "running":
        return "interrupted"
    return status
