"""Self-judging metrics: how well the agent's self-score s tracks the verifier reward r.

Pure functions: no I/O, no UI. A step is a pair ``(s, r)``; ``s is None`` (or NaN) means the
reply had no usable self-score. Such steps are excluded from every rate below and counted in
``missing``; the rates are over the ``n`` steps that have a self-score.

* agreement = share of steps where (s > 0) == (r > 0)
* over-confidence = P(s > 0 and r <= 0); under-confidence = P(s <= 0 and r > 0)
  (so agreement + over + under == 1)
* NMAE = mean |norm(s) - norm(r)| where each series is min-max normalised over the steps
  considered: norm(v) = (v - min) / (max - min). If max == min for a series, all its normalised
  values are 0. Explicit bounds may be passed instead (used by the coupling, see there).
* Every rate is None when n == 0.
* One step's verdict (`verdict`): 'agree', 'over', 'under', or 'missing' without a self-score;
  the rates above are the shares of these verdicts, so a table's marks and the report agree.

Judgement-improvement coupling (`coupling`): exploration steps are split into blocks between
checkpoints, block t holding the steps of exploration episodes with index in [x_t, x_{t+1});
per block A_t (agreement) and E_t (NMAE) are computed, and g_t = (y_{t+1} - y_t) / width of the
game's score range. E_t is normalised with the bounds of all self-scored steps of all blocks
(run-wide), so blocks are on one scale. The report gives Pearson corr(A, g) and corr(-E, g) over
the usable blocks (A_t, E_t and g_t all defined); a correlation is None with fewer than 3 usable
blocks or when either series has zero variance.
"""

from __future__ import annotations

import math
import statistics
from typing import Any, Callable, Iterable, Literal, Optional, Sequence, Union

from s3gym_tui.models import Frozen

JudgePair = tuple[Optional[float], float]
Verdict = Literal["agree", "over", "under", "missing"]
VERDICTS: tuple[Verdict, ...] = ("agree", "over", "under", "missing")
Bounds = tuple[float, float]

__all__ = [
    "JudgePair", "Verdict", "VERDICTS", "verdict", "JudgingReport", "BlockStat", "CouplingReport",
    "judged", "agreement", "over_confidence", "under_confidence", "nmae", "judging_report",
    "row_pair", "group_reports", "reports_by_game", "reports_by_run",
    "pearson", "split_blocks", "coupling", "game_range_width",
]


class JudgingReport(Frozen):
    n: int  # steps with a self-score (the denominator of every rate)
    missing: int  # steps without a self-score
    agreement: Optional[float]
    nmae: Optional[float]
    over: Optional[float]
    under: Optional[float]


class BlockStat(Frozen):
    """One exploration block of the coupling: episodes [x_start, x_end)."""

    t: int
    x_start: float
    x_end: float
    n: int
    missing: int
    agreement: Optional[float]
    nmae: Optional[float]
    gain: Optional[float]  # (y_{t+1} - y_t) / score-range width


class CouplingReport(Frozen):
    blocks: tuple[BlockStat, ...]
    n_used: int  # blocks with agreement, nmae and gain all defined
    corr_agreement: Optional[float]  # Pearson corr(A_t, g_t)
    corr_neg_nmae: Optional[float]  # Pearson corr(-E_t, g_t)


# ----- single-series metrics --------------------------------------------------------------
def _missing(s: Any) -> bool:
    return s is None or (isinstance(s, float) and math.isnan(s))


def verdict(s: Optional[float], r: float) -> Verdict:
    """One step's self-judgement: 'agree' when (s > 0) == (r > 0), 'over' when s > 0 >= r,
    'under' when s <= 0 < r, 'missing' when the reply had no usable self-score."""
    if _missing(s):
        return "missing"
    said, got = float(s) > 0, float(r) > 0
    if said == got:
        return "agree"
    return "over" if said else "under"


def judged(pairs: Iterable[JudgePair]) -> tuple[list[tuple[float, float]], int]:
    """The pairs that have a self-score (as floats) and the number of missing ones."""
    kept: list[tuple[float, float]] = []
    missing = 0
    for s, r in pairs:
        if _missing(s):
            missing += 1
        else:
            kept.append((float(s), float(r)))
    return kept, missing


def _share(kept: Sequence[tuple[float, float]], kind: Verdict) -> Optional[float]:
    """Share of the self-scored steps `kept` whose verdict is `kind`."""
    return sum(1 for s, r in kept if verdict(s, r) == kind) / len(kept) if kept else None


def agreement(pairs: Iterable[JudgePair]) -> Optional[float]:
    """Share of self-scored steps with (s > 0) == (r > 0)."""
    return _share(judged(pairs)[0], "agree")


def over_confidence(pairs: Iterable[JudgePair]) -> Optional[float]:
    """P(s > 0 and r <= 0) over self-scored steps."""
    return _share(judged(pairs)[0], "over")


def under_confidence(pairs: Iterable[JudgePair]) -> Optional[float]:
    """P(s <= 0 and r > 0) over self-scored steps."""
    return _share(judged(pairs)[0], "under")


def _bounds(values: Sequence[float]) -> Bounds:
    return (min(values), max(values))


def _norm(v: float, bounds: Bounds) -> float:
    lo, hi = bounds
    return 0.0 if hi == lo else (v - lo) / (hi - lo)


def nmae(pairs: Iterable[JudgePair], s_bounds: Optional[Bounds] = None,
         r_bounds: Optional[Bounds] = None) -> Optional[float]:
    """Mean |norm(s) - norm(r)| over self-scored steps; each series min-max normalised.

    Bounds default to the min and max of the series over the steps considered; a constant
    series (max == min) normalises to all zeros. None when no step has a self-score.
    """
    kept, _ = judged(pairs)
    if not kept:
        return None
    sb = s_bounds if s_bounds is not None else _bounds([s for s, _ in kept])
    rb = r_bounds if r_bounds is not None else _bounds([r for _, r in kept])
    return sum(abs(_norm(s, sb) - _norm(r, rb)) for s, r in kept) / len(kept)


def judging_report(pairs: Iterable[JudgePair], s_bounds: Optional[Bounds] = None,
                   r_bounds: Optional[Bounds] = None) -> JudgingReport:
    """n, missing, agreement, NMAE, over- and under-confidence of a set of (s, r) steps."""
    pairs = list(pairs)
    kept, missing = judged(pairs)
    return JudgingReport(
        n=len(kept), missing=missing,
        agreement=_share(kept, "agree"),
        nmae=nmae(kept, s_bounds, r_bounds),
        over=_share(kept, "over"),
        under=_share(kept, "under"),
    )


# ----- grouping ----------------------------------------------------------------------------
Key = Union[str, int, Callable[[Any], Any]]


def row_pair(row: Any) -> JudgePair:
    """(s, r) of a row: attributes ``self_score``/``reward`` if present, else the last two items."""
    if hasattr(row, "self_score") and hasattr(row, "reward"):
        return row.self_score, row.reward
    return row[-2], row[-1]


def _key_fn(key: Key) -> Callable[[Any], Any]:
    if callable(key):
        return key
    if isinstance(key, int):
        return lambda row: row[key]
    return lambda row: getattr(row, key)


def group_reports(rows: Iterable[Any], key: Key) -> dict[Any, JudgingReport]:
    """One JudgingReport per group, in order of first appearance.

    ``rows`` are objects with ``self_score`` and ``reward`` attributes (plus whatever the key
    reads, e.g. ``game``, ``run_id``), or tuples ending in ``(s, r)`` such as
    ``(game, run_id, s, r)``. ``key`` is an attribute name, a tuple index, or a function of the
    row. NMAE is normalised within each group (so grouping by game normalises per game).
    """
    fn = _key_fn(key)
    groups: dict[Any, list[JudgePair]] = {}
    for row in rows:
        groups.setdefault(fn(row), []).append(row_pair(row))
    return {k: judging_report(v) for k, v in groups.items()}


def reports_by_game(rows: Iterable[Any]) -> dict[Any, JudgingReport]:
    """`group_reports` keyed by the rows' ``game`` attribute."""
    return group_reports(rows, "game")


def reports_by_run(rows: Iterable[Any]) -> dict[Any, JudgingReport]:
    """`group_reports` keyed by the rows' ``run_id`` attribute."""
    return group_reports(rows, "run_id")


# ----- judgement-improvement coupling --------------------------------------------------------
def pearson(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
    """Pearson correlation; None with fewer than 3 pairs or when either series is constant."""
    if len(xs) != len(ys):
        raise ValueError("series of different lengths")
    if len(xs) < 3:
        return None
    try:
        return statistics.correlation(list(xs), list(ys))
    except statistics.StatisticsError:
        return None


def split_blocks(xs: Sequence[float], steps: Iterable[tuple[float, Optional[float], float]],
                 ) -> list[list[JudgePair]]:
    """Group exploration steps ``(episode_index, s, r)`` into the K blocks [x_t, x_{t+1}).

    ``xs`` are the sorted checkpoint positions x_0 < ... < x_K. Steps outside [x_0, x_K) are
    ignored (they are followed by no checkpoint).
    """
    xs = list(xs)
    if any(b <= a for a, b in zip(xs, xs[1:])):
        raise ValueError("checkpoint x values must be strictly increasing")
    blocks: list[list[JudgePair]] = [[] for _ in range(max(len(xs) - 1, 0))]
    for episode, s, r in steps:
        for t in range(len(blocks)):
            if xs[t] <= episode < xs[t + 1]:
                blocks[t].append((s, r))
                break
    return blocks


def _width(score_range: Union[float, Bounds]) -> float:
    if isinstance(score_range, (int, float)):
        width = float(score_range)
    else:
        lo, hi = score_range
        width = float(hi) - float(lo)
    if not width > 0:
        raise ValueError(f"score range width must be > 0, got {width!r}")
    return width


def coupling(checkpoints: Iterable[tuple[float, Optional[float]]],
             steps: Iterable[tuple[float, Optional[float], float]],
             score_range: Union[float, Bounds]) -> CouplingReport:
    """Judgement-improvement coupling of one run.

    ``checkpoints``: (x_t, y_t) with y_t the mean eval score (None = missing; the gains of the
    blocks on either side are then undefined). ``steps``: (episode_index, s, r) for exploration
    steps. ``score_range``: the game's (min, max) score, or its width directly.
    g_t = (y_{t+1} - y_t) / width. NMAE uses run-wide bounds over all self-scored block steps.
    """
    width = _width(score_range)
    cps = sorted(((float(x), None if _missing(y) else float(y)) for x, y in checkpoints),
                 key=lambda p: p[0])
    xs = [x for x, _ in cps]
    blocks = split_blocks(xs, steps)
    everything, _ = judged(p for block in blocks for p in block)
    s_bounds = _bounds([s for s, _ in everything]) if everything else None
    r_bounds = _bounds([r for _, r in everything]) if everything else None
    stats: list[BlockStat] = []
    for t, block in enumerate(blocks):
        rep = judging_report(block, s_bounds, r_bounds)
        ya, yb = cps[t][1], cps[t + 1][1]
        gain = (yb - ya) / width if (ya is not None and yb is not None) else None
        stats.append(BlockStat(t=t, x_start=xs[t], x_end=xs[t + 1], n=rep.n, missing=rep.missing,
                               agreement=rep.agreement, nmae=rep.nmae, gain=gain))
    used = [b for b in stats if b.agreement is not None and b.nmae is not None and b.gain is not None]
    gains = [b.gain for b in used]
    return CouplingReport(
        blocks=tuple(stats),
        n_used=len(used),
        corr_agreement=pearson([b.agreement for b in used], gains),
        corr_neg_nmae=pearson([-b.nmae for b in used], gains),
    )


def game_range_width(game: str, mode: str = "eval") -> float:
    """Width (max - min) of the game's score range in `mode` (the coupling's normaliser)."""
    from games import game_class

    lo, hi = game_class(game).score_range(mode)
    return float(hi) - float(lo)
