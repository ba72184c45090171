"""Self-judging metrics: how well the agent's self-score s tracks the verifier reward r.

Pure functions: no I/O, no UI. A step is a pair ``(s, r)``; ``s is None`` (or NaN) means the
reply had no usable self-score. Such steps are excluded from every rate below and counted in
``missing``; the rates are over the ``n`` steps that have a self-score.

* agreement = share of steps where (s > 0) == (r > 0)
* over-confidence = P(s > 0 and r <= 0); under-confidence = P(s <= 0 and r > 0)
  (so agreement + over + under == 1)
* NMAE = mean |norm(s) - norm(r)| with norm(v) = (v - min) / (max - min), s and r each with its
  own bounds. The report uses ONE scale per game (`game_scales`): the bounds of s and of r over
  every self-scored step of that game's runs in the report, both phases, so NMAE by phase, per
  run, pooled and per coupling block are comparable. Called without bounds, a function uses the
  bounds of the steps it is given. A series whose bounds are equal (max == min) cannot be
  min-max normalised (0/0): NMAE is then None, with the reason "s constant" or "r constant"
  (it was 0 for such a series once, which made NMAE the mean of norm(r), a number that meant
  nothing).
* Every rate is None when n == 0 ("no steps").
* One step's verdict (`verdict`): 'agree', 'over', 'under', or 'missing' without a self-score;
  the rates above are the shares of these verdicts, so a table's marks and the report agree.
* Out of range (`out_of_range`): the self-score states the step's immediate reward, so one outside
  what one step of the game can pay in its mode (the game's `step_reward_range`, e.g. trust -1..3)
  cannot be right. The one decision the screens' marks and the tables' counts use; a missing
  self-score is not out of range. A report counts them (`out_of_range`, and its share of n).

Judgement-improvement coupling (`coupling`): exploration steps are split into blocks between
checkpoints, block t holding the steps of exploration episodes with index in [x_t, x_{t+1});
per block A_t (agreement) and E_t (NMAE) are computed, and g_t = (y_{t+1} - y_t) / width of the
game's score range. E_t uses the game's scale when given (else the bounds of all self-scored steps
of all blocks), so blocks are on one scale. The report gives Pearson corr(A, g) over the blocks with
A_t and g_t defined and corr(-E, g) over those with E_t and g_t defined (a game whose self-scores
never vary has no E_t, yet its corr(A, g) stands); a correlation is None with fewer than 3 usable
blocks ("< 3 blocks") or when either series has zero variance ("no variance").

Every None of a report carries its reason in ``why`` (key -> a reason of engine.glossary.REASONS).
"""

from __future__ import annotations

import math
import statistics
from functools import lru_cache
from typing import Any, Callable, Iterable, Literal, Optional, Sequence, Union

from s3gym_tui.engine.glossary import FEW_BLOCKS, NO_STEPS, NO_VARIANCE, R_CONSTANT, S_CONSTANT
from s3gym_tui.models import Frozen

JudgePair = tuple[Optional[float], float]
Verdict = Literal["agree", "over", "under", "missing"]
VERDICTS: tuple[Verdict, ...] = ("agree", "over", "under", "missing")
Bounds = tuple[float, float]
RATES = ("agreement", "nmae", "over", "under")

__all__ = [
    "JudgePair", "Verdict", "VERDICTS", "verdict", "JudgingReport", "RANGE_TOLERANCE", "step_range",
    "out_of_range", "range_text", "out_of_range_note", "count_out_of_range", "BlockStat", "CouplingReport", "Scale",
    "judged", "agreement", "over_confidence", "under_confidence", "nmae", "nmae_why", "judging_report",
    "scale_of", "row_pair", "group_reports", "reports_by_game", "reports_by_run",
    "pearson", "pearson_why", "correlations", "split_blocks", "coupling", "game_range_width",
]


class JudgingReport(Frozen):
    n: int  # steps with a self-score (the denominator of every rate)
    missing: int  # steps without a self-score
    agreement: Optional[float]
    nmae: Optional[float]
    over: Optional[float]
    under: Optional[float]
    why: dict[str, str] = {}  # rate key -> why it is None (engine.glossary.REASONS)
    out_of_range: Optional[int] = None  # self-scores outside what one step can pay (None: not checked)
    out_of_range_share: Optional[float] = None  # out_of_range / n


class Scale(Frozen):
    """The bounds NMAE normalises s and r with (one per game in a report) and the steps they span."""

    s: Optional[Bounds]  # None: no self-scored step
    r: Optional[Bounds]
    n: int = 0


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
    n_used: int  # blocks with agreement and gain defined (corr(A, g)'s; corr(-E, g) also needs NMAE)
    corr_agreement: Optional[float]  # Pearson corr(A_t, g_t)
    corr_neg_nmae: Optional[float]  # Pearson corr(-E_t, g_t)
    why: dict[str, str] = {}  # "corr_agreement" / "corr_neg_nmae" -> why it is None


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


RANGE_TOLERANCE = 1e-9  # float noise allowed beyond the ends of a step's range


@lru_cache(maxsize=None)
def step_range(game: str, mode: str) -> Bounds:
    """The (min, max) verifier reward one step of `game` can pay in `mode` (the game's rules)."""
    from s3gym_games import game_class

    lo, hi = game_class(game).step_reward_range(mode)
    return float(lo), float(hi)


def out_of_range(game: str, mode: str, s: Optional[float]) -> bool:
    """True when a stated self-score lies outside what one step of `game` can pay in `mode`: it states
    the step's immediate reward, so it cannot be right. A missing self-score is not out of range."""
    if _missing(s):
        return False
    lo, hi = step_range(game, mode)
    return not lo - RANGE_TOLERANCE <= float(s) <= hi + RANGE_TOLERANCE


def range_text(game: str, mode: Optional[str] = None) -> str:
    """The step range as shown: '-1..3'. Without a mode: both modes' ranges, one when they agree."""
    from s3gym_games import MODES

    texts = {m: "{:g}..{:g}".format(*step_range(game, m)) for m in ((mode,) if mode else MODES)}
    if len(set(texts.values())) == 1:
        return next(iter(texts.values()))
    return ", ".join(f"{m} {text}" for m, text in texts.items())


def out_of_range_note(game: str, mode: Optional[str] = None) -> str:
    """What the out-of-range mark means, for one game: 'outside what one step of trust can pay: -1..3'."""
    return f"outside what one step of {game} can pay: {range_text(game, mode)}"


def count_out_of_range(game: str, mode: str, pairs: Iterable[JudgePair]) -> int:
    """How many of the steps `pairs` (all played in `mode`) state a self-score out of range."""
    return sum(out_of_range(game, mode, s) for s, _ in pairs)


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
    return (v - lo) / (hi - lo)


def scale_of(pairs: Iterable[JudgePair]) -> Scale:
    """The bounds of s and of r over the self-scored steps of `pairs` (NMAE's normaliser)."""
    kept, _ = judged(pairs)
    if not kept:
        return Scale(s=None, r=None, n=0)
    return Scale(s=_bounds([s for s, _ in kept]), r=_bounds([r for _, r in kept]), n=len(kept))


def nmae_why(pairs: Iterable[JudgePair], s_bounds: Optional[Bounds] = None,
             r_bounds: Optional[Bounds] = None) -> tuple[Optional[float], Optional[str]]:
    """(NMAE, None) or (None, why): mean |norm(s) - norm(r)| over the self-scored steps.

    Bounds default to the min and max of each series over the steps given. Undefined with no
    self-scored step ("no steps") or when a series' bounds are equal: min-max normalisation is then
    0/0 ("s constant", "r constant").
    """
    kept, _ = judged(pairs)
    if not kept:
        return None, NO_STEPS
    sb = s_bounds if s_bounds is not None else _bounds([s for s, _ in kept])
    rb = r_bounds if r_bounds is not None else _bounds([r for _, r in kept])
    if not sb[1] > sb[0]:
        return None, S_CONSTANT
    if not rb[1] > rb[0]:
        return None, R_CONSTANT
    return sum(abs(_norm(s, sb) - _norm(r, rb)) for s, r in kept) / len(kept), None


def nmae(pairs: Iterable[JudgePair], s_bounds: Optional[Bounds] = None,
         r_bounds: Optional[Bounds] = None) -> Optional[float]:
    """Mean |norm(s) - norm(r)| over self-scored steps, or None where undefined (see `nmae_why`)."""
    return nmae_why(pairs, s_bounds, r_bounds)[0]


def judging_report(pairs: Iterable[JudgePair], s_bounds: Optional[Bounds] = None,
                   r_bounds: Optional[Bounds] = None, scale: Optional[Scale] = None,
                   out_of_range: Optional[int] = None) -> JudgingReport:
    """n, missing, agreement, NMAE, over- and under-confidence of a set of (s, r) steps.

    NMAE uses `scale` (the game's, in a report) or the explicit bounds, else the steps' own.
    `out_of_range`: how many of these steps stated a self-score out of range (`count_out_of_range`
    per mode: a set may hold both phases); its share of n is reported beside it."""
    pairs = list(pairs)
    kept, missing = judged(pairs)
    if scale is not None:
        s_bounds, r_bounds = scale.s, scale.r
    error, error_why = nmae_why(kept, s_bounds, r_bounds)
    why = dict.fromkeys(RATES, NO_STEPS) if not kept else {}
    if error_why is not None:
        why["nmae"] = error_why
    if out_of_range is not None and not kept:
        why["out_of_range_share"] = NO_STEPS
    return JudgingReport(
        n=len(kept), missing=missing,
        agreement=_share(kept, "agree"),
        nmae=error,
        over=_share(kept, "over"),
        under=_share(kept, "under"),
        why=why,
        out_of_range=out_of_range,
        out_of_range_share=out_of_range / len(kept) if out_of_range is not None and kept else None,
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


def group_reports(rows: Iterable[Any], key: Key, scale_key: Optional[Key] = None) -> dict[Any, JudgingReport]:
    """One JudgingReport per group, in order of first appearance.

    ``rows`` are objects with ``self_score`` and ``reward`` attributes (plus whatever the key
    reads, e.g. ``game``, ``run_id``), or tuples ending in ``(s, r)`` such as
    ``(game, run_id, s, r)``. ``key`` is an attribute name, a tuple index, or a function of the
    row. NMAE's scale is taken over the rows of the same ``scale_key`` (default: the group itself),
    e.g. per game for groups that are runs.
    """
    fn = _key_fn(key)
    scale_fn = _key_fn(scale_key) if scale_key is not None else fn
    rows = list(rows)
    groups: dict[Any, list[JudgePair]] = {}
    pools: dict[Any, list[JudgePair]] = {}
    scale_of_group: dict[Any, Any] = {}
    for row in rows:
        groups.setdefault(fn(row), []).append(row_pair(row))
        pools.setdefault(scale_fn(row), []).append(row_pair(row))
        scale_of_group.setdefault(fn(row), scale_fn(row))
    scales = {k: scale_of(v) for k, v in pools.items()}
    return {k: judging_report(v, scale=scales[scale_of_group[k]]) for k, v in groups.items()}


def reports_by_game(rows: Iterable[Any]) -> dict[Any, JudgingReport]:
    """`group_reports` keyed by the rows' ``game`` attribute (each game on its own scale)."""
    return group_reports(rows, "game")


def reports_by_run(rows: Iterable[Any]) -> dict[Any, JudgingReport]:
    """`group_reports` keyed by the rows' ``run_id`` attribute, NMAE on its game's scale."""
    return group_reports(rows, "run_id", scale_key="game")


# ----- judgement-improvement coupling --------------------------------------------------------
def pearson_why(xs: Sequence[float], ys: Sequence[float]) -> tuple[Optional[float], Optional[str]]:
    """(Pearson correlation, None), or (None, why): fewer than 3 pairs ("< 3 blocks") or a series
    that does not vary ("no variance")."""
    if len(xs) != len(ys):
        raise ValueError("series of different lengths")
    if len(xs) < 3:
        return None, FEW_BLOCKS
    try:
        return statistics.correlation(list(xs), list(ys)), None
    except statistics.StatisticsError:
        return None, NO_VARIANCE


def pearson(xs: Sequence[float], ys: Sequence[float]) -> Optional[float]:
    """Pearson correlation; None with fewer than 3 pairs or when either series is constant."""
    return pearson_why(xs, ys)[0]


def correlations(blocks: Sequence[BlockStat]) -> tuple[Optional[float], Optional[float], dict[str, str]]:
    """corr(A, g) over the blocks with A_t and g_t, corr(-E, g) over those with E_t and g_t, and why either
    is None. Each needs only its own series: an NMAE that cannot be normalised (s constant) leaves
    corr(A, g) defined."""
    with_a = [b for b in blocks if b.agreement is not None and b.gain is not None]
    with_e = [b for b in blocks if b.nmae is not None and b.gain is not None]
    corr_a, why_a = pearson_why([b.agreement for b in with_a], [b.gain for b in with_a])
    corr_e, why_e = pearson_why([-b.nmae for b in with_e], [b.gain for b in with_e])
    why = {k: v for k, v in (("corr_agreement", why_a), ("corr_neg_nmae", why_e)) if v is not None}
    return corr_a, corr_e, why


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
             score_range: Union[float, Bounds], scale: Optional[Scale] = None) -> CouplingReport:
    """Judgement-improvement coupling of one run.

    ``checkpoints``: (x_t, y_t) with y_t the mean eval score (None = missing; the gains of the
    blocks on either side are then undefined). ``steps``: (episode_index, s, r) for exploration
    steps. ``score_range``: the game's (min, max) score, or its width directly.
    g_t = (y_{t+1} - y_t) / width. NMAE uses `scale` (the game's, in a report), else the bounds
    of all self-scored block steps of the run.
    """
    width = _width(score_range)
    cps = sorted(((float(x), None if _missing(y) else float(y)) for x, y in checkpoints),
                 key=lambda p: p[0])
    xs = [x for x, _ in cps]
    blocks = split_blocks(xs, steps)
    if scale is None:
        scale = scale_of(p for block in blocks for p in block)
    stats: list[BlockStat] = []
    for t, block in enumerate(blocks):
        rep = judging_report(block, scale=scale)
        ya, yb = cps[t][1], cps[t + 1][1]
        gain = (yb - ya) / width if (ya is not None and yb is not None) else None
        stats.append(BlockStat(t=t, x_start=xs[t], x_end=xs[t + 1], n=rep.n, missing=rep.missing,
                               agreement=rep.agreement, nmae=rep.nmae, gain=gain))
    corr_a, corr_e, why = correlations(stats)
    return CouplingReport(
        blocks=tuple(stats),
        n_used=sum(b.agreement is not None and b.gain is not None for b in stats),
        corr_agreement=corr_a,
        corr_neg_nmae=corr_e,
        why=why,
    )


def game_range_width(game: str, mode: str = "eval") -> float:
    """Width (max - min) of the game's score range in `mode` (the coupling's normaliser)."""
    from s3gym_games import game_class

    lo, hi = game_class(game).score_range(mode)
    return float(hi) - float(lo)
