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


NORMALISATION = ("per-game min-max over the game's whole score range in eval mode (games' score_range): "
                 "0 = the lowest score an episode can reach, 1 = the highest")


@dataclass(frozen=True)
class Cell:
    mean: Optional[float]  # None: not evaluated (yet)
    n: int  # evaluation episodes behind the mean
    delta: Optional[float]  # mean - the base's mean on this game
    negative: bool  # below the base on this game: negative transfer
    run_id: Optional[str] = None
    x: Optional[int] = None  # the checkpoint evaluated
    episodes: Optional[int] = None  # evaluation episodes the cell's run plays (its setting)
    step_cap: Optional[int] = None  # steps per evaluation episode
    serving: Optional[str] = None  # how the checkpoint was served (training.runs.serving_path)
    normalised: Optional[float] = None  # mean on the game's score range (NORMALISATION)

    @property
    def context(self) -> str:
        """'2 ep · cap 3 · transformers (fp32 base + LoRA)' (what a reader needs to compare cells)."""
        parts = [f"{self.episodes} ep" if self.episodes is not None else None,
                 f"cap {self.step_cap}" if self.step_cap is not None else None, self.serving]
        return " · ".join(p for p in parts if p) or "not evaluated"


@dataclass(frozen=True)
class MatrixRow:
    label: str
    kind: str  # base | expert | phase1 | phase2 | off-only | on-only | mixed-sft
    training_id: Optional[str]
    cells: dict[str, Cell]
    own_game: Optional[str] = None  # an expert's game (its diagonal cell)
    steps: Optional[int] = None
    routed: Optional[dict[str, int]] = None  # on-policy rows: completions each game's expert taught

    @property
    def normalised_mean(self) -> Optional[float]:
        """The mean over games of each cell's normalised score (NORMALISATION), when every game has one:
        a plain mean would add up scores on different scales."""
        values = [c.normalised for c in self.cells.values()]
        return sum(values) / len(values) if values and all(v is not None for v in values) else None

    @property
    def unrouted(self) -> tuple[str, ...]:
        """Games whose expert taught this on-policy row nothing (no prompt was routed to it)."""
        return tuple(g for g in self.cells if self.routed is not None and not self.routed.get(g))


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

    @property
    def column_context(self) -> dict[str, Optional[str]]:
        """game -> the context every evaluated cell of the column shares, None when they differ."""
        out = {}
        for game in self.games:
            seen = {r.cells[game].context for r in self.rows if r.cells[game].mean is not None}
            out[game] = seen.pop() if len(seen) == 1 else None
        return out

    @property
    def serving_paths(self) -> tuple[str, ...]:
        return tuple(sorted({c.serving for r in self.rows for c in r.cells.values() if c.serving}))


def _checkpoint_mean(store, run_id: Optional[str], x: Optional[int]) -> tuple[Optional[float], int]:
    if run_id is None or x is None:
        return None, 0
    found = {c.x: c for c in store.checkpoints.list(run_id)}
    if x not in found:
        return None, 0
    return found[x].mean, len(found[x].scores)


def normalise(game: str, mean: Optional[float]) -> Optional[float]:
    """The mean on the game's score range (eval mode), or None (no mean, or an unknown game)."""
    import s3gym_games as games

    if mean is None:
        return None
    try:
        lo, hi = games.game_class(game).score_range("eval")
    except Exception:  # noqa: BLE001 - a game this s3gym does not know: no normalised figure
        return None
    return (mean - lo) / (hi - lo) if hi > lo else None


def _cell(store, game: str, run_id: Optional[str], x: Optional[int], base: Optional[float]) -> Cell:
    from s3gym_tui.store import StoreError
    from s3gym_tui.training.runs import serving_path

    mean, n = _checkpoint_mean(store, run_id, x)
    episodes = step_cap = serving = None
    if run_id is not None:
        try:
            run = store.runs.get_run(run_id)
        except StoreError:
            run = None
        if run is not None:
            episodes, step_cap = run.config.eval_episodes, run.config.step_cap
            link = store.trainings.training_of_run(run_id)
            models = {c.x: c.model for c in store.trainings.training_checkpoints(link[0].id)} if link else {}
            serving = serving_path(models.get(x, run.config.model))
    delta = None if mean is None or base is None else mean - base
    return Cell(mean, n, delta, delta is not None and delta < -NEGATIVE_TOLERANCE, run_id, x, episodes, step_cap,
                serving, normalise(game, mean))


BASELINE = ("Δ vs the base model row: x = 0 of each game's expert evaluation, served the same way as every cell "
            "(replies as written)")
CONSTRAINED_BASELINE = ("the base under the grammar row: the same base with every reply constrained to the game's "
                        "grammar (its experts' evaluations under the grammar): a cell that does not beat it gained "
                        "the format, not play")


def _constrained_base(store, study: Study, base_cells: dict[str, "Cell"]) -> Optional["MatrixRow"]:
    """The base under the grammar on each game (x = 0 of the game's expert evaluation under the grammar), when
    any game has one; its delta is against the base as written."""
    from s3gym_tui.training.evaluate import own_eval_run

    cells: dict[str, Cell] = {}
    for game in study.games:
        expert = next(e for e in study.experts if e.game == game)
        run = own_eval_run(store.trainings, store.runs, store.trainings.get_training(expert.training_id),
                           decoding="grammar")
        from dataclasses import replace

        cell = _cell(store, game, run.id if run else None, 0, base_cells[game].mean)
        cells[game] = replace(cell, negative=False)  # the same base: a constraint, not a transfer
    if all(c.mean is None for c in cells.values()):
        return None
    return MatrixRow("base model, under the grammar", "base-grammar", None, cells)


def _last_x(store, training_id: str) -> Optional[int]:
    xs = [c.x for c in store.trainings.training_checkpoints(training_id)]
    return max(xs) if xs else None


def study_matrix(store, study_id: str) -> Matrix:
    study = store.trainings.get_study(study_id)
    cells = dict(study.settings.get("cells") or {})
    base_runs = dict(study.settings.get("base_cells") or {})
    base_cells: dict[str, Cell] = {}
    for game in study.games:
        mean, _ = _checkpoint_mean(store, base_runs.get(game), 0)
        base_cells[game] = _cell(store, game, base_runs.get(game), 0, mean)

    def cell(training_id: str, game: str, x: Optional[int]) -> Cell:
        return _cell(store, game, cells.get(f"{training_id}|{game}"), x, base_cells[game].mean)

    rows = [MatrixRow("base model", "base", None, base_cells)]
    constrained = _constrained_base(store, study, base_cells)
    if constrained is not None:
        rows.append(constrained)
    losses = []
    for expert in study.experts:
        training = store.trainings.get_training(expert.training_id)
        rows.append(MatrixRow(f"expert {expert.game} ({training.method}, x={expert.x})", "expert", expert.training_id,
                              {g: cell(expert.training_id, g, expert.x) for g in study.games}, expert.game,
                              training.steps))
        losses.append(LossCurve(expert.training_id, f"expert {expert.game}",
                                tuple(store.trainings.losses(expert.training_id))))
    students = {t.role: t for t in store.trainings.list(study_id=study.id)}
    for role in ROLE_ORDER:
        training = students.get(role)
        if training is None:
            continue
        x = _last_x(store, training.id)
        routed = training.metrics.get("routed") if training.method == "distill-on" else None
        rows.append(MatrixRow(ROLE_LABEL[role], role, training.id, {g: cell(training.id, g, x) for g in study.games},
                              None, training.steps,
                              {g: int((routed or {}).get(g) or 0) for g in study.games} if routed is not None else None))
        losses.append(LossCurve(training.id, ROLE_LABEL[role], tuple(store.trainings.losses(training.id))))
    return Matrix(study, tuple(study.games), tuple(rows), tuple(losses))


def studies_for_runs(store, run_ids) -> list[str]:
    """The studies whose matrix involves any of the runs (as a cell or an expert's evaluation run)."""
    wanted = set(run_ids)
    found = []
    for study in store.trainings.studies():
        runs = set((study.settings.get("cells") or {}).values()) | set((study.settings.get("base_cells") or {}).values())
        runs |= set((study.settings.get("rollout_runs") or {}).values())
        if runs & wanted:
            found.append(study.id)
    return found
