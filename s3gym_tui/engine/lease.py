"""Keeping a run's lease alive while it is driven: a daemon thread with its own connection renews
the heartbeat, so a busy event loop (a long model call, a slow store) never lets the lease lapse."""

from __future__ import annotations

import contextlib
import threading
from typing import Callable, Iterator, Optional

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
                    if not store.leases.renew_lease(self.lease):
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


@contextlib.contextmanager
def holding(store, lease) -> Iterator[None]:
    """Keep an acquired lease (run, training or ASPIRE run) renewed by a LeaseKeeper while the block runs,
    then release it, unless it was lost meanwhile."""
    keeper = LeaseKeeper(store, lease, lambda: None).start()
    try:
        yield
    finally:
        keeper.stop()
        if not keeper.lost:
            try:
                store.leases.release_lease(lease)
            except Exception:  # noqa: BLE001 - the lease lapses by itself once this process is gone
                pass


_HELD_TRAININGS: dict[str, int] = {}  # training id -> nesting depth, in this process


@contextlib.contextmanager
def driving_training(store, training_id: str, command: str = "s3gym train") -> Iterator[None]:
    """Hold a training's lease (renewed by a LeaseKeeper) while this process trains or evaluates it,
    so a killed process reads as 'interrupted' (store.leases.shown_training_status). Re-entrant in
    one process (a study evaluates the trainings it drives); RunBusy when another live process drives it."""
    if _HELD_TRAININGS.get(training_id):
        _HELD_TRAININGS[training_id] += 1
        try:
            yield
        finally:
            _HELD_TRAININGS[training_id] -= 1
        return
    with holding(store, store.leases.acquire_training_lease(training_id, command)):
        _HELD_TRAININGS[training_id] = 1
        try:
            yield
        finally:
            _HELD_TRAININGS.pop(training_id, None)


@contextlib.contextmanager
def driving_aspire(store, aspire_id: str, command: str = "s3gym aspire") -> Iterator[None]:
    """Hold an ASPIRE run's lease (renewed by a LeaseKeeper) while this process drives its controller,
    so the app follows it as running and a killed process reads as interrupted. RunBusy when another
    live process drives it (a second `s3gym aspire --resume` of the same run is refused)."""
    with holding(store, store.leases.acquire_aspire_lease(aspire_id, command)):
        yield
