"""Store-level records not (yet) in models.py: training datasets and their rows, trainings (SFT, GRPO
experts, distillation students) with their checkpoints, losses and sources, and distillation studies."""

from __future__ import annotations

from typing import Any, Literal, Optional

from pydantic import Field

from s3gym_tui.models import Frozen, utcnow

RowKind = Literal["kept", "corrected", "dropped"]
ROW_KINDS: tuple[str, ...] = ("kept", "corrected", "dropped")

TrainingMethod = Literal["sft", "grpo", "taspo", "distill-off", "distill-on"]
TRAINING_METHODS: tuple[str, ...] = ("sft", "grpo", "taspo", "distill-off", "distill-on")
# expert: one game, from a run; phase1/phase2: the two-phase student; the rest: its ablations
TrainingRole = Literal["expert", "phase1", "phase2", "off-only", "on-only", "mixed-sft"]
TRAINING_ROLES: tuple[str, ...] = ("expert", "phase1", "phase2", "off-only", "on-only", "mixed-sft")
TrainingStatus = Literal["created", "training", "evaluating", "finished", "interrupted", "failed"]
TRAINING_STATUSES: tuple[str, ...] = ("created", "training", "evaluating", "finished", "interrupted", "failed")
RewardSource = Literal["self", "stated", "oracle"]
SourceKind = Literal["dataset", "rollout", "prompt", "teacher"]


class DatasetRow(Frozen):
    """One exploration step as a training example: kept as is, corrected, or dropped (with the reason)."""

    episode_id: str
    step_index: int = Field(ge=0)
    kind: RowKind
    messages: tuple[dict[str, Any], ...] = ()  # chat messages (prompt as seen -> reply); empty if dropped
    reason: Optional[str] = None  # why a row was dropped (too long, below the threshold, ...)
    tokens: Optional[int] = None  # prompt + reply tokens with the training tokenizer, when measured


class Dataset(Frozen):
    """A training set built from a run's exploration steps by a selection rule."""

    id: str
    run_id: Optional[str]
    rule: dict[str, Any] = Field(default_factory=dict)  # e.g. {"threshold": 0, "correction": null}
    created_at: str = Field(default_factory=utcnow)
    counts: dict[str, int] = Field(default_factory=dict)  # rows per kind


class Training(Frozen):
    """One training: what it was made from, how, and where its files are (checkpoints, losses,
    evaluation runs and sources are rows of their own tables)."""

    id: str
    method: TrainingMethod = "sft"
    role: TrainingRole = "expert"
    games: tuple[str, ...] = ()
    source_run: Optional[str] = None  # the exploring run (experts)
    dataset_id: Optional[str] = None  # the SFT dataset, when there is one
    study_id: Optional[str] = None  # the distillation study it belongs to
    parent_id: Optional[str] = None  # phase 2 continues from its phase 1 student
    backend: Literal["local", "remote"] = "local"
    base: str = ""  # local: the HF model directory; remote: the provider's base model
    reward: Optional[RewardSource] = None  # GRPO: self-judged (default), stated, or the oracle ablation
    directory: Optional[str] = None  # adapters, JSONL, manifest, trainer checkpoints
    status: TrainingStatus = "created"
    examples: int = 0
    epochs: int = 0
    steps: int = 0
    train_seconds: float = 0.0
    settings: dict[str, Any] = Field(default_factory=dict)  # lr, LoRA rank, batch size, max_length, ...
    metrics: dict[str, Any] = Field(default_factory=dict)  # peak RSS, examples/s, tokens/s, truncated, ...
    remote_job: Optional[str] = None
    error: Optional[str] = None
    created_at: str = Field(default_factory=utcnow)
    finished_at: Optional[str] = None

    @property
    def game(self) -> Optional[str]:
        return self.games[0] if len(self.games) == 1 else None


class TrainingCheckpoint(Frozen):
    """Checkpoint x of a training (x = 0: the base model) and the model string that plays it."""

    training_id: str
    x: int = Field(ge=0)
    model: str
    adapter: Optional[str] = None
    step: Optional[int] = None  # optimizer steps done when it was saved
    repaired: Optional[int] = None  # replies regenerated under the answer grammar in its evaluation


class LossPoint(Frozen):
    step: int
    epoch: float = 0.0
    loss: float
    phase: str = "train"  # sft | grpo | distill-off | distill-on (one training may log several)
    metrics: dict[str, float] = Field(default_factory=dict)  # e.g. GRPO reward, KL


class TrainingSource(Frozen):
    """What a training learnt from: a dataset, rollouts on a seed, prompts of an episode, a teacher."""

    kind: SourceKind
    ref: Optional[str] = None  # dataset id, episode id or teacher model string
    game: Optional[str] = None
    seed: Optional[int] = None
    mode: Optional[str] = None
    n: int = 1


class ExpertRef(Frozen):
    """A single-game expert used as a teacher: training id, checkpoint and the model string."""

    training_id: str
    x: int
    game: str
    model: str


class Study(Frozen):
    """A two-phase distillation of several experts into one student, with its ablations."""

    id: str
    games: tuple[str, ...]
    experts: tuple[ExpertRef, ...]
    settings: dict[str, Any] = Field(default_factory=dict)
    status: TrainingStatus = "created"
    created_at: str = Field(default_factory=utcnow)
