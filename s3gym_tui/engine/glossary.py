"""What every reported figure means, in one place: the help screen, the report's tables and the CLI
read their definitions from here, so a number is never shown without its meaning, and an undefined
one never without its reason."""

from __future__ import annotations

from typing import Iterable, Mapping, Optional

DECIMALS = 2  # every metric in the report is shown with this many decimals
DASH = "—"

NMAE_SCALE = ("s and r are each min-max normalised per game over every self-scored step of that game's "
              "runs in the report (exploration and evaluation together), so NMAE by phase, per run, pooled "
              "and per coupling block share one scale; the scale is printed (table nmae_scale) and changes "
              "when runs of the game are added or removed")

# name -> definition (protocol.md's words, shortened)
METRICS: dict[str, str] = {
    "y0": "mean evaluation score at the first checkpoint (x = 0, before any exploration): the baseline",
    "Avg": "mean of the checkpoint means y_k over the checkpoints that have a score (cps = how many)",
    "Max": "highest checkpoint mean",
    "AUC+": "area between the checkpoint curve and y0 where the curve is above y0 (piecewise linear, "
            "x in exploration episodes); compare only within a game",
    "NABA": "AUC+ / max(y0, eps), eps = the game's smallest score step: the gain normalised by the baseline, "
            "the one curve metric averaged across games",
    "ΔNABA": "Summary NABA − History NABA for the same model and game; wins = Summary better, losses = "
             "History better, ties = equal; the mean is over the pairs with both NABAs defined",
    "pairs": "Summary/History run pairs of the same model and game with a defined ΔNABA (used by the mean)",
    "skipped": "pairs whose ΔNABA is undefined (either NABA is): neither a win, a loss nor a tie",
    "n": "steps judged (steps whose reply had a self-score: the denominator of every rate)",
    "missing": "steps whose reply had no usable self-score (counted apart, not as 0)",
    "agreement": "share of steps where (self-score s > 0) equals (verifier reward r > 0)",
    "NMAE": f"mean |norm(s) − norm(r)|, 0 = s tracks r exactly; {NMAE_SCALE}",
    "over": "over-confidence: share of steps with s > 0 but r <= 0",
    "under": "under-confidence: share of steps with s <= 0 but r > 0",
    "out of range": "steps whose self-score s lies outside what one step of the game can pay (each game's "
                    "range is listed with the report and in help): s states the step's immediate reward, so "
                    "it cannot be right; such steps still count in the rates",
    "out %": "share of the judged steps (n) whose self-score is out of range",
    "blocks": "exploration blocks between two checkpoints",
    "used": "blocks with agreement and the next checkpoint's gain defined (corr(−E, g) also needs the "
            "block's NMAE)",
    "corr(A, g)": "correlation of a block's agreement A_t with the gain g_t at the next checkpoint "
                  "(normalised by the game's score range)",
    "corr(−E, g)": "correlation of −NMAE_t with the gain g_t: positive = better judging came with "
                   "improvement",
    "calls": "model calls of the run (its steps and summaries)",
    "tok in": "input (prompt) tokens of those calls, cached ones included",
    "cached": "share of input tokens the provider read from its prompt cache (billed at its cached rate), "
              "over the calls whose provider reports it (OpenAI prompt_tokens_details.cached_tokens, "
              "Anthropic cache_read_input_tokens)",
    "cost $": "USD at litellm's prices, cached tokens at the cached rate, over the calls with a known price",
}

# Why a figure is undefined: the short reason shown in a table's `why` column -> what it means.
NO_CHECKPOINT = "no checkpoint"
NO_Y0 = "no y0"
ONE_CHECKPOINT = "one checkpoint"
NO_STEPS = "no steps"
S_CONSTANT = "s constant"
R_CONSTANT = "r constant"
FEW_BLOCKS = "< 3 blocks"
NO_VARIANCE = "no variance"
NABA_UNDEFINED = "NABA undefined"
NONE_DEFINED = "none defined"
NOT_SCORED = "not scored"
NOT_REPORTED = "not reported"
REASONS: dict[str, str] = {
    NO_CHECKPOINT: "no checkpoint has an evaluation score yet",
    NO_Y0: "the x = 0 checkpoint has no score, and AUC+, NABA and the final change are relative to it",
    ONE_CHECKPOINT: "fewer than two checkpoints have a score (a stopped or unfinished run): there is no "
                    "curve to integrate, so AUC+ and NABA are undefined, not 0",
    NO_STEPS: "no step with a self-score to judge",
    S_CONSTANT: "the self-score s takes one value over all the game's self-scored steps: min-max "
                "normalisation divides by zero, so NMAE is undefined (not 0)",
    R_CONSTANT: "the reward r takes one value over all the game's self-scored steps: min-max "
                "normalisation divides by zero, so NMAE is undefined",
    FEW_BLOCKS: "a correlation needs at least 3 usable blocks",
    NO_VARIANCE: "one of the correlated series does not vary: the correlation divides by zero",
    NABA_UNDEFINED: "Summary's or History's NABA is undefined, so their difference is too",
    NONE_DEFINED: "no defined value to aggregate",
    NOT_SCORED: "the checkpoint has no evaluation score (not reached, stopped before it, or 0 episodes)",
    NOT_REPORTED: "no call's provider said how many input tokens it read from its prompt cache (the "
                  "embedded and scripted models, servers that do not report it): unknown, not 0",
}
UNDEFINED = (f"{DASH} = not defined (never 0, and left out of every mean and count); "
             f"the why column names the reason")

TABLE_METRICS: dict[str, tuple[str, ...]] = {
    "curve": ("y0", "Avg", "Max", "AUC+", "NABA"),
    "delta": ("ΔNABA", "pairs", "skipped"),
    "judging": ("n", "missing", "agreement", "NMAE", "over", "under", "out of range", "out %"),
    "coupling": ("blocks", "used", "corr(A, g)", "corr(−E, g)"),
    "usage": ("calls", "tok in", "cached", "cost $"),
}
TABLE_REASONS: dict[str, tuple[str, ...]] = {
    "curve": (NO_CHECKPOINT, NO_Y0, ONE_CHECKPOINT),
    "delta": (NABA_UNDEFINED,),
    "judging": (NO_STEPS, S_CONSTANT, R_CONSTANT),
    "coupling": (FEW_BLOCKS, NO_VARIANCE),
    "usage": (NOT_REPORTED,),
}


def fmt_metric(value, decimals: int = DECIMALS) -> str:
    """The one number format of the report: fixed decimals, '—' when undefined."""
    if value is None:
        return DASH
    value = float(value)
    if value != value:  # NaN
        return DASH
    text = f"{value:.{decimals}f}"
    return text if text not in (f"-{0:.{decimals}f}",) else f"{0:.{decimals}f}"


def fmt_share(value) -> str:
    """A share (0..1) as a percentage with one decimal, '—' when undefined."""
    if value is None or value != value:
        return DASH
    return f"{float(value):.1%}"


def fmt_signed(value, decimals: int = DECIMALS) -> str:
    text = fmt_metric(value, decimals)
    return f"+{text}" if text != DASH and float(value) > 0 and not text.startswith("-") else text


def definitions(table: str) -> list[tuple[str, str]]:
    """(name, meaning) of the figures of one report table."""
    return [(name, METRICS[name]) for name in TABLE_METRICS[table]]


# One step's self-judgement (engine.judging.verdict): a mark that carries it without colour (drawn
# beside s and r at every width, NO_COLOR and monochrome included), a short label and its meaning.
VERDICT_MARKS: dict[str, str] = {"agree": "✓", "over": "▲", "under": "▼", "missing": "?"}
VERDICT_LABELS: dict[str, str] = {"agree": "agree", "over": "over", "under": "under", "missing": "no s"}
VERDICT_MEANINGS: dict[str, str] = {
    "agree": "(s > 0) equals (r > 0)",
    "over": "over-confidence: s > 0 but r <= 0",
    "under": "under-confidence: s <= 0 but r > 0",
    "missing": "the reply had no usable self-score (missing, not 0)",
}


# A self-score outside what one step of its game can pay (engine.judging.out_of_range): this mark after
# the value, wherever a self-score is shown, and the game's range beside it (engine.judging.out_of_range_note).
OUT_OF_RANGE_MARK = "!"
OUT_OF_RANGE_MEANING = ("the self-score is outside what one step of the game can pay (it states the step's "
                        "immediate reward, so it cannot be right)")


def reasons(table: str) -> list[tuple[str, str]]:
    """(reason, meaning) of the undefined figures one report table can show."""
    return [(name, REASONS[name]) for name in TABLE_REASONS[table]]


def why_text(why: Mapping[str, str], names: Optional[Mapping[str, str]] = None,
             keys: Optional[Iterable[str]] = None) -> Optional[str]:
    """The `why` cell of a row: its undefined figures grouped by reason, e.g. "AUC+, NABA: one
    checkpoint"; None when every figure is defined. `names` maps a metric key to the name shown
    (default: the key); `keys` limits it to the figures the table shows."""
    wanted = list(keys) if keys is not None else list(why)
    by_reason: dict[str, list[str]] = {}
    for key in wanted:
        if key in why:
            by_reason.setdefault(why[key], []).append((names or {}).get(key, key))
    if not by_reason:
        return None
    return "; ".join(f"{', '.join(metrics)}: {reason}" for reason, metrics in by_reason.items())


def reasons_in(texts: Iterable[Optional[str]]) -> list[str]:
    """The reasons (keys of REASONS) named in `why` cells, in REASONS order."""
    joined = " ".join(t for t in texts if t)
    return [name for name in REASONS if f": {name}" in joined]
