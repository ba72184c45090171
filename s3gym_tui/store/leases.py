"""One driver per run: a lease row names the process driving a run and is renewed by a heartbeat.

A lease is alive while its heartbeat is fresh (LEASE_TTL_S) and, on this host, its process exists.
A run whose lease is dead (kill -9, a crash, a frozen machine) can be resumed by anyone; a live one
is refused with a line saying who drives it. Taking over a dead lease and renewing one are single
write transactions, so two processes never both believe they drive a run.
"""

from __future__ import annotations

import os
import time
import uuid
from typing import Optional

from s3gym_tui.models import utcnow
from s3gym_tui.store.connection import Connection
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.lease_row import (HEARTBEAT_S, HOST, LEASE_SELECT, LEASE_TTL_S, Lease,  # noqa: F401
                                       lease_from_row)


class RunBusy(StoreError):
    """The run is driven by another live process (one line: who and since when)."""


_lease = lease_from_row  # the names the store's other modules use
_SELECT = LEASE_SELECT


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
