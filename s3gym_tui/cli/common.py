"""Shared pieces of the command line: the typer app, consoles, one-line errors with their exit
codes, store access, JSON output, and the help text listing exit codes and environment variables."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from s3gym_tui.textgate import GatedConsole, safe_json


class StdoutClosed(Exception):
    """The reader of our output went away (`s3gym export RUN | head -1`): end quietly, exit 0."""


def stdout_closed() -> None:
    """Point stdout at /dev/null (Python flushes it again at exit, which would fail once more) and
    end the command: the way the Python docs' note on SIGPIPE recommends, but with exit code 0."""
    import os

    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except (OSError, ValueError, AttributeError):  # a stdout without a descriptor (a test's capture)
        pass
    raise StdoutClosed


class _Console(GatedConsole):
    """The gated console, whose answer to a closed pipe (rich exits with 1) is ours: a quiet exit 0."""

    def on_broken_pipe(self) -> None:
        self.quiet = True
        stdout_closed()


# Piped output is not wrapped at 80 columns: tables stay whole for files and other programs. Both pass
# every text segment through the gate (s3gym_tui.textgate): the commands gate what they print first.
console = _Console(width=None if sys.stdout.isatty() else 200)
err = _Console(stderr=True, width=None if sys.stderr.isatty() else 400)

# Exit codes (distinct, documented in --help and docs/cli.md).
EXIT_OK = 0
EXIT_CHECK_FAILED = 1  # a check found a problem (audit: a leak)
EXIT_USAGE = 2  # usage error, or a run refused before anything was stored
# Stopped while working, after something was stored (the model or provider failed, the disk filled
# up, the store refused a write): the work is stored as stopped with its reason, and resumable.
EXIT_STOPPED = 3
EXIT_MODEL = EXIT_STOPPED  # (its older name)
EXIT_INTERRUPTED = 130  # Ctrl-C (stored data intact, resumable)

EXIT_CODES = ((EXIT_OK, "ok"), (EXIT_CHECK_FAILED, "a check failed (audit found a leak)"),
              (EXIT_USAGE, "usage error, or a run refused before anything was stored"),
              (EXIT_STOPPED, "stopped while working (model, provider or disk failed); resumable"),
              (EXIT_INTERRUPTED, "interrupted (Ctrl-C); stored data intact"))

ENV_VARS = (
    ("S3GYM_DB", "the SQLite file (else the config's db, else the user data dir)"),
    ("S3GYM_CONFIG", "the config file (default ~/.config/s3gym/config.toml)"),
    ("S3GYM_MODEL", "default model of run, sweep and the app (over the config's)"),
    ("S3GYM_THEME", "dark or light (the app)"),
    ("S3GYM_SERVERS", "more model servers to look for: ports, host:port or URLs, comma-separated "
                      "(over the config's servers)"),
    ("S3GYM_TRAINING_DIR", "where trainings keep adapters and exports"),
    ("S3GYM_CACHE", "cache of the base model for training"),
    ("LITELLM_LOCAL_MODEL_COST_MAP", "True by default (litellm's bundled prices, offline)"),
    ("OPENAI_API_KEY, ANTHROPIC_API_KEY, ...", "provider keys, read by litellm (never stored)"),
    ("S3GYM_API_CREDENTIALS", "JSON list of api bases with credentials (http://user:KEY@host/v1): an --api-base "
     "equal to one without them uses it (how the app keeps keys off its runs' command lines)"),
    ("OMP_WAIT_POLICY", "PASSIVE by default for the embedded model"),
    ("USER", "the name recorded as human:<name> on summary edits, vetoes and pins (config: human_name)"),
    ("S3GYM_TEXTGATE_STRICT", "tests: text printed without passing the gate is an error, not gated"),
    ("S3GYM_DEMO_SCHEDULE", "tests: a JSON object of demo schedule fields that shrinks `s3gym demo`"),
    ("S3GYM_DIST_TIMEOUT_S", "data-parallel training: how long a rank waits for the others (default a day)"),
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
# the long commands' progress (s3gym_tui.progress): a ProgressMode, None to follow stdout
ProgressOption = typer.Option(None, "--progress", case_sensitive=False, show_default=False,
                              help="bars (live bars) | plain (one timestamped line per episode, checkpoint, "
                              "update or phase, flushed: for nohup, Slurm, CI) | none. Default: bars on a "
                              "terminal, plain when stdout is not one.")


class UserError(Exception):
    """An error to show the user as one line (exit code 2: usage, or refused before storing)."""

    exit_code = EXIT_USAGE


class Stopped(UserError):
    """Work stopped after something was stored: the model or provider failed, the disk filled up,
    the store refused a write (exit code 3). The work is resumable: `resume` names what
    `s3gym resume` continues, printed on its own line after the error."""

    exit_code = EXIT_STOPPED

    def __init__(self, message: str, resume: Optional[str] = None) -> None:
        super().__init__(message)
        self.resume = resume


ModelFailed = Stopped  # (its older name)


# ----- names the user gave ---------------------------------------------------------------------
def model_name(value: Optional[str]) -> Optional[str]:
    """typer callback of every option that names a model: an empty or blank name is a usage error
    (it used to mean the default model, silently)."""
    if value is not None and not value.strip():
        raise typer.BadParameter("a model name cannot be empty (leave the option out for the default model)")
    return value.strip() if value is not None else None


def model_list(value: Optional[str]) -> Optional[str]:
    """typer callback of `--models A,B`: at least one non-empty name when the option is given."""
    if value is not None and not [part for part in value.split(",") if part.strip()]:
        raise typer.BadParameter("no model named (leave the option out for the default model)")
    return value


# Config fields -> the flags that set them, for errors of run, sweep, train and distill (pydantic
# names the field; the user typed the flag). A field not listed keeps its own name.
FLAGS = {
    "model": "--model", "models": "--models", "game": "GAME", "games": "--games",
    "pathway": "--pathway", "pathways": "--pathways",
    "explore_episodes": "--episodes", "eval_every": "--eval-every", "eval_episodes": "--eval-episodes",
    "history_budget": "--history-budget", "max_tokens": "--max-tokens", "temperature": "--temperature",
    "decoding_seed": "--seed", "api_base": "--api-base", "api_bases": "--api-base", "step_cap": "--step-cap",
    "timeout_s": "--timeout", "max_retries": "--max-retries", "oracle_feedback": "--oracle-feedback",
    "concurrency": "--concurrency", "runs_per_model": "--runs-per-model", "budget_usd": "--budget-usd",
    "threshold": "--threshold", "epochs": "--epochs", "max_steps": "--max-steps", "batch_size": "--batch-size",
    "grad_accum": "--grad-accum", "learning_rate": "--lr", "max_length": "--max-length",
    "updates": "--updates", "num_generations": "--generations", "states_per_update": "--states-per-update",
    "save_every": "--save-every", "rollout_episodes": "--rollout-episodes", "episodes": "--rollout-episodes",
    "rollout_step_cap": "--rollout-step-cap", "max_completion_length": "--completion-tokens",
    "phase2_updates": "--updates", "phase2_batch": "--batch", "phase2_learning_rate": "--lr",
    "max_examples": "--max-examples",
}
# a field whose flag depends on where it sits (distillation's phase 1 has its own step cap)
FLAGS_AT = {("phase1", "max_steps"): "--phase1-steps"}


def flag_error(exc: Exception) -> UserError:
    """A pydantic ValidationError as one line naming the flag the user typed (`--step-cap 100: ...`)."""
    first = exc.errors()[0]  # type: ignore[attr-defined]
    loc = [str(p) for p in first.get("loc", ()) if not isinstance(p, int)]
    message = str(first.get("msg", "")).removeprefix("Value error, ")
    if not loc:
        return UserError(message)
    flag = FLAGS_AT.get(tuple(loc[-2:])) or FLAGS.get(loc[-1], ".".join(loc))
    given = first.get("input")
    if isinstance(given, float):
        given = f"{given:g}"  # as typed: -1, not -1.0
    shown = f" {given}" if flag.startswith("--") and isinstance(given, (int, str)) and \
        not isinstance(given, bool) and len(str(given)) <= 40 else ""
    return UserError(f"{flag}{shown}: {message}")


class flags_named:
    """`with flags_named(): RunConfig(...)`: a ValidationError becomes a UserError naming the flag."""

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        from pydantic import ValidationError

        if isinstance(exc, ValidationError):
            raise flag_error(exc) from None
        return False


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


def storable_integers(command) -> None:
    """Refuse, on every option and argument of the command tree, an integer the store cannot hold
    (SQLite's are 64-bit): typer takes any size, and a larger one was stored, or failed deep inside
    with a traceback. It wraps each parameter's click callback: new options are covered too."""
    from s3gym_tui.models import int64_problem

    def bounded(callback):
        def check(ctx, param, value):
            for item in value if isinstance(value, (list, tuple)) else (value,):
                problem = int64_problem(item)
                if problem:
                    raise typer.BadParameter(problem, ctx=ctx, param=param)
            return callback(ctx, param, value) if callback is not None else value
        return check

    for param in command.params:
        param.callback = bounded(param.callback)
    for sub in getattr(command, "commands", {}).values():
        storable_integers(sub)


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


def decoding_choice(value: Optional[str]) -> Optional[str]:
    """--decoding checked (None: not given)."""
    from s3gym_tui.engine.decoding import DECODINGS

    if value is None:
        return None
    if value.strip().lower() not in DECODINGS:
        raise UserError(f"--decoding {value!r}: choose {' or '.join(DECODINGS)}")
    return value.strip().lower()


def model_args_given(items: list[str]) -> dict:
    """--model-arg KEY=VALUE flags as a dict (a bad one: a one-line error)."""
    from s3gym_tui.engine.decoding import ModelArgError, parse_model_args

    try:
        return parse_model_args(items)
    except ModelArgError as exc:
        raise UserError(str(exc)) from None
