"""What the training screen shows, computed here (the UI computes nothing): a run's datasets with
every row's self-score, verifier reward, correction and drop reason, the selection's precision and
recall, the checkpoint reports and loss curves of the trainings made from the run, and the
consolidation matrices of the studies they take part in."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from s3gym_games.reply import parse_reply
from s3gym_tui.models import Run
from s3gym_tui.store import Dataset, Training
from s3gym_tui.training.dataset import SelectionQuality, selection_quality
from s3gym_tui.training.evaluate import TrainingReport, own_eval_run, training_report
from s3gym_tui.training.matrix import LossCurve, Matrix, study_matrix


@dataclass(frozen=True)
class RowView:
    episode_id: str
    episode_index: int
    step_index: int
    kind: str  # kept | corrected | dropped
    action: str  # the agent's action
    self_score: Optional[float]
    reward: float  # verifier reward of the agent's action (benchmark side)
    correction: Optional[str] = None  # the corrected action, for corrected rows
    reason: Optional[str] = None  # why a dropped row was dropped
    tokens: Optional[int] = None


@dataclass(frozen=True)
class DatasetView:
    dataset: Dataset
    quality: SelectionQuality
    rows: tuple[RowView, ...]


@dataclass(frozen=True)
class TrainingView:
    run: Run  # the run the screen was opened on
    source: Optional[Run]  # the exploring run the datasets come from (None for a distillation student)
    datasets: tuple[DatasetView, ...]
    trainings: tuple[TrainingReport, ...]
    losses: tuple[LossCurve, ...] = ()
    matrices: tuple[Matrix, ...] = ()
    statuses: dict[str, str] = field(default_factory=dict)  # training id -> status as shown (lease-derived)


def dataset_view(store, dataset: Dataset) -> DatasetView:
    rows = store.datasets.dataset_rows(dataset.id)
    steps, index = {}, {}
    for episode_id in dict.fromkeys(r.episode_id for r in rows):
        index[episode_id] = store.episodes.get_episode(episode_id).index
        for step in store.episodes.steps(episode_id, include_prompt=False):
            steps[(episode_id, step.index)] = step
    views = []
    for row in rows:
        step = steps[(row.episode_id, row.step_index)]
        correction = None
        if row.kind == "corrected" and row.messages:
            correction = parse_reply(str(row.messages[-1].get("content", ""))).action
        views.append(RowView(row.episode_id, index[row.episode_id], row.step_index, row.kind, step.action,
                             step.self_score, step.reward, correction, row.reason, row.tokens))
    return DatasetView(dataset, selection_quality(store, dataset.id), tuple(views))


def _reports(store, trainings: list[Training]) -> list[TrainingReport]:
    reports = []
    for training in trainings:
        run = own_eval_run(store.trainings, store.runs, training)
        if run is not None:
            reports.append(training_report(store, run))
    return reports


def training_view(store, run_id: str) -> TrainingView:
    """Opened on an exploring run, a training's evaluation run (then its source run's data is shown) or a
    distillation student's evaluation run."""
    run = store.runs.get_run(run_id)
    link = store.trainings.training_of_run(run.id)
    source: Optional[Run] = run
    if link is not None:
        training = link[0]
        source = store.runs.get_run(training.source_run) if training.source_run else None
    if source is not None:
        trainings = store.trainings.list(source_run=source.id)
        datasets = tuple(dataset_view(store, d) for d in store.datasets.list(source.id))
    else:
        trainings, datasets = [link[0]], ()
    ids = {t.id for t in trainings}
    studies = [t.study_id for t in trainings if t.study_id]
    studies += [s.id for s in store.trainings.studies() if ids & {e.training_id for e in s.experts}]
    losses = tuple(LossCurve(t.id, f"{t.method} {t.id}", tuple(store.trainings.losses(t.id))) for t in trainings)
    from s3gym_tui.store.leases import shown_training_status

    leases = store.leases.training_leases()
    statuses = {t.id: shown_training_status(t.status, leases.get(t.id)) for t in trainings}
    return TrainingView(run, source, datasets, tuple(_reports(store, trainings)), losses,
                        tuple(study_matrix(store, s) for s in dict.fromkeys(studies)), statuses)


def grpo_recipe(training: Training) -> Optional[str]:
    """How a GRPO (or TASPO) training sampled and started, in one line: its level, sampling (temperature, G,
    KL beta, loss), format term and format warm start (examples, first and last loss), from its stored recipe
    and figures; None for other methods."""
    from s3gym_tui.training.config import GrpoConfig, RecipeError, stored_recipe

    if training.method not in ("grpo", "taspo") or not training.settings:
        return None
    try:
        grpo = stored_recipe(training.settings, training.method)
    except (RecipeError, ValueError, TypeError):
        return None
    if not isinstance(grpo, GrpoConfig):
        return None
    try:
        return _recipe_line(grpo, training.metrics or {})
    except (TypeError, ValueError):  # a stored recipe an older or foreign writer filled oddly: no line
        return None


def _recipe_line(grpo, metrics: dict) -> str:
    parts = [f"{grpo.level} level", f"sampling {grpo.sampling} at T {grpo.temperature:g}, G {grpo.num_generations}",
             f"beta {grpo.beta:g}, {grpo.loss_type} loss", f"format weight {grpo.format_weight:g}"]
    asked = grpo.warm_start or 0
    if not asked:
        parts.append("no warm start")
    elif "warm_start_examples" in metrics:
        first, last = metrics.get("warm_start_first_loss"), metrics.get("warm_start_last_loss")
        loss = "" if first is None or last is None else f", loss {first:.2f} → {last:.2f}"
        parts.append(f"warm start {metrics['warm_start_examples']} examples x {grpo.warm_start_epochs}{loss}")
    else:
        parts.append(f"warm start {asked} examples (not finished)")
    return " · ".join(parts)
