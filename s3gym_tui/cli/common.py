"""Shared pieces of the command line: the typer app, consoles, the one-line UserError, store access."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Optional

import typer
from rich.console import Console

# Piped output is not wrapped at 80 columns: tables stay whole for files and other programs.
console = Console(width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, width=None if sys.stderr.isatty() else 400)
cli = typer.Typer(add_completion=False, no_args_is_help=False, pretty_exceptions_enable=False,
                  help="s3gym: watch, judge and steer LLM agents on the seven S3Gym games.")

DbOption = typer.Option(None, "--db", help="SQLite file (default: $S3GYM_DB or the user data dir).")


class UserError(Exception):
    """An error to show the user as one line (exit code 2)."""


def _store(db: Optional[Path]):
    """The store at --db, else the config file's `db` (or $S3GYM_DB), else the default path."""
    from s3gym_tui.config import load_settings
    from s3gym_tui.store import Store, default_db_path

    return Store(db or load_settings().db or default_db_path())


def _fmt(value: Optional[float], digits: int = 2) -> str:
    """The report's one number format (the app shows the same): fixed decimals, '—' when undefined."""
    from s3gym_tui.engine.glossary import fmt_metric

    return fmt_metric(value, digits)


def _caption(table: str) -> str:
    """The meaning of a report table's figures (engine.glossary), as a table caption."""
    from s3gym_tui.engine.glossary import UNDEFINED, definitions

    return "; ".join(f"{name}: {meaning}" for name, meaning in definitions(table)) + f". {UNDEFINED}."


