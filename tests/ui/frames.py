"""Record the frames an app draws: every (screen on top, compositor update) from now on."""

from __future__ import annotations


def record_frames(app) -> list:
    frames: list = []
    original = app._display

    def display(screen, update) -> None:
        original(screen, update)
        if update is not None:
            frames.append((screen, update))

    app._display = display
    return frames
