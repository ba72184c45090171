"""The CLI commands that train (`train`, `distill`, `resume`) under a data-parallel launcher
(`torchrun`, `accelerate launch`): rank 0 runs the command and leads, the other ranks follow
(training/ranks.py). In a single process the command runs as it is."""

from __future__ import annotations

import functools
from typing import Any, Callable

from s3gym_tui.cli.common import UserError


def data_parallel(command: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(command)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        from s3gym_tui.training import ranks

        here = ranks.world()
        if not here.distributed:
            return command(*args, **kwargs)
        from s3gym_tui.training import MissingExtra, require_extra

        try:
            require_extra()
        except MissingExtra as exc:
            raise UserError(str(exc)) from None
        ranks.start()
        if not here.main:
            ranks.follow()  # no output, no store: the trainings rank 0 hands over
            return None
        try:
            return command(*args, **kwargs)
        finally:
            ranks.finish()

    return wrapper
