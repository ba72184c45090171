"""A lease row as read from the leases table: who drives a run, and whether that driver is alive.

Kept apart from the lease records (store/leases.py) so that code reading leases without a Connection
(the upgrade's check for a live driver) needs nothing else of the store.
"""

from __future__ import annotations

import os
import socket
import time
from dataclasses import dataclass
from datetime import datetime
from typing import Optional

LEASE_TTL_S = 20.0  # a driver silent this long is gone
HEARTBEAT_S = 2.0  # how often a driver renews its lease

HOST = socket.gethostname()


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
    kind: str = "run"  # run | training | aspire (run_id then holds the training's or ASPIRE run's id)

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


def lease_from_row(row: tuple, kind: str = "run") -> Lease:
    return Lease(run_id=row[0], token=row[1], pid=int(row[2]), host=row[3], command=row[4],
                 acquired_at=row[5], heartbeat_at=float(row[6]), kind=kind)


LEASE_SELECT = "SELECT run_id, token, pid, host, command, acquired_at, heartbeat_at FROM leases"
