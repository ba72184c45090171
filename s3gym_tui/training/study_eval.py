"""The evaluations behind a study's matrix: every expert and every student on every game, in strict mode,
on that game's expert evaluation seeds and settings (columns stay comparable). The base row and each
expert's own cell reuse the expert's own evaluation run (x = 0 and its checkpoint) when the study keeps
its settings; everything else gets an evaluation run of its own, created once and played resumably."""

from __future__ import annotations

from typing import Optional

from s3gym_tui.models import RunConfig
from s3gym_tui.store import Training
from s3gym_tui.training.evaluate import create_eval_run, own_eval_run
from s3gym_tui.training.pipeline import TrainingError, evaluate_all


def _column(store, study, options, game: str) -> tuple[RunConfig, Optional[str]]:
    """The template of a game's column, and the run giving its base cell (x = 0) when reusable."""
    expert = next(e for e in study.experts if e.game == game)
    run = own_eval_run(store.trainings, store.runs, store.trainings.get_training(expert.training_id))
    if run is None:
        raise TrainingError(f"expert {expert.training_id} has no evaluation run on {game}")
    o = options
    reusable = o.eval_episodes in (None, run.config.eval_episodes) and o.step_cap in (None, run.config.step_cap)
    return run.config, (run.id if reusable else None)


def _cells(store, study, options, students: list[Training], save) -> dict[str, str]:
    """Create (once) every evaluation run of the matrix; returns 'training|game' -> run id."""
    cells = dict(study.settings.get("cells") or {})
    base_cells = dict(study.settings.get("base_cells") or {})
    o = options
    for game in study.games:
        template, own = _column(store, study, options, game)
        for expert in study.experts:
            key = f"{expert.training_id}|{game}"
            if key in cells:
                continue
            training = store.trainings.get_training(expert.training_id)
            if expert.game == game and own is not None:
                cells[key] = base_cells[game] = own
                continue
            xs = [0, expert.x] if expert.game == game else [expert.x]
            run = create_eval_run(store, training, template, xs, game=game, eval_episodes=o.eval_episodes,
                                  step_cap=o.step_cap)
            cells[key] = run.id
            if expert.game == game:
                base_cells[game] = run.id
        for student in students:
            key = f"{student.id}|{game}"
            if key not in cells:
                last = max(c.x for c in store.trainings.training_checkpoints(student.id))
                cells[key] = create_eval_run(store, student, template, [last], game=game,
                                             eval_episodes=o.eval_episodes, step_cap=o.step_cap).id
    save(cells=cells, base_cells=base_cells)
    return cells


async def evaluate_cells(store, study, options, students: list[Training], hooks, save) -> None:
    """Create (once) and play (resumably) every evaluation run of the study's matrix."""
    _cells(store, study, options, students, save)
    trainings = {e.training_id for e in study.experts} | {s.id for s in students}
    for training_id in sorted(trainings):
        training = store.trainings.get_training(training_id)
        runs = [store.runs.get_run(r) for _, r, _ in store.trainings.training_evals(training_id)]
        if any(r.status != "finished" for r in runs) or training.status != "finished":
            hooks.stage("evaluation", f"{training_id} on {', '.join(study.games)}")
            await evaluate_all(store, training, hooks)
