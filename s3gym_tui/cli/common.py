"""Shared pieces of the command line: the typer app, consoles, one-line errors with their exit
codes, store access, JSON output, and the help text listing exit codes and environment variables."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from s3gym_tui.textgate import GatedConsole, safe_json

# Piped output is not wrapped at 80 columns: tables stay whole for files and other programs. Both pass
# every text segment through the gate (s3gym_tui.textgate): the commands gate what they print first.
console = GatedConsole(width=None if sys.stdout.isatty() else 200)
err = GatedConsole(stderr=True, width=None if sys.stderr.isatty() else 400)

# Exit codes (distinct, documented in --help and the README).
EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # a check found a problem (audit: a leak)
EXIT_USAGE = 2  # usage error, or a run refused before anything was stored
EXIT_MODEL = 3  # the model or provider failed while working (the run is stopped, resumable)
EXIT_INTERRUPTED = 130  # Ctrl-C (stored data intact, resumable)

EXIT_CODES = ((EXIT_OK, "ok"), (EXIT_CHECK_FAILED, "a check failed (audit found a leak)"),
              (EXIT_USAGE, "usage error, or a run refused before anything was stored"),
              (EXIT_MODEL, "the model or provider failed while working (resumable)"),
              (EXIT_INTERRUPTED, "interrupted (Ctrl-C); stored data intact"))

ENV_VARS = (
    ("S3GYM_DB", "the SQLite file (else the config's db, else the user data dir)"),
    ("S3GYM_CONFIG", "the config file (default ~/.config/s3gym/config.toml)"),
    ("S3GYM_MODEL", "default model of run, sweep and the app (over the config's)"),
    ("S3GYM_THEME", "dark or light (the app)"),
    ("S3GYM_TRAINING_DIR", "where trainings keep adapters and exports"),
    ("S3GYM_CACHE", "cache of the base model for training"),
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True by default (litellm's bundled prices, offline)"),
    ("OPENAI_API_KEY, ANTHROPIC_API_KEY, ...", "provider keys, read by litellm (never stored)"),
    ("OMP_WAIT_POLICY", "PASSIVE by default for the embedded model"),
    ("USER", "the name recorded as human:<name> on summary edits, vetoes and pins (config: human_name)"),
    ("S3GYM_TEXTGATE_STRICT", "tests: text printed without passing the gate is an error, not gated"),
)


def _epilog() -> str:
    """Exit codes and environment variables, laid out as is (click's \\b: no re-wrapping)."""
    codes = "\n".join(f"  {code:<4} {text}" for code, text in EXIT_CODES)
    env = "\n".join(f"  {name}\n      {text}" for name, text in ENV_VARS)
    return f"\b\nExit codes:\n{codes}\n\n\b\nEnvironment:\n{env}"


cli = typer.Typer(add_completion=False, no_args_is_help=False, pretty_exceptions_enable=False,
                  help="s3gym: watch, judge and steer LLM agents on the seven S3Gym games.",
                  epilog=_epilog(), rich_markup_mode=None)

DbOption = typer.Option(None, "--db", help="SQLite file (default: $S3GYM_DB or the user data dir).")
JsonOption = typer.Option(False, "--json", help="Print one JSON document instead of tables.")


class UserError(Exception):
    """An error to show the user as one line (exit code 2: usage, or refused before storing)."""

    exit_code = EXIT_USAGE


class ModelFailed(UserError):
    """The model or provider failed while a run worked (exit code 3; the run is resumable)."""

    exit_code = EXIT_MODEL


def check_number(name: str, value: Optional[float], *, low: Optional[float] = None,
                 high: Optional[float] = None, above: Optional[float] = None) -> None:
    """Refuse a non-finite or out-of-range option before anything is stored (typer lets nan, inf and
    -1 through a float option): `low`/`high` are inclusive bounds, `above` an exclusive one."""
    import math

    if value is None:
        return
    if not math.isfinite(value):
        raise UserError(f"{name} must be a finite number, not {value}")
    if above is not None and not value > above:
        raise UserError(f"{name} must be greater than {above:g}, not {value:g}")
    if low is not None and value < low:
        raise UserError(f"{name} must be at least {low:g}, not {value:g}")
    if high is not None and value > high:
        raise UserError(f"{name} must be at most {high:g}, not {value:g}")


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("s3gym")
    except PackageNotFoundError:  # pragma: no cover - a source tree that was never installed
        return "unknown"


def _show_version(value: bool) -> None:
    if value:
        console.print(f"s3gym {_version()}", highlight=False)
        raise typer.Exit(EXIT_OK)


@cli.callback()
def _root(version: bool = typer.Option(False, "--version", help="Print the version and exit.",
                                       callback=_show_version, is_eager=True)) -> None:
    """s3gym: watch, judge and steer LLM agents on the seven S3Gym games."""


def emit_json(data: Any) -> None:
    """One JSON document on stdout (no colour, no wrapping): for scripts. Characters that would drive a
    terminal are written as \\u escapes (the same JSON value)."""
    sys.stdout.write(safe_json(json.dumps(data, indent=2, ensure_ascii=False, default=str)) + "\n")
    sys.stdout.flush()


def _store(db: Optional[Path], create: bool = False, write: bool = False, backup: bool = True):
    """The store at --db, else the config file's `db` (or $S3GYM_DB), else the default path.

    Only commands that start work (`run`, `sweep`) create a store: any other command on a path that
    does not exist (a typo in --db), an empty file or an SQLite file with no tables says so instead
    of leaving an empty store behind. A file of an older schema is upgraded only by commands that
    write (`write=True`; `create` implies it), saying so on stderr, after a backup (store/upgrade.py);
    a reading command leaves it unchanged and names `s3gym migrate`."""
    from s3gym_tui.config import load_settings
    from s3gym_tui.store import Store, default_db_path

    path = Path(db or load_settings().db or default_db_path()).expanduser()
    if not create and "\x00" not in str(path) and not path.exists():  # (a NUL: the store says why)
        raise UserError(f"no database at {path} (`s3gym run` or the app creates one; check --db)")
    return Store(path, create=create, migrate=create or write, backup=backup, notify=say_upgrade)


def say_upgrade(line: str) -> None:
    """The one-line notice of an upgrade, on stderr (stdout stays the command's output)."""
    from s3gym_tui.textgate import safe

    err.print(safe(line, one_line=True), markup=False, highlight=False, soft_wrap=True)


def _fmt(value: Optional[float], digits: int = 2) -> str:
    """The report's one number format (the app shows the same): fixed decimals, '—' when undefined."""
    from s3gym_tui.engine.glossary import fmt_metric

    return fmt_metric(value, digits)
