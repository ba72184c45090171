"""Saying when a person's curation of a summary (edit, veto, pin) takes effect in its run."""

from __future__ import annotations

from typing import Optional

from s3gym_tui.models import Run


def effect_text(run: Run, x: Optional[int], live: bool, action: str = "edit") -> str:
    """One sentence: the first experience state x that sees the curation, as episodes.

    State x is what exploration episode #x+1 and, when x is a checkpoint, the evaluation at x are
    played with; the store records x with the action (summary_actions.effective_from_x)."""
    if x is None:
        return ("This run starts no more episodes: no episode will use it (t tests a version on "
                "the eval seeds).")
    cfg = run.config
    where = []
    if x < cfg.explore_episodes:
        where.append(f"exploration episode #{x + 1}")
    if x in cfg.checkpoints():
        where.append(f"the evaluation at checkpoint x={x}")
    how = {"edit": "will first see it (as the base of the summary written for it, or as is if "
                   "pinned)",
           "veto": "will be the first to fall back to the previous active version",
           "unveto": "will be the first that can use it again",
           "pin": "will be the first to use it as is (no new summaries while pinned)",
           "unpin": "will be the first to get a newly written summary again"}.get(action, "will see it")
    when = "" if live else " when the run resumes"
    return f"From state x={x}: {' and '.join(where) or 'the next episode'} {how}{when}."
