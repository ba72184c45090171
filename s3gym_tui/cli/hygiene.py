"""Keeping a database tidy: `s3gym rm RUN...` and `s3gym vacuum`."""

from __future__ import annotations

import sys
from pathlib import Path
from typing import List, Optional

import typer

from s3gym_tui.cli.common import DbOption, UserError, _store, cli, console
from s3gym_tui.textgate import safe_markup


def _size(n: int) -> str:
    for unit in ("B", "KB", "MB", "GB"):
        if abs(n) < 1024 or unit == "GB":
            return f"{n:,.0f} {unit}" if unit == "B" else f"{n:,.1f} {unit}"
        n /= 1024
    return f"{n:,.1f} GB"  # pragma: no cover


@cli.command("rm")
def remove(run_ids: List[str] = typer.Argument(..., help="Runs to remove."),
           yes: bool = typer.Option(False, "--yes", "-y", help="Do not ask for confirmation."),
           db: Optional[Path] = DbOption) -> None:
    """Remove runs with their episodes, steps, summaries, checkpoints, datasets, and the forks and
    summary trials made from them (a run being driven is refused)."""
    store = _store(db, write=True)
    plan = store.removal_plan(run_ids)
    console.print(f"removing {safe_markup(plan.describe())}: {safe_markup(', '.join(plan.run_ids))}")
    if not yes:
        if not sys.stdin.isatty():
            raise UserError("not removing without confirmation: add --yes (nothing was removed)")
        if not typer.confirm("remove them?", default=False):
            raise UserError("cancelled (nothing was removed)")
    done = store.remove_runs(run_ids)
    console.print(f"removed {safe_markup(done.describe())}; {_size(done.free_bytes)} free inside the file "
                  f"(`s3gym vacuum` returns it to the disk)")


@cli.command()
def vacuum(db: Optional[Path] = DbOption) -> None:
    """Compact the database file (returns the space of removed runs to the disk)."""
    store = _store(db, write=True)
    result = store.vacuum()
    console.print(f"vacuumed {safe_markup(str(store.path))}: {_size(result.before_bytes)} -> "
                  f"{_size(result.after_bytes)} ({_size(result.reclaimed)} reclaimed)")
