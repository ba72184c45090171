"""Keeping a run's lease alive while it is driven: a daemon thread with its own connection renews
the heartbeat, so a busy event loop (a long model call, a slow store) never lets the lease lapse."""

from __future__ import annotations

import threading
from typing import Callable, Optional

from s3gym_tui.store.leases import HEARTBEAT_S, Lease


class LeaseKeeper:
    """Renews `lease` every `interval` seconds; calls `on_lost()` once if another process took it."""

    def __init__(self, store, lease: Lease, on_lost: Callable[[], None],
                 interval: float = HEARTBEAT_S) -> None:
        self.path = store.path
        self.busy_timeout = store.busy_timeout
        self.store_type = type(store)
        self.lease = lease
        self.on_lost = on_lost
        self.interval = interval
        self.lost = False
        self._stop = threading.Event()
        self._thread: Optional[threading.Thread] = None

    def start(self) -> "LeaseKeeper":
        self._thread = threading.Thread(target=self._beat, name=f"lease-{self.lease.run_id}",
                                        daemon=True)
        self._thread.start()
        return self

    def _beat(self) -> None:
        from s3gym_tui.store import StoreError

        store = None
        try:
            store = self.store_type(self.path, check=False, busy_timeout=self.busy_timeout)
            while not self._stop.wait(self.interval):
                try:
                    if not store.renew_lease(self.lease):
                        self.lost = True
                        self.on_lost()
                        return
                except StoreError:
                    continue  # locked for a moment, a full disk: try again at the next beat
        except StoreError:
            return
        finally:
            if store is not None:
                store.close()

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=30)
