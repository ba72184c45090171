"""Progress of the long commands (run, resume, sweep, train, distill and its matrix evaluation), one
mechanism for all: live bars on a terminal, one timestamped line per episode / checkpoint / update /
phase when stdout is not one (nohup, Slurm, CI: written and flushed as it happens), or nothing.
`--progress bars|plain|none` (cli.common.ProgressOption) chooses; the default follows stdout.

`JobProgress` has the part of rich's `Progress` interface the commands use (`add_task`, `update`,
`advance`, `console`, a context manager), so a command describes its progress once. In plain mode an
update that advances a task or changes its `info` is one line; a task or an update marked
`detail=True` (every step of an episode) only moves a bar. `note` prints a message (a warning) in
every mode: above the bars, or as a timestamped line."""

from __future__ import annotations

import time
from enum import Enum
from typing import Any, Optional

from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn


class ProgressMode(str, Enum):
    bars = "bars"
    plain = "plain"
    none = "none"


def resolve(mode: Optional[ProgressMode | str], console: Console) -> ProgressMode:
    """The mode asked for, else bars on a terminal and plain lines otherwise."""
    if mode is not None:
        return ProgressMode(getattr(mode, "value", mode))
    return ProgressMode.bars if console.is_terminal else ProgressMode.plain


def stamp() -> str:
    """The time of a plain progress line (local, to the second, with the date: jobs run for days)."""
    return time.strftime("%Y-%m-%d %H:%M:%S")


class _Task:
    __slots__ = ("description", "total", "completed", "info", "detail", "visible")

    def __init__(self, description: str, total: Optional[float], completed: float, info: str,
                 detail: bool) -> None:
        self.description = description
        self.total = total
        self.completed = completed
        self.info = info
        self.detail = detail
        self.visible = True


class JobProgress:
    """Bars, plain lines or nothing, behind one interface (see the module docstring)."""

    def __init__(self, console: Console, mode: Optional[ProgressMode | str] = None,
                 label_width: Optional[int] = None) -> None:
        self.console = console
        self.mode = resolve(mode, console)
        label = "{task.description}" if label_width is None else "{task.description:<%d}" % label_width
        self._bars: Optional[Progress] = None
        if self.mode is ProgressMode.bars:
            self._bars = Progress(TextColumn(label), BarColumn(), MofNCompleteColumn(),
                                  TextColumn("{task.fields[info]}"), TimeElapsedColumn(), console=console)
            self.console = self._bars.console
        self._tasks: dict[int, _Task] = {}

    # ----- rich's Progress interface --------------------------------------------------------
    def __enter__(self) -> "JobProgress":
        if self._bars is not None:
            self._bars.__enter__()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self._bars is not None:
            self._bars.__exit__(*exc)

    def add_task(self, description: str, total: Optional[float] = None, completed: float = 0, *,
                 info: str = "", detail: bool = False, announce: bool = False) -> int:
        """A task (its description is markup). `announce`: a plain line saying it started."""
        if self._bars is not None:
            task_id = int(self._bars.add_task(description, total=total, completed=completed, info=info))
        else:
            task_id = len(self._tasks)
        self._tasks[task_id] = task = _Task(description, total, completed, info, detail)
        if announce:
            self._line(task, "started")
        return task_id

    def update(self, task_id: int, *, total: Optional[float] = None, completed: Optional[float] = None,
               advance: Optional[float] = None, info: Optional[str] = None, visible: Optional[bool] = None,
               detail: bool = False) -> None:
        task = self._tasks[task_id]
        before = (task.completed, task.info)
        if total is not None:
            task.total = total
        if completed is not None:
            task.completed = completed
        if advance:
            task.completed += advance
        if info is not None:
            task.info = info
        if visible is not None:
            task.visible = visible
        if self._bars is not None:
            fields = {"info": info} if info is not None else {}
            self._bars.update(task_id, total=total, completed=completed, advance=advance, visible=visible,
                              **fields)
        elif not (detail or task.detail) and (task.completed, task.info) != before:
            self._line(task)

    def advance(self, task_id: int, advance: float = 1) -> None:
        self.update(task_id, advance=advance)

    # ----- messages -------------------------------------------------------------------------
    def note(self, markup: str) -> None:
        """A message (markup) in every mode: above the bars, or a timestamped line."""
        if self._bars is not None:
            self._bars.console.print(markup, soft_wrap=True, highlight=False)
        else:
            self._print(f"{stamp()} {markup}")

    def _line(self, task: _Task, info: Optional[str] = None) -> None:
        if self.mode is not ProgressMode.plain:
            return
        count = f"{task.completed:g}" + (f"/{task.total:g}" if task.total is not None else "")
        text = task.info if info is None else escape(info)
        self._print(f"{stamp()} {task.description} {count}" + (f" {text}" if text else ""))

    def _print(self, markup: str) -> None:
        self.console.print(markup, soft_wrap=True, highlight=False)
        try:
            self.console.file.flush()  # a line in the log now, not when a block buffer fills
        except (OSError, ValueError):
            pass
