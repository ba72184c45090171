"""Errors raised by the store: every one carries a single-line, user-facing message."""

from __future__ import annotations


def one_line(text: object) -> str:
    """Collapse whitespace (newlines included) so a message fits on one line."""
    return " ".join(str(text).split())


class StoreError(Exception):
    """The store refused or failed an operation; `str(err)` is one line meant for the user."""

    def __init__(self, message: object) -> None:
        super().__init__(one_line(message))


class LeakageError(StoreError):
    """Refused: evaluation data would become agent experience (history, summary) or training data."""
