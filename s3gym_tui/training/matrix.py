"""The consolidation matrix of a study: rows base, each expert, the student after phase 1 and after
phase 2, and the ablations; columns each game's strict evaluation score (mean over the game's
evaluation seeds); every cell compared with the base on the same game, negative transfer flagged.
Also the loss curves of the study's trainings. Computed here, shown by `s3gym report` / `s3gym
distill` and the app's Training screen (which compute nothing themselves)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from s3gym_tui.store import LossPoint, Study
from s3gym_tui.training.evaluate import NEGATIVE_TOLERANCE

ROLE_LABEL = {"phase1": "student, phase 1 (off-policy)", "phase2": "student, phase 2 (on-policy)",
              "off-only": "ablation: off-policy only", "on-only": "ablation: on-policy only (from base)",
              "mixed-sft": "ablation: mixed multi-task SFT"}
ROLE_ORDER = ("phase1", "phase2", "off-only", "on-only", "mixed-sft")


@dataclass(frozen=True)
class Cell:
    mean: Optional[float]  # None: not evaluated (yet)
    n: int  # evaluation episodes behind the mean
    delta: Optional[float]  # mean - the base's mean on this game
    negative: bool  # below the base on this game: negative transfer
    run_id: Optional[str] = None
    x: Optional[int] = None  # the checkpoint evaluated


@dataclass(frozen=True)
class MatrixRow:
    label: str
    kind: str  # base | expert | phase1 | phase2 | off-only | on-only | mixed-sft
    training_id: Optional[str]
    cells: dict[str, Cell]
    own_game: Optional[str] = None  # an expert's game (its diagonal cell)
    steps: Optional[int] = None

    @property
    def mean(self) -> Optional[float]:
        values = [c.mean for c in self.cells.values() if c.mean is not None]
        return sum(values) / len(values) if len(values) == len(self.cells) and values else None


@dataclass(frozen=True)
class LossCurve:
    training_id: str
    label: str
    points: tuple[LossPoint, ...]


@dataclass(frozen=True)
class Matrix:
    study: Study
    games: tuple[str, ...]
    rows: tuple[MatrixRow, ...]
    losses: tuple[LossCurve, ...]

    @property
    def negative_cells(self) -> list[tuple[str, str]]:
        return [(r.label, g) for r in self.rows for g, c in r.cells.items() if c.negative]


def _checkpoint_mean(store, run_id: Optional[str], x: Optional[int]) -> tuple[Optional[float], int]:
    if run_id is None or x is None:
        return None, 0
    found = {c.x: c for c in store.checkpoints(run_id)}
    if x not in found:
        return None, 0
    return found[x].mean, len(found[x].scores)


def _last_x(store, training_id: str) -> Optional[int]:
    xs = [c.x for c in store.training_checkpoints(training_id)]
    return max(xs) if xs else None


def study_matrix(store, study_id: str) -> Matrix:
    study = store.get_study(study_id)
    cells = dict(study.settings.get("cells") or {})
    base_runs = dict(study.settings.get("base_cells") or {})
    base_cells: dict[str, Cell] = {}
    for game in study.games:
        mean, n = _checkpoint_mean(store, base_runs.get(game), 0)
        base_cells[game] = Cell(mean, n, 0.0 if mean is not None else None, False, base_runs.get(game), 0)

    def cell(training_id: str, game: str, x: Optional[int]) -> Cell:
        run_id = cells.get(f"{training_id}|{game}")
        mean, n = _checkpoint_mean(store, run_id, x)
        base = base_cells[game].mean
        delta = None if mean is None or base is None else mean - base
        return Cell(mean, n, delta, delta is not None and delta < -NEGATIVE_TOLERANCE, run_id, x)

    rows = [MatrixRow("base model", "base", None, base_cells)]
    losses = []
    for expert in study.experts:
        training = store.get_training(expert.training_id)
        rows.append(MatrixRow(f"expert {expert.game} ({training.method}, x={expert.x})", "expert", expert.training_id,
                              {g: cell(expert.training_id, g, expert.x) for g in study.games}, expert.game,
                              training.steps))
        losses.append(LossCurve(expert.training_id, f"expert {expert.game}", tuple(store.losses(expert.training_id))))
    students = {t.role: t for t in store.trainings(study_id=study.id)}
    for role in ROLE_ORDER:
        training = students.get(role)
        if training is None:
            continue
        x = _last_x(store, training.id)
        rows.append(MatrixRow(ROLE_LABEL[role], role, training.id, {g: cell(training.id, g, x) for g in study.games},
                              None, training.steps))
        losses.append(LossCurve(training.id, ROLE_LABEL[role], tuple(store.losses(training.id))))
    return Matrix(study, tuple(study.games), tuple(rows), tuple(losses))


def studies_for_runs(store, run_ids) -> list[str]:
    """The studies whose matrix involves any of the runs (as a cell or an expert's evaluation run)."""
    wanted = set(run_ids)
    found = []
    for study in store.studies():
        runs = set((study.settings.get("cells") or {}).values()) | set((study.settings.get("base_cells") or {}).values())
        runs |= set((study.settings.get("rollout_runs") or {}).values())
        if runs & wanted:
            found.append(study.id)
    return found
