"""Entry point of the `s3gym` command: one clear line and a distinct exit code for every error."""

from __future__ import annotations

import sys
from typing import Optional

import typer

from s3gym_tui.cli.common import (EXIT_INTERRUPTED, EXIT_OK, EXIT_STOPPED, EXIT_USAGE, StdoutClosed, UserError,
                                  cli, err, stdout_closed, storable_integers)
from s3gym_tui.textgate import safe_markup


class _GuardedStdout:
    """sys.stdout while a command runs: a write to a closed pipe raises StdoutClosed, which click
    passes through (it turns an EPIPE OSError into exit code 1), wherever the write comes from."""

    def __init__(self, stream) -> None:
        self._stream = stream

    def write(self, text: str) -> int:
        try:
            return self._stream.write(text)
        except BrokenPipeError:
            stdout_closed()
            raise  # pragma: no cover (stdout_closed raises)

    def writelines(self, lines) -> None:
        for line in lines:
            self.write(line)

    def flush(self) -> None:
        try:
            self._stream.flush()
        except BrokenPipeError:
            stdout_closed()

    def __getattr__(self, name: str):
        return getattr(self._stream, name)


def main(argv: Optional[list[str]] = None) -> int:
    """Entry point: one clear line and a non-zero exit for every user error, never a traceback; a
    closed stdout (`s3gym export RUN | head -1`) ends the command quietly with exit code 0."""
    real = sys.stdout
    sys.stdout = guarded = _GuardedStdout(real)
    try:
        code = _main(argv)
        sys.stdout.flush()  # what is still buffered meets a closed pipe here, not at exit
        return code
    except StdoutClosed:
        return EXIT_OK
    finally:
        if sys.stdout is guarded:
            sys.stdout = real


def _main(argv: Optional[list[str]]) -> int:
    from pydantic import ValidationError

    from s3gym_games import GameError
    from s3gym_tui.config import ConfigError
    from s3gym_tui.engine.llm import ModelUnavailable
    from s3gym_tui.output import OutputError

    from s3gym_tui import command_args

    args = command_args(argv)  # bare `s3gym` is the app: `s3gym --db X --model M` opens it too
    if args[0] == "--version" and len(args) > 1:  # click's eager --version would print and ignore them
        err.print(f"[red]error:[/] --version takes nothing after it (got {safe_markup(' '.join(args[1:]), one_line=True, max_chars=200)})",
                  soft_wrap=True, highlight=False)
        return EXIT_USAGE
    try:
        from s3gym_tui.store import StoreError
    except ImportError:  # pragma: no cover
        StoreError = RuntimeError  # type: ignore[misc,assignment]
    try:
        command = typer.main.get_command(cli)
        storable_integers(command)
        code = command.main(args=args, standalone_mode=False)  # click returns a command's typer.Exit code
    except (UserError, GameError, StoreError, ModelUnavailable, ConfigError, OutputError) as exc:
        message = " ".join(str(exc).split())  # one line, whatever the message holds
        err.print(f"[red]error:[/] {safe_markup(message, one_line=True, max_chars=4000)}", soft_wrap=True,
                  markup=True, highlight=False)
        resume = getattr(exc, "resume", None)
        if resume:
            err.print(f"resume with: s3gym resume {safe_markup(resume, one_line=True)}", soft_wrap=True,
                      highlight=False)
        if isinstance(exc, ModelUnavailable):
            return EXIT_STOPPED  # the model failed while working
        return int(getattr(exc, "exit_code", EXIT_USAGE))
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first.get("loc", ())) or "input"
        message = str(first.get("msg", "")).removeprefix("Value error, ")
        err.print(f"[red]error:[/] {safe_markup(where, one_line=True)}: {safe_markup(message, one_line=True, max_chars=4000)}", soft_wrap=True, highlight=False)
        return EXIT_USAGE
    except KeyboardInterrupt:
        err.print("interrupted: stored data is intact; `s3gym resume RUN` (or SWEEP) continues")
        return EXIT_INTERRUPTED
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except Exception as exc:  # usage errors of typer's (vendored) click, and aborts
        if hasattr(exc, "format_message"):
            err.print(f"[red]error:[/] {safe_markup(exc.format_message(), one_line=True, max_chars=4000)}", soft_wrap=True, highlight=False)
            return int(getattr(exc, "exit_code", 2) or 2)
        if type(exc).__name__ == "Abort":
            return EXIT_INTERRUPTED
        raise
    return code if isinstance(code, int) else 0
