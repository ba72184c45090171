"""Thread workers that do not keep their screen alive after they finish.

Textual runs a thread worker in the event loop's default executor and sets its `active_worker`
context variable in that pool thread, never clearing it: the idle thread's context keeps the
Worker, its bound method and so the whole screen (with its widgets and caches) alive until the
same pool thread happens to run another job, which may be never (the help's text is made once and
kept, so a closed help screen stayed in memory for the rest of the session). `thread_work` is
Textual's `work(thread=True, exit_on_error=False)` whose function clears that variable when it
returns or raises."""

from __future__ import annotations

import functools
from typing import Any, Callable, Optional

from textual import work
from textual.worker import active_worker


def thread_work(*, group: str = "default", exclusive: bool = False,
                description: Optional[str] = None) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """Decorate a widget's or screen's method to run in a thread worker (errors are the worker's
    state, not the app's exit) that lets go of its screen once it is done."""

    def decorator(method: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(method)
        def released(*args: Any, **kwargs: Any) -> Any:
            try:
                return method(*args, **kwargs)
            finally:
                active_worker.set(None)  # the pool thread's context no longer refers to the worker

        return work(released, thread=True, group=group, exclusive=exclusive, exit_on_error=False,
                    description=description)

    return decorator
