"""The experts of a distillation study: single-game local LoRA trainings, one per game, on one shared
base; named on the command line as TRAINING (its last trained checkpoint) or TRAINING:X."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

from s3gym_tui.models import whole_number
from s3gym_tui.store import ExpertRef
from s3gym_tui.training.pipeline import TrainingError


def resolve_experts(store, specs: Sequence[str]) -> list[ExpertRef]:
    """'TRAINING' (its last checkpoint) or 'TRAINING:X' -> the expert; one per game, one shared base."""
    if len(specs) < 2:
        raise TrainingError("distillation needs experts for at least two games")
    experts, bases = [], set()
    for spec in specs:
        training_id, _, x_text = str(spec).partition(":")
        training = store.trainings.find_training(training_id)
        if training is None:
            raise TrainingError(f"no training {training_id!r} (see `s3gym trainings`)")
        if training.role != "expert" or training.game is None:
            raise TrainingError(f"{training_id} is not a single-game expert (it is a {training.role})")
        if training.backend != "local":
            raise TrainingError(f"{training_id} was trained remotely: distillation needs local LoRA experts")
        cps = {c.x: c for c in store.trainings.training_checkpoints(training_id)}
        adapters = [x for x, c in cps.items() if c.adapter]
        if not adapters:
            raise TrainingError(f"{training_id} has no trained checkpoint yet ({training.status})")
        x = max(adapters) if not x_text else whole_number(x_text)
        if x not in cps or not cps[x].adapter:
            raise TrainingError(f"{training_id} has no trained checkpoint {x_text!r} (checkpoints: "
                                f"{', '.join(map(str, sorted(adapters)))})")
        require_signal(store, training_id, cps[x].step)
        experts.append(ExpertRef(training_id=training_id, x=x, game=training.game, model=cps[x].model))
        bases.add(str(Path(training.base).resolve()))
    games = [e.game for e in experts]
    if len(set(games)) != len(games):
        raise TrainingError(f"two experts for {next(g for g in games if games.count(g) > 1)}: one expert per game")
    if len(bases) != 1:
        raise TrainingError("the experts were trained on different base models: they must share one")
    return experts


def expert_adapter(store, expert: ExpertRef) -> Path:
    cp = next(c for c in store.trainings.training_checkpoints(expert.training_id) if c.x == expert.x)
    return Path(cp.adapter)


def require_signal(store, training_id: str, up_to_step=None) -> None:
    """Refuse an expert none of whose updates (up to its checkpoint) had a learning signal: its LoRA
    adapter never moved from zero, so it *is* the base model, and distilling from it teaches the student
    nothing (phase 2's KL to it is the KL to the base). Refused rather than flagged: the matrix would
    otherwise show an 'expert' row that is the base model under another name, and phase 2 would spend its
    whole budget on it."""
    from s3gym_tui.training.learning_signal import learnt_nothing

    points = [p for p in store.trainings.losses(training_id) if up_to_step is None or p.step <= up_to_step]
    summary = learnt_nothing(points)
    if summary is not None:
        raise TrainingError(f"{training_id} cannot teach: {summary.line} (every group had the same reward, "
                            f"so its checkpoint is the base model); train it again with a reward that varies "
                            f"(e.g. more --generations, --reward oracle) or leave it out")
