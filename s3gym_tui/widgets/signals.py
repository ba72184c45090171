"""Subscribing widgets to Textual signals without leaking them.

Textual's Signal keeps its subscribers in a WeakKeyDictionary whose values (the callbacks) refer
to the subscriber, so an entry never dies by itself; it is pruned only when the signal is next
published (a theme change, which may never come). A widget that subscribes and never unsubscribes
stays alive with everything it holds after its screen is closed: every Play or Compare screen
opened leaked ~10,000 objects (its steps table, agent panel and their render caches), and each
garbage collection then walked the growing heap. `follow` subscribes until the widget unmounts."""

from __future__ import annotations

from typing import Any, Callable

from textual.widget import Widget

_FOLLOWED = "_s3gym_followed_signals"


def follow(widget: Widget, signal: Any, callback: Callable[[Any], Any]) -> None:
    """Subscribe `widget` to `signal`; `release(widget)` (from its on_unmount) unsubscribes it."""
    signal.subscribe(widget, callback)
    widget.__dict__.setdefault(_FOLLOWED, []).append(signal)


def release(widget: Widget) -> None:
    """Unsubscribe `widget` from every signal it follows (call it from the widget's on_unmount)."""
    for signal in widget.__dict__.pop(_FOLLOWED, []):
        signal.unsubscribe(widget)
