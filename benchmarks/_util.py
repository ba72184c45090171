"""Small helpers shared by the benchmark scripts (timing statistics, table printing)."""

from __future__ import annotations

import os
import statistics

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def stats_ms(samples: list[float]) -> tuple[float, float]:
    """(median, p95) in milliseconds of samples given in seconds."""
    ordered = sorted(samples)
    p95 = ordered[min(len(ordered) - 1, int(round(0.95 * (len(ordered) - 1))))]
    return statistics.median(ordered) * 1000, p95 * 1000


def print_table(title: str, header: list[str], rows: list[list]) -> None:
    from rich.console import Console
    from rich.table import Table

    table = Table(title=title)
    for col in header:
        table.add_column(col, justify="right" if col != header[0] else "left")
    for row in rows:
        table.add_row(*[f"{v:,.2f}" if isinstance(v, float) else str(v) for v in row])
    Console(width=160).print(table)
