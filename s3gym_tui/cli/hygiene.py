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
    plan = store.hygiene.removal_plan(run_ids)
    console.print(f"removing {safe_markup(plan.describe())}: {safe_markup(', '.join(plan.run_ids))}")
    if not yes:
        if not sys.stdin.isatty():
            raise UserError("not removing without confirmation: add --yes (nothing was removed)")
        if not typer.confirm("remove them?", default=False):
            raise UserError("cancelled (nothing was removed)")
    done = store.hygiene.remove_runs(run_ids)
    console.print(f"removed {safe_markup(done.describe())}; {_size(done.free_bytes)} free inside the file "
                  f"(`s3gym vacuum` returns it to the disk)")


@cli.command()
def vacuum(db: Optional[Path] = DbOption) -> None:
    """Compact the database file (returns the space of removed runs to the disk)."""
    store = _store(db, write=True)
    result = store.hygiene.vacuum()
    change = result.before_bytes - result.after_bytes
    total = f"{_size(change)} reclaimed" if change >= 0 else f"{_size(-change)} more, for now"
    console.print(f"vacuumed {safe_markup(store.path)}\n"
                  f"  database {_size(result.db_before):>10} -> {_size(result.db_after)}\n"
                  f"  WAL      {_size(result.wal_before):>10} -> {_size(result.wal_after)}\n"
                  f"  together {_size(result.before_bytes):>10} -> {_size(result.after_bytes)} ({total})",
                  soft_wrap=True, highlight=False)
    if result.page_before != result.page_after:
        console.print(f"  pages    {result.page_before:>7,} B -> {result.page_after:,} B (the size new files use)",
                      highlight=False)
    if not result.wal_folded:
        live = store.leases.live_leases()
        who = (f"{'a live run' if len(live) == 1 else f'{len(live)} live runs'} "
               f"({', '.join(f'{run_id} · PID {lease.pid}' for run_id, lease in sorted(live.items()))})"
               if live else "another process (a reader or a writer)")
        console.print(f"[yellow]the WAL was not folded back[/] ({result.frames_left:,} frames left): "
                      f"{safe_markup(who)} is using the file, so the compacted pages wait in the WAL; it "
                      f"shrinks when that ends (`s3gym vacuum` again then)", soft_wrap=True, highlight=False)
