"""Saying what a person's curation of a summary (edit, veto, unveto, pin, unpin) makes the agent use,
and from which experience state: decided by models.summary_in_use, the rule the runner and the
store begin every state with (pinned wins, vetoed versions are skipped)."""

from __future__ import annotations

from typing import Optional, Sequence

from s3gym_tui.models import Run, Summary, summary_in_use


def what_is_used(versions: Sequence[Summary], x: int) -> str:
    """What state x is played with, given the versions as they are now (Summaries.begin_state's rule):
    the pinned version as is; at x = 0 the current version as is (nothing to summarise yet); else a
    summary the model writes from the current version (or from scratch without one)."""
    current = summary_in_use(versions)
    if current is not None and current.pinned:
        return f"pinned v{current.version} as is (no new summaries while it is pinned)"
    if x == 0:
        return f"v{current.version} as is" if current is not None else "no summary"
    if current is None:
        return "a summary the model writes from scratch (no active version)"
    return f"a summary the model writes from v{current.version}"


def why_not_used(versions: Sequence[Summary], summary: Summary) -> Optional[str]:
    """Why `summary` is not the version the agent goes by (None when it is)."""
    current = summary_in_use(versions)
    if current is not None and current.id == summary.id:
        return None
    if summary.status == "vetoed":
        return f"v{summary.version} is vetoed: the agent skips it"
    if current is not None and current.pinned:
        return f"v{summary.version} is not used while v{current.version} is pinned"
    if current is not None:
        return f"v{summary.version} is not used: v{current.version} is newer"
    return None


def effect_text(run: Run, x: Optional[int], live: bool, versions: Sequence[Summary],
                summary: Optional[Summary] = None) -> str:
    """One sentence: from which experience state x the curation counts, and what that state will
    use. State x is what exploration episode #x+1 and, when x is a checkpoint, the evaluation at x
    are played with; the store records x with the action (summary_actions.effective_from_x).
    `versions`: the run's versions after the action; `summary`: the version acted on."""
    if x is None:
        return ("This run starts no more episodes: no episode will use it (t tests a version on "
                "the eval seeds).")
    cfg = run.config
    where = []
    if x < cfg.explore_episodes:
        where.append(f"exploration episode #{x + 1}")
    if x in cfg.checkpoints():
        where.append(f"the evaluation at checkpoint x={x}")
    when = "" if live else ", when the run resumes"
    text = (f"From state x={x}{when}: {' and '.join(where) or 'the next episode'} will use "
            f"{what_is_used(versions, x)}.")
    note = why_not_used(versions, summary) if summary is not None else None
    return f"{text} {note}." if note else text
