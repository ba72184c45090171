"""What a model call under way has done: the prompt read, the tokens written, its retries and why.

The engine times a call out on silence (no sign of progress for its timeout), not on its total time:
a provider that reports progress (the embedded model: each prompt chunk read and each token written;
a streamed call: each piece of the reply) keeps its call alive for as long as it works. The call's
progress is found through a context variable (`current()`), which follows the call into litellm and
into the provider's worker thread; a screen reads `describe()` for its status bar.

Stdlib only: providers import it without importing the engine."""

from __future__ import annotations

import contextvars
import time
from typing import Optional


class CallProgress:
    """One call's progress, written by the engine and the provider (any thread), read by a screen.

    Plain attribute writes: each is atomic in CPython, and a reader sees a recent value."""

    def __init__(self) -> None:
        self.started = time.monotonic()
        self.last_sign = self.started  # when the call last showed progress (time.monotonic())
        self.attempt = 0  # 0: the first attempt
        self.retries: list[str] = []  # why each retry happened, in order
        self.prompt_total: Optional[int] = None  # tokens of the prompt to read (None: not said)
        self.prompt_read: Optional[int] = None  # of those, read so far (reused ones included)
        self.prompt_reused: int = 0  # read from earlier work (llama.cpp's KV cache), not again
        self.written: Optional[int] = None  # tokens of the reply written so far (None: not said)
        self.streamed = False  # the tokens come from a streamed HTTP reply
        self.waiting = False  # the model is busy with another call; this one waits its turn

    def sign(self) -> None:
        """The call (or the model it waits for) made progress now."""
        self.last_sign = time.monotonic()

    def silent_for(self) -> float:
        """Seconds since the last sign of progress."""
        return time.monotonic() - self.last_sign

    def reading(self, read: int, total: int, reused: int = 0) -> None:
        self.waiting = False
        self.prompt_read, self.prompt_total, self.prompt_reused = read, total, reused
        self.sign()

    def writing(self, written: int, streamed: bool = False) -> None:
        self.waiting = False
        self.written, self.streamed = written, streamed
        self.sign()

    def waiting_turn(self, model_busy: bool) -> None:
        """The call waits for a model another call is using (a sign while that call progresses)."""
        self.waiting = True
        if model_busy:
            self.sign()

    def retrying(self, why: str) -> None:
        """A new attempt starts after `why` (e.g. 'timeout: no progress for 120 s')."""
        self.retries.append(why)
        self.attempt += 1
        self.prompt_total = self.prompt_read = self.written = None
        self.prompt_reused = 0
        self.streamed = self.waiting = False
        self.sign()

    def describe(self) -> str:
        """'reading the prompt 2,048 of 7,912 tokens · retry 1 after timeout: no progress for 120 s',
        '12 tokens written', ... ('' when nothing is known)."""
        parts = []
        if self.waiting:
            parts.append("waiting for the model (busy with another call)")
        elif self.written:
            noun = "token" if self.written == 1 else "tokens"
            parts.append(f"{self.written} {noun} so far (streamed)" if self.streamed else
                         f"{self.written} {noun} written")
        elif self.prompt_total:
            reused = f", {self.prompt_reused:,} reused" if self.prompt_reused else ""
            parts.append(f"reading the prompt {self.prompt_read or 0:,} of {self.prompt_total:,} tokens{reused}")
        if self.retries:
            parts.append(f"retry {len(self.retries)} after {self.retries[-1]}")
        return " · ".join(parts)


_CURRENT: contextvars.ContextVar[Optional[CallProgress]] = contextvars.ContextVar("s3gym_call_progress",
                                                                                  default=None)


def current() -> Optional[CallProgress]:
    """The progress of the call this code runs in (None outside a call the engine makes)."""
    return _CURRENT.get()


def bind(progress: Optional[CallProgress]) -> contextvars.Token:
    """Make `progress` the current call's (undo with `unbind(token)`)."""
    return _CURRENT.set(progress)


def unbind(token: contextvars.Token) -> None:
    _CURRENT.reset(token)
