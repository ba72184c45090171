"""Store-level records not (yet) in models.py: training datasets and their rows."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from s3gym_tui.models import Frozen, utcnow

RowKind = Literal["kept", "corrected", "dropped"]
ROW_KINDS: tuple[str, ...] = ("kept", "corrected", "dropped")


class DatasetRow(Frozen):
    """One exploration step as a training example: kept as is, corrected, or dropped."""

    episode_id: str
    step_index: int = Field(ge=0)
    kind: RowKind
    messages: tuple[dict[str, Any], ...] = ()  # chat messages (prompt as seen -> reply); empty if dropped


class Dataset(Frozen):
    """A training set built from a run's exploration steps by a selection rule."""

    id: str
    run_id: Optional[str]
    rule: dict[str, Any] = Field(default_factory=dict)  # e.g. {"threshold": 0, "correction": null}
    created_at: str = Field(default_factory=utcnow)
    counts: dict[str, int] = Field(default_factory=dict)  # rows per kind
