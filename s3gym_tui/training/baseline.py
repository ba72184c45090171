"""The right baseline of a training: every checkpoint against the base served the same way, and the gain
split into what parsing gained and what play gained.

The evaluation run scores replies as the model wrote them against x = 0 as written (`delta`). A
checkpoint that learnt only the answer line (a format warm start, a constrained half of every GRPO
group) beats that base because the base's replies do not parse, while the same base constrained to the
game's grammar from the first token scores what the checkpoint scores. So, per checkpoint:

- format gain: the share of replies (as written) that parse, minus the base's;
- play gain: the checkpoint under the grammar minus the base under the grammar (both constrained the
  same way, so the format is out of the comparison); without a constrained evaluation, the checkpoint
  as written minus nothing: not known ("—");
- verdict: play gain when the constrained checkpoint beats the constrained base, format gain when the
  checkpoint beats the free base but not the constrained one, no gain otherwise.

Torch-free (the CLI, the app and the report import it).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from s3gym_tui.training.evaluate import NEGATIVE_TOLERANCE, CheckpointRow, TrainingReport

BASELINE_FREE = "x = 0 (the base) served the same way, replies as written"
BASELINE_GRAMMAR = "x = 0 under the game's grammar"


@dataclass(frozen=True)
class GainSplit:
    x: int
    total: Optional[float]  # mean as written - the base's as written
    format_gain: Optional[float]  # parsed share - the base's parsed share (0..1 units)
    play_gain: Optional[float]  # constrained mean - the base's constrained mean
    base_constrained: Optional[float]  # the base's mean under the grammar
    verdict: str  # "play gain" | "format gain" | "no gain" | "not split" (no constrained evaluation)

    def as_dict(self) -> dict:
        return {"x": self.x, "total": self.total, "format_gain": self.format_gain, "play_gain": self.play_gain,
                "base_under_grammar": self.base_constrained, "verdict": self.verdict}


def split(row: CheckpointRow, base: Optional[CheckpointRow]) -> GainSplit:
    """The gain of checkpoint `row` over `base` (x = 0 of the same report), split (module docstring)."""
    format_gain = None
    if base is not None and row.parsed_share is not None and base.parsed_share is not None:
        format_gain = row.parsed_share - base.parsed_share
    play = row.grammar.delta if row.grammar is not None else None
    base_constrained = base.grammar.mean if base is not None and base.grammar is not None else None
    if play is None:
        verdict = "not split"
    elif play > NEGATIVE_TOLERANCE:
        verdict = "play gain"
    elif row.delta is not None and row.delta > NEGATIVE_TOLERANCE:
        verdict = "format gain"
    else:
        verdict = "no gain"
    return GainSplit(row.epoch, row.delta, format_gain, play, base_constrained, verdict)


def splits(report: TrainingReport) -> list[GainSplit]:
    """One split per trained checkpoint (x > 0) of the report."""
    base = next((r for r in report.rows if r.epoch == 0), None)
    return [split(row, base) for row in report.rows if row.epoch > 0]


def baseline_text(report: TrainingReport) -> str:
    """Which baseline the report's deltas use, in words."""
    if report.grammar_run is None:
        return (f"baseline: {BASELINE_FREE}; no evaluation under the grammar, so a format gain is not told apart "
                f"from a play gain")
    return (f"baseline: {BASELINE_FREE}; play gain: every reply constrained from its first token, against "
            f"{BASELINE_GRAMMAR} (run {report.grammar_run.id})")


def outcome(report: TrainingReport) -> Optional[GainSplit]:
    """The split of the training's last checkpoint (what it ends as), None without one."""
    found = splits(report)
    return found[-1] if found else None


def outcome_line(report: TrainingReport) -> Optional[str]:
    """'format gain: ...' / 'play gain: ...' / 'no gain ...' for the last checkpoint, in one line."""
    last = outcome(report)
    if last is None or last.total is None:
        return None

    def signed(value: Optional[float]) -> str:
        return "—" if value is None else f"{value:+.2f}"

    parsed = "—" if last.format_gain is None else f"{100 * last.format_gain:+.0f} pp"
    figures = (f"x={last.x}: {signed(last.total)} as written, parsed replies {parsed}, "
               f"{signed(last.play_gain)} under the grammar (base under the grammar "
               f"{'—' if last.base_constrained is None else f'{last.base_constrained:.2f}'})")
    if last.verdict == "format gain":
        return f"format gain only: {figures}: the checkpoint scores no more than the base constrained to the grammar"
    if last.verdict == "play gain":
        return f"play gain: {figures}"
    if last.verdict == "no gain":
        return f"no gain: {figures}"
    return f"gain not split (no evaluation under the grammar): {signed(last.total)} as written, parsed replies {parsed}"


__all__ = ["BASELINE_FREE", "BASELINE_GRAMMAR", "GainSplit", "baseline_text", "outcome", "outcome_line", "split",
           "splits"]
