"""The exception a requested training stop ends with (its own module: training.ranks catches it on every
rank, and training.stop, which raises it, sits above ranks)."""

from __future__ import annotations


class TrainingStopped(KeyboardInterrupt):
    """Raised once the trainer has saved its state after a requested stop (a KeyboardInterrupt, so every
    handler that stores an interrupted training, study or run treats it as one)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason
