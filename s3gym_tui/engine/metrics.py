"""Checkpoint-curve metrics of a run: Avg, Max, AUC+, NABA, and the Delta NABA table.

Pure functions: no I/O, no UI. A curve is a sequence of points ``(x, y)`` where ``x`` is the
number of exploration episodes done at the checkpoint and ``y`` the mean evaluation score there
(``y`` may be ``None`` for a checkpoint that is missing, e.g. failed or not yet evaluated).

Conventions (see docs of each function):

* Points are sorted by ``x``; two points with the same ``x`` are an error (``ValueError``).
* Missing points (``y is None``) are skipped by Avg and Max; for AUC+ the piecewise-linear curve
  runs straight between the present neighbours of a missing point. Nothing is extrapolated: if
  the last checkpoints are missing, the integral stops at the last present checkpoint.
* ``y_0`` is the value at the first (smallest-x) checkpoint. If it is missing, AUC+, NABA and
  ``final_delta`` are undefined and reported as ``None`` (they are relative to ``y_0``).
* AUC+ integrates a curve: with fewer than two present checkpoints (a run stopped after x = 0,
  or a run with one checkpoint) there is none, so AUC+, NABA and ``final_delta`` are ``None``,
  never 0 (a 0 would read as "no gain" and pull means and Delta NABA ties toward it).
* NABA = AUC+ / max(y_0, eps) exactly as the protocol states. For a negative or zero ``y_0``
  (Trust scores can be negative) the denominator is therefore ``eps``.
* A curve with no present point has every metric ``None``.
* Every ``None`` carries its reason in ``why`` (metric key -> a reason of engine.glossary.REASONS).
"""

from __future__ import annotations

from typing import Iterable, Optional, Sequence

import math

from s3gym_tui.engine.glossary import NABA_UNDEFINED, NO_CHECKPOINT, NO_Y0, ONE_CHECKPOINT
from s3gym_tui.models import Frozen

Point = tuple[float, Optional[float]]

TIE_TOLERANCE = 1e-9
OVERALL = "overall"

__all__ = [
    "Point", "TIE_TOLERANCE", "OVERALL", "CurveMetrics", "DeltaNabaRow",
    "sorted_points", "present_points", "avg", "max_score", "auc_plus", "naba",
    "curve_metrics", "curve_why", "game_eps", "game_curve_metrics", "delta_naba_table",
]


class CurveMetrics(Frozen):
    """The metrics of one run's checkpoint curve (``None`` = undefined, see module doc)."""

    avg: Optional[float]
    max: Optional[float]
    auc_plus: Optional[float]
    naba: Optional[float]
    y0: Optional[float]
    final: Optional[float]  # y at the last checkpoint that is present
    final_delta: Optional[float]  # final - y0
    n: int = 0  # checkpoints present
    missing: int = 0  # checkpoints with y = None
    why: dict[str, str] = {}  # metric key -> why it is None (engine.glossary.REASONS)


class DeltaNabaRow(Frozen):
    """Summary NABA - History NABA aggregated over models, for one game (or ``OVERALL``)."""

    game: str
    n: int  # pairs counted (both NABAs defined)
    wins: int  # Summary better: delta >= TIE_TOLERANCE
    losses: int  # History better: delta <= -TIE_TOLERANCE
    ties: int  # |delta| < TIE_TOLERANCE
    mean_delta: Optional[float]  # None when n == 0
    skipped: int = 0  # pairs with a missing (None) NABA on either side: not a win, loss or tie
    why: dict[str, str] = {}  # "mean_delta" -> why it is None


# ----- curves ---------------------------------------------------------------------------------
def _is_missing(y: Optional[float]) -> bool:
    return y is None or (isinstance(y, float) and math.isnan(y))


def sorted_points(points: Iterable[Point]) -> list[tuple[float, Optional[float]]]:
    """Points sorted by x, with NaN y treated as missing. Raises ValueError on a repeated x."""
    pts = sorted(((float(x), None if _is_missing(y) else float(y)) for x, y in points),
                 key=lambda p: p[0])
    for (xa, _), (xb, _) in zip(pts, pts[1:]):
        if xa == xb:
            raise ValueError(f"two checkpoints at x = {xa:g}")
    return pts


def present_points(points: Iterable[Point]) -> list[tuple[float, float]]:
    """The sorted points whose y is present."""
    return [(x, y) for x, y in sorted_points(points) if y is not None]


def avg(points: Iterable[Point]) -> Optional[float]:
    """Mean of the present y_k (missing checkpoints skipped); None if none is present."""
    ys = [y for _, y in present_points(points)]
    return sum(ys) / len(ys) if ys else None


def max_score(points: Iterable[Point]) -> Optional[float]:
    """Max of the present y_k; None if none is present."""
    ys = [y for _, y in present_points(points)]
    return max(ys) if ys else None


def _positive_part_area(width: float, da: float, db: float) -> float:
    """Integral over one linear segment of max(0, d(x)), d going linearly from da to db."""
    if da >= 0 and db >= 0:
        return width * (da + db) / 2.0  # trapezoid
    if da <= 0 and db <= 0:
        return 0.0
    # Crossing: only the triangle on the positive side counts. With p > 0 > m, the zero is at a
    # fraction p / (p - m) of the width from the positive end; area = 1/2 * base * height.
    p, m = max(da, db), min(da, db)
    return 0.5 * width * p * p / (p - m)


def auc_plus(points: Iterable[Point]) -> Optional[float]:
    """Integral from x_0 to x_K of max(0, y(x) - y_0), y piecewise-linear through present points.

    None when y_0 (the first checkpoint) is missing or fewer than two checkpoints are present (no
    curve to integrate). Missing interior points are bridged by the line between present
    neighbours; trailing missing points end the integral at the last present checkpoint (no
    extrapolation).
    """
    pts = sorted_points(points)
    if not pts or pts[0][1] is None:
        return None
    present = [(x, y) for x, y in pts if y is not None]
    if len(present) < 2:
        return None
    y0 = present[0][1]
    total = 0.0
    for (xa, ya), (xb, yb) in zip(present, present[1:]):
        total += _positive_part_area(xb - xa, ya - y0, yb - y0)
    return total


def naba(auc: Optional[float], y0: Optional[float], eps: float) -> Optional[float]:
    """NABA = AUC+ / max(y_0, eps). None if AUC+ or y_0 is None; eps must be > 0.

    A negative (or zero, or below-eps) y_0 uses eps as the denominator, exactly as the protocol
    defines it, so a run starting at a negative score is normalised by the game's score step.
    """
    if not eps > 0:
        raise ValueError(f"eps must be > 0, got {eps!r}")
    if auc is None or y0 is None:
        return None
    return auc / max(y0, eps)


def curve_why(points: Iterable[Point]) -> dict[str, str]:
    """Why each undefined metric of a curve is undefined (metric key -> reason); {} if none is."""
    pts = sorted_points(points)
    present = [(x, y) for x, y in pts if y is not None]
    relative = ("auc_plus", "naba", "final_delta")
    if not present:
        return dict.fromkeys(("avg", "max", "y0", "final") + relative, NO_CHECKPOINT)
    if pts[0][1] is None:
        return dict.fromkeys(("y0",) + relative, NO_Y0)
    if len(present) < 2:
        return dict.fromkeys(relative, ONE_CHECKPOINT)
    return {}


def curve_metrics(points: Iterable[Point], eps: float) -> CurveMetrics:
    """All metrics of one curve, with the game's NABA eps given explicitly."""
    pts = sorted_points(points)
    present = [(x, y) for x, y in pts if y is not None]
    y0 = pts[0][1] if pts else None
    auc = auc_plus(pts)
    final = present[-1][1] if present else None
    return CurveMetrics(
        avg=avg(pts),
        max=max_score(pts),
        auc_plus=auc,
        naba=naba(auc, y0, eps),
        y0=y0,
        final=final,
        final_delta=(final - y0) if (auc is not None and final is not None) else None,
        n=len(present),
        missing=len(pts) - len(present),
        why=curve_why(pts),
    )


def game_eps(game: str, mode: str = "eval") -> float:
    """The game's smallest non-zero score step in `mode` (NABA's eps)."""
    from s3gym_games import game_class

    return float(game_class(game).score_eps(mode))


def game_curve_metrics(points: Iterable[Point], game: str, mode: str = "eval") -> CurveMetrics:
    """`curve_metrics` with eps looked up from the game."""
    return curve_metrics(points, game_eps(game, mode))


# ----- Delta NABA (Summary vs History) --------------------------------------------------------
def _row(game: str, deltas: Sequence[float], skipped: int) -> DeltaNabaRow:
    wins = sum(1 for d in deltas if abs(d) >= TIE_TOLERANCE and d > 0)
    losses = sum(1 for d in deltas if abs(d) >= TIE_TOLERANCE and d < 0)
    return DeltaNabaRow(game=game, n=len(deltas), wins=wins, losses=losses,
                        ties=len(deltas) - wins - losses,
                        mean_delta=sum(deltas) / len(deltas) if deltas else None,
                        skipped=skipped, why={} if deltas else {"mean_delta": NABA_UNDEFINED})


def delta_naba_table(
    pairs: Iterable[tuple[str, str, Optional[float], Optional[float]]],
) -> list[DeltaNabaRow]:
    """Per-game Delta NABA rows from (game, model, summary_naba, history_naba), plus an overall row.

    delta = summary - history; a win is Summary better, a loss History better, |delta| < 1e-9 a
    tie. Pairs with a None NABA are skipped (counted in ``skipped``). Game rows come in order of
    first appearance; the last row has ``game == OVERALL`` and its mean is over all counted pairs
    (not a mean of the per-game means).
    """
    deltas: dict[str, list[float]] = {}
    skipped: dict[str, int] = {}
    for game, _model, summary, history in pairs:
        deltas.setdefault(game, [])
        skipped.setdefault(game, 0)
        if _is_missing(summary) or _is_missing(history):
            skipped[game] += 1
            continue
        deltas[game].append(float(summary) - float(history))
    rows = [_row(game, ds, skipped[game]) for game, ds in deltas.items()]
    everything = [d for ds in deltas.values() for d in ds]
    rows.append(_row(OVERALL, everything, sum(skipped.values())))
    return rows
