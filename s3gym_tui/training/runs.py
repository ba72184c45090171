"""How a training is recorded: a Run with pathway 'trained' (checkpoints x = epochs, x = 0 the base
model) whose note carries a TrainingInfo as JSON; where its files live (adapters, exports, manifest)."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Literal, Optional

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from s3gym_tui.models import Run

NOTE_PREFIX = "training "
ROOT_ENV = "S3GYM_TRAINING_DIR"
MANIFEST = "manifest.json"


class LossPoint(BaseModel):
    model_config = ConfigDict(frozen=True)

    step: int
    epoch: float
    loss: float


class TrainingInfo(BaseModel):
    """What a training run was made from and what it produced (stored in the run's note)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    source_run: str
    dataset_id: str
    backend: Literal["local", "remote"] = "local"
    base: str  # local: the HF model directory; remote: the provider's base model string
    checkpoints: dict[int, str] = Field(default_factory=dict)  # epoch -> model string that plays it
    directory: Optional[str] = None  # local artifacts (adapters, JSONL, manifest)
    examples: int = 0
    epochs: int = 0  # epochs actually trained (checkpoints 1..epochs)
    losses: tuple[LossPoint, ...] = ()
    train_seconds: float = 0.0
    settings: dict[str, Any] = Field(default_factory=dict)  # lr, LoRA rank, batch size, max_steps, ...
    remote_job: Optional[str] = None
    repairs: dict[int, int] = Field(default_factory=dict)  # epoch -> replies repaired under the grammar


def note_for(info: TrainingInfo) -> str:
    return NOTE_PREFIX + info.model_dump_json()


def training_info(run: Run) -> Optional[TrainingInfo]:
    """The TrainingInfo of a training run, None for any other run (or an unreadable note)."""
    if run.config.pathway != "trained" or not run.note.startswith(NOTE_PREFIX):
        return None
    try:
        return TrainingInfo.model_validate_json(run.note[len(NOTE_PREFIX):])
    except ValidationError:
        return None


def training_runs(store, source_run_id: str, limit: int = 10_000) -> list[tuple[Run, TrainingInfo]]:
    """Training runs made from `source_run_id` (oldest first)."""
    found = []
    for run in store.list_runs(limit=limit):
        info = training_info(run)
        if info is not None and info.source_run == source_run_id:
            found.append((run, info))
    found.reverse()
    return found


def training_root() -> Path:
    """Where local trainings keep their files: $S3GYM_TRAINING_DIR, else the user data dir."""
    override = os.environ.get(ROOT_ENV, "").strip()
    if override:
        return Path(override).expanduser()
    import platformdirs

    return platformdirs.user_data_path("s3gym", appauthor=False) / "training"


def write_manifest(directory: Path, training_id: str, base_dir: Path, adapters: dict[int, Path]) -> Path:
    """The file the `trained` provider reads to serve `trained/<training_id>/<epoch>` in any process."""
    path = Path(directory) / MANIFEST
    data = {"training_id": training_id, "base_dir": str(Path(base_dir).resolve()),
            "adapters": {str(k): str(Path(v).resolve()) for k, v in sorted(adapters.items())}}
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(data, indent=1), encoding="utf-8")
    tmp.replace(path)
    return path


def read_manifest(path: Path) -> tuple[Path, dict[int, Path]]:
    data = json.loads(Path(path).read_text(encoding="utf-8"))
    return Path(data["base_dir"]), {int(k): Path(v) for k, v in data.get("adapters", {}).items()}
