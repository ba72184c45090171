"""What the training screen shows, computed here (the UI computes nothing): a run's datasets with
every row's self-score, verifier reward and correction, the selection's precision and recall, and
the checkpoint reports of the trainings made from the run."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from s3gym_tui.engine.parsing import parse_reply
from s3gym_tui.models import Run
from s3gym_tui.store import Dataset
from s3gym_tui.training.dataset import SelectionQuality, selection_quality
from s3gym_tui.training.evaluate import TrainingReport, training_report
from s3gym_tui.training.runs import training_info, training_runs


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


@dataclass(frozen=True)
class DatasetView:
    dataset: Dataset
    quality: SelectionQuality
    rows: tuple[RowView, ...]


@dataclass(frozen=True)
class TrainingView:
    run: Run  # the run the screen was opened on
    source: Run  # the exploring run whose steps the datasets come from
    datasets: tuple[DatasetView, ...]
    trainings: tuple[TrainingReport, ...]


def dataset_view(store, dataset: Dataset) -> DatasetView:
    rows = store.dataset_rows(dataset.id)
    steps, index = {}, {}
    for episode_id in dict.fromkeys(r.episode_id for r in rows):
        index[episode_id] = store.get_episode(episode_id).index
        for step in store.steps(episode_id, include_prompt=False):
            steps[(episode_id, step.index)] = step
    views = []
    for row in rows:
        step = steps[(row.episode_id, row.step_index)]
        correction = None
        if row.kind == "corrected" and row.messages:
            correction = parse_reply(str(row.messages[-1].get("content", ""))).action
        views.append(RowView(row.episode_id, index[row.episode_id], row.step_index, row.kind, step.action,
                             step.self_score, step.reward, correction))
    return DatasetView(dataset, selection_quality(store, dataset.id), tuple(views))


def training_view(store, run_id: str) -> TrainingView:
    """Opened on an exploring run, or on a training run (then its source run's data is shown)."""
    run = store.get_run(run_id)
    info = training_info(run)
    source = store.get_run(info.source_run) if info is not None else run
    datasets = tuple(dataset_view(store, d) for d in store.datasets(source.id))
    reports = tuple(training_report(store, r) for r, _ in training_runs(store, source.id))
    return TrainingView(run, source, datasets, reports)
