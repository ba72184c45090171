"""What every reported figure means, in one place: the help screen, the report's tables and the CLI
read their definitions from here, so a number is never shown without its meaning."""

from __future__ import annotations

DECIMALS = 2  # every metric in the report is shown with this many decimals
DASH = "—"

# name -> definition (protocol.md's words, shortened)
METRICS: dict[str, str] = {
    "y0": "mean evaluation score at the first checkpoint (x = 0, before any exploration): the baseline",
    "Avg": "mean of the checkpoint means y_k over all checkpoints",
    "Max": "highest checkpoint mean",
    "AUC+": "area between the checkpoint curve and y0 where the curve is above y0 (piecewise linear, "
            "x in exploration episodes); compare only within a game",
    "NABA": "AUC+ / max(y0, eps), eps = the game's smallest score step: the gain normalised by the baseline",
    "ΔNABA": "Summary NABA − History NABA for the same model and game; wins = Summary better, losses = "
             "History better, ties = equal",
    "pairs": "Summary/History run pairs of the same model and game among the chosen runs",
    "skipped": "pairs left out because one side has no NABA (its x = 0 checkpoint is missing)",
    "n": "steps judged (steps with a verifier reward)",
    "missing": "steps whose reply had no usable self-score (counted apart, not as 0)",
    "agreement": "share of steps where (self-score s > 0) equals (verifier reward r > 0)",
    "NMAE": "mean |norm(s) − norm(r)|, each min-max normalised over the steps: 0 = s tracks r exactly",
    "over": "over-confidence: share of steps with s > 0 but r <= 0",
    "under": "under-confidence: share of steps with s <= 0 but r > 0",
    "blocks": "exploration blocks between two checkpoints",
    "used": "blocks with agreement, NMAE and the next checkpoint's gain all defined",
    "corr(A, g)": "correlation of a block's agreement A_t with the gain g_t at the next checkpoint "
                  "(normalised by the game's score range)",
    "corr(−E, g)": "correlation of −NMAE_t with the gain g_t: positive = better judging came with "
                   "improvement",
}
UNDEFINED = (f"{DASH} = not defined: no checkpoint or step to compute it from, fewer than 3 usable blocks "
             f"for a correlation, or a series that does not vary")

TABLE_METRICS: dict[str, tuple[str, ...]] = {
    "curve": ("y0", "Avg", "Max", "AUC+", "NABA"),
    "delta": ("ΔNABA", "pairs", "skipped"),
    "judging": ("n", "missing", "agreement", "NMAE", "over", "under"),
    "coupling": ("blocks", "used", "corr(A, g)", "corr(−E, g)"),
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
