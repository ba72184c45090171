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
from s3gym_tui.store.repository import Repository
from s3gym_tui.store.errors import StoreError
from s3gym_tui.store.lease_row import (HEARTBEAT_S, HOST, LEASE_SELECT, LEASE_TTL_S, Lease,  # noqa: F401
                                       lease_from_row)


class RunBusy(StoreError):
    """The run is driven by another live process (one line: who and since when)."""


_lease = lease_from_row  # the names the store's other modules use
_SELECT = LEASE_SELECT
# kind -> (lease table, its key column, the table of what is driven)
_TABLES = {"run": ("leases", "run_id", "runs"), "training": ("training_leases", "training_id", "trainings"),
           "aspire": ("aspire_leases", "aspire_id", "aspire_runs")}
_SELECT_TRAINING = ("SELECT training_id, token, pid, host, command, acquired_at, heartbeat_at "
                    "FROM training_leases")
_SELECT_ASPIRE = "SELECT aspire_id, token, pid, host, command, acquired_at, heartbeat_at FROM aspire_leases"


class Leases(Repository):
    """Acquire, renew, read and release leases. Reads and writes `leases`, `training_leases`,
    `aspire_leases` (lease_row.py) and `experience_states` (a driven state); reads `runs`."""

    def acquire_lease(self, run_id: str, command: str = "") -> Lease:
        """Become the run's driver, or raise RunBusy naming the live driver."""
        now = time.time()
        lease = Lease(run_id, uuid.uuid4().hex, os.getpid(), HOST, " ".join(command.split())[:80],
                      utcnow(), now)
        with self._db._tx(f"take the lease of run {run_id!r}") as conn:
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

    def acquire_training_lease(self, training_id: str, command: str = "") -> Lease:
        """Become the driver of a training (its trainer and its evaluation), or raise RunBusy."""
        return self._acquire_kind("training", "training", training_id, command, "stop that process first")

    def acquire_aspire_lease(self, aspire_id: str, command: str = "") -> Lease:
        """Become the driver of an ASPIRE run (its controller), or raise RunBusy naming the live one."""
        return self._acquire_kind("aspire", "ASPIRE run", aspire_id, command,
                                  "follow it in the app, or stop that process first")

    def _acquire_kind(self, kind: str, what: str, key: str, command: str, busy_hint: str) -> Lease:
        """Take the lease of a training or an ASPIRE run (`kind` in _TABLES): refused while another live
        process holds it."""
        table, column, parent = _TABLES[kind]
        now = time.time()
        lease = Lease(key, uuid.uuid4().hex, os.getpid(), HOST, " ".join(command.split())[:80], utcnow(), now,
                      kind=kind)
        with self._db._tx(f"take the lease of {what} {key!r}") as conn:
            if not conn.execute(f"SELECT 1 FROM {parent} WHERE id = ?", (key,)).fetchone():
                raise StoreError(f"no {what} {key!r}")
            row = conn.execute(f"SELECT {column}, token, pid, host, command, acquired_at, heartbeat_at "
                               f"FROM {table} WHERE {column} = ?", (key,)).fetchone()
            held = None if row is None else _lease(row, kind)
            if held is not None and held.alive(now) and not held.mine:
                raise RunBusy(f"{what} {key} is being driven by {held.describe()}; {busy_hint}")
            conn.execute(f"INSERT OR REPLACE INTO {table} ({column}, token, pid, host, command, acquired_at, "
                         f"heartbeat_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                         (lease.run_id, lease.token, lease.pid, lease.host, lease.command, lease.acquired_at,
                          lease.heartbeat_at))
        return lease

    def aspire_lease(self, aspire_id: str) -> Optional[Lease]:
        """The ASPIRE run's lease row (alive or not), or None."""
        with self._db._reading("read an ASPIRE lease") as conn:
            row = conn.execute(_SELECT_ASPIRE + " WHERE aspire_id = ?", (aspire_id,)).fetchone()
        return None if row is None else _lease(row, "aspire")

    def live_aspire_leases(self) -> dict[str, Lease]:
        """ASPIRE run id -> lease, for every ASPIRE run driven right now."""
        with self._db._reading("read ASPIRE leases") as conn:
            rows = conn.execute(_SELECT_ASPIRE).fetchall()
        now = time.time()
        return {lease.run_id: lease for lease in (_lease(r, "aspire") for r in rows) if lease.alive(now)}

    def renew_lease(self, lease: Lease) -> bool:
        """Refresh the heartbeat; False if the lease was lost (taken over after expiring)."""
        table, key, _ = _TABLES[lease.kind]
        with self._db._tx(f"renew the lease of {lease.kind} {lease.run_id!r}") as conn:
            cur = conn.execute(f"UPDATE {table} SET heartbeat_at = ? WHERE {key} = ? AND token = ?",
                               (time.time(), lease.run_id, lease.token))
            return cur.rowcount == 1

    def release_lease(self, lease: Lease) -> None:
        table, key, _ = _TABLES[lease.kind]
        with self._db._tx(f"release the lease of {lease.kind} {lease.run_id!r}") as conn:
            conn.execute(f"DELETE FROM {table} WHERE {key} = ? AND token = ?", (lease.run_id, lease.token))

    def training_leases(self) -> dict[str, Lease]:
        """training id -> its lease row (alive or not)."""
        with self._db._reading("read training leases") as conn:
            rows = conn.execute(_SELECT_TRAINING).fetchall()
        return {lease.run_id: lease for lease in (_lease(r, "training") for r in rows)}

    def lease(self, run_id: str) -> Optional[Lease]:
        """The run's lease row (alive or not), or None."""
        with self._db._reading("read a lease") as conn:
            row = conn.execute(_SELECT + " WHERE run_id = ?", (run_id,)).fetchone()
        return None if row is None else _lease(row)

    def live_leases(self) -> dict[str, Lease]:
        """run id -> lease, for every run driven right now."""
        with self._db._reading("read leases") as conn:
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


ACTIVE_TRAINING = ("training", "evaluating")


def shown_training_status(status: str, lease: Optional[Lease]) -> str:
    """A training's status as a person should read it: 'interrupted' when it says it trains or
    evaluates but no live process drives it (killed, crashed), like a run (shown_status)."""
    alive = lease is not None and lease.alive()
    if status in ACTIVE_TRAINING and not alive:
        return "interrupted"
    if alive and status in ACTIVE_TRAINING:
        return f"{status} · PID {lease.pid}" if lease.host == HOST else f"{status} · {lease.host}"
    return status


def shown_study_status(status: str, leases: "list[Optional[Lease]]") -> str:
    """A study's status as a person should read it: a study holds its trainings' leases to its end,
    so one that says it trains or evaluates while none of its trainings' leases is alive was killed
    or crashed: 'interrupted', as for a training (shown_training_status)."""
    if status in ACTIVE_TRAINING and not any(lease is not None and lease.alive() for lease in leases):
        return "interrupted"
    return status
