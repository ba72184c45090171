"""Screens that follow the store live: the app posts StoreChanged when any process commits; a live
screen then calls its `refresh_from_store()`, at most once per LIVE_INTERVAL_S, also on return to it."""

from __future__ import annotations

import time

from s3gym_tui.messages import StoreChanged

LIVE_INTERVAL_S = 1.0  # changes are shown within about a second, however fast a run writes


class LiveScreenMixin:
    """Mix into a Screen that defines refresh_from_store() (idempotent, keeps the user's place)."""

    _live_seen: int = -1
    _live_last: float = 0.0
    _live_timer = None

    def refresh_from_store(self) -> None:  # pragma: no cover - every live screen defines it
        raise NotImplementedError

    def on_store_changed(self, message: StoreChanged) -> None:
        self._live_request()

    def on_screen_resume(self) -> None:
        generation = getattr(self.app, "store_generation", 0)
        if self._live_seen == -1:  # the first resume follows on_mount, which has just read the store
            self._live_seen = generation
            return
        if generation != self._live_seen:
            self._live_request()

    def _live_request(self) -> None:
        wait = self._live_last + LIVE_INTERVAL_S - time.monotonic()
        if wait <= 0:
            self._live_refresh()
        elif self._live_timer is None:
            self._live_timer = self.set_timer(wait, self._live_refresh)

    def _live_refresh(self) -> None:
        self._live_timer = None
        if not self.is_mounted:
            return
        self._live_last = time.monotonic()
        self._live_seen = getattr(self.app, "store_generation", 0)
        self.refresh_from_store()
