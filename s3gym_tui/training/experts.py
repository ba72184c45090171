"""The experts of a distillation study: single-game local LoRA trainings, one per game, on one shared
base; named on the command line as TRAINING (its last trained checkpoint) or TRAINING:X."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from s3gym_tui.store import ExpertRef
from s3gym_tui.training.pipeline import TrainingError


def resolve_experts(store, specs: Sequence[str]) -> list[ExpertRef]:
    """'TRAINING' (its last checkpoint) or 'TRAINING:X' -> the expert; one per game, one shared base."""
    if len(specs) < 2:
        raise TrainingError("distillation needs experts for at least two games")
    experts, bases = [], set()
    for spec in specs:
        training_id, _, x_text = str(spec).partition(":")
        training = store.find_training(training_id)
        if training is None:
            raise TrainingError(f"no training {training_id!r} (see `s3gym trainings`)")
        if training.role != "expert" or training.game is None:
            raise TrainingError(f"{training_id} is not a single-game expert (it is a {training.role})")
        if training.backend != "local":
            raise TrainingError(f"{training_id} was trained remotely: distillation needs local LoRA experts")
        cps = {c.x: c for c in store.training_checkpoints(training_id)}
        adapters = [x for x, c in cps.items() if c.adapter]
        if not adapters:
            raise TrainingError(f"{training_id} has no trained checkpoint yet ({training.status})")
        x = max(adapters) if not x_text else int(x_text) if x_text.isdigit() else -1
        if x not in cps or not cps[x].adapter:
            raise TrainingError(f"{training_id} has no trained checkpoint {x_text!r} (checkpoints: "
                                f"{', '.join(map(str, sorted(adapters)))})")
        experts.append(ExpertRef(training_id=training_id, x=x, game=training.game, model=cps[x].model))
        bases.add(str(Path(training.base).resolve()))
    games = [e.game for e in experts]
    if len(set(games)) != len(games):
        raise TrainingError(f"two experts for {next(g for g in games if games.count(g) > 1)}: one expert per game")
    if len(bases) != 1:
        raise TrainingError("the experts were trained on different base models: they must share one")
    return experts


def expert_adapter(store, expert: ExpertRef) -> Path:
    cp = next(c for c in store.training_checkpoints(expert.training_id) if c.x == expert.x)
    return Path(cp.adapter)
