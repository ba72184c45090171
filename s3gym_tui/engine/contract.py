"""The reply contract watch: a model whose recent replies mostly do not parse gets a warning."""

from __future__ import annotations

from collections import deque
from typing import Iterable, Optional

from s3gym_games.reply import parse_reply
from s3gym_games.reply import NO_ANSWER
from s3gym_tui.models import Step

WINDOW = 10  # recent model replies considered
MIN_REPLIES = 3  # no verdict on fewer


def reply_parsed(step: Step) -> Optional[bool]:
    """True/False for a step carrying a model reply (did it hold an `Answer:` line), None for a
    step without one (typed by a person)."""
    if not step.reply:
        return None
    if step.action == NO_ANSWER:
        return False
    key = (step.episode_id, step.index, len(step.reply))
    parsed = _PARSED.get(key)
    if parsed is None:
        parsed = parse_reply(step.reply).action is not None
        _PARSED[key] = parsed
        if len(_PARSED) > 4096:
            _PARSED.pop(next(iter(_PARSED)))
    return parsed


_PARSED: dict[tuple, bool] = {}  # steps are immutable once stored: parse each reply once


def warning_text(model: str, unparsed: int, considered: int) -> Optional[str]:
    """The warning when most of the considered replies did not parse (None otherwise)."""
    if considered < MIN_REPLIES or unparsed * 2 <= considered:
        return None
    return (f"{model}: {unparsed} of its last {considered} replies did not parse (no 'Answer: <action>, "
            f"Score: <s>' line, {unparsed / considered:.0%}); each one is an invalid action for the game. "
            "Check the model, its max tokens, or the prompt.")


def contract_warning(model: str, steps: Iterable[Step], window: int = WINDOW) -> Optional[str]:
    """The warning for the most recent `window` model replies among `steps` (None when most parse)."""
    flags = [f for f in (reply_parsed(s) for s in steps) if f is not None][-window:]
    return warning_text(model, flags.count(False), len(flags))


def unparsed_text(model: str, unparsed: int, replies: int) -> Optional[str]:
    """The end-of-job warning over all of a model's replies (a sweep's final table), by the same
    rule as the live one: most of them did not parse. None otherwise."""
    if replies < MIN_REPLIES or unparsed * 2 <= replies:
        return None
    return (f"{model}: {unparsed} of {replies} replies did not parse ({unparsed / replies:.0%}); each one was "
            "an invalid action for the game. Check the model, its max tokens, or the prompt.")


def count_unparsed(steps: Iterable[Step]) -> tuple[int, int]:
    """(replies that did not parse, model replies) among `steps` (a person's moves not counted)."""
    flags = [f for f in (reply_parsed(s) for s in steps) if f is not None]
    return flags.count(False), len(flags)


class ContractWatch:
    """Follows a stream of steps (a protocol run) and tells when the warning starts or stops."""

    def __init__(self, model: str, window: int = WINDOW) -> None:
        self.model = model
        self.recent: deque[bool] = deque(maxlen=window)
        self._shown = False

    def add(self, step: Step) -> None:
        flag = reply_parsed(step)
        if flag is not None:
            self.recent.append(flag)

    def news(self, step: Step) -> Optional[str]:
        """Add a step; the warning if it starts with this step (once each time it starts), else None."""
        self.add(step)
        warning = self.warning
        started = warning is not None and not self._shown
        self._shown = warning is not None
        return warning if started else None

    @property
    def fraction_unparsed(self) -> Optional[float]:
        return self.recent.count(False) / len(self.recent) if self.recent else None

    @property
    def warning(self) -> Optional[str]:
        return warning_text(self.model, self.recent.count(False), len(self.recent))
