"""`s3gym distill EXPERT...` (two-phase consolidation of single-game experts into one student, with its
ablations) and `s3gym matrix [STUDY]` (the consolidation matrix)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from s3gym_tui.cli.parallel import data_parallel
from s3gym_tui.cli.common import DbOption, ProgressOption, UserError, _store, cli, console
from s3gym_tui.cli.recipe_options import with_recipe_options
from s3gym_tui.progress import ProgressMode
from s3gym_tui.textgate import safe_markup
from s3gym_tui.training.config import DistillConfig


@cli.command()
@data_parallel
@with_recipe_options(DistillConfig)
def distill(
    experts: List[str] = typer.Argument(..., help="Expert trainings, one per game: ID (its last checkpoint) or ID:X."),
    config: Optional[Path] = typer.Option(None, "--config", help="A recipe file (YAML or TOML: settings by name); "
                                          "flags given override it."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where the students' files go."),
    progress: Optional[ProgressMode] = ProgressOption,
    db: Optional[Path] = DbOption,
    recipe_values: dict = None,  # type: ignore[assignment]  (the generated recipe options that were given)
) -> None:
    """Consolidate single-game experts into one student: off-policy SFT, then on-policy reverse KL. Every
    setting below comes from the distillation recipe (training/config.py)."""
    from s3gym_tui.training import MissingExtra, require_extra
    from s3gym_tui.training.config import RecipeError, build, read_recipe_file

    try:
        values = read_recipe_file(config) if config is not None else {}
        method = values.pop("method", None)
        if method not in (None, "distill"):
            raise UserError(f"{config}: a {method} recipe, not a distillation one")
        options = build("distill", {**values, **(recipe_values or {})})
    except RecipeError as exc:
        raise UserError(str(exc)) from None
    try:
        require_extra()
        from s3gym_tui.training.pipeline import TrainingError
    except MissingExtra as exc:
        raise UserError(str(exc)) from None
    from s3gym_tui.training.distill import distill as run_distill
    from s3gym_tui.training.distill import resolve_experts

    store = _store(db, write=True)
    try:
        resolved = resolve_experts(store, experts)  # refuse bad experts before anything is written
    except TrainingError as exc:
        raise UserError(str(exc)) from None
    _check_eval_settings(store, resolved, options.eval_episodes, options.step_cap)
    before = {s.id for s in store.trainings.studies(limit=1)}
    _run_study(store, lambda hooks: run_distill(store, experts, options, hooks, out_dir=out), progress,
               study=lambda: next((s.id for s in store.trainings.studies(limit=1) if s.id not in before), None))


def _check_eval_settings(store, resolved, eval_episodes: Optional[int], step_cap: Optional[int]) -> None:
    """The matrix evaluation's settings (its runs are made after the training), checked before
    anything is trained: an out-of-range value is one line naming the flag."""
    from s3gym_tui.cli.train import check_eval_settings
    from s3gym_tui.models import RunConfig

    for expert in resolved:
        check_eval_settings(RunConfig(model=expert.model, game=expert.game), eval_episodes, step_cap)


def _run_study(store, factory, progress: Optional[ProgressMode] = None, study=None) -> None:
    from s3gym_tui.training import MissingExtra, stop
    from s3gym_tui.training.console import Bars
    from s3gym_tui.training.distill import DistillHooks
    from s3gym_tui.training.matrix import study_matrix
    from s3gym_tui.training.matrix_view import print_matrix
    from s3gym_tui.training.pipeline import TrainingError
    from s3gym_tui.cli.train import stopped_resumable

    bars = Bars(console, mode=progress)
    hooks = bars.hooks(DistillHooks, stage=lambda stage, info: bars.info("study", f"{stage}: {info}"))
    from s3gym_tui.training.console import stopping_note

    forget = stopping_note(bars)
    try:
        with stopped_resumable(bars, study), bars.progress:
            study = stop.run(lambda: factory(hooks))
    except (MissingExtra, TrainingError) as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt as exc:
        from s3gym_tui.cli.train import interrupted

        target = study() if callable(study) else study
        reason = getattr(exc, "reason", None) or "interrupted"
        interrupted(f"study {target} {reason}" if target else None, target)
    finally:
        forget()
    print_matrix(console, study_matrix(store, study.id))


def resume_study_cli(store, study_id: str, progress: Optional[ProgressMode] = None) -> None:
    from s3gym_tui.training.distill import resume_study

    _run_study(store, lambda hooks: resume_study(store, study_id, hooks), progress, study=study_id)


@cli.command()
def matrix(study_id: Optional[str] = typer.Argument(None, help="A study (default: the newest)."),
           db: Optional[Path] = DbOption) -> None:
    """The consolidation matrix of a study: rows base / experts / students / ablations, columns games."""
    from s3gym_tui.training.matrix import study_matrix
    from s3gym_tui.training.matrix_view import print_matrix

    store = _store(db)
    if study_id is None:
        studies = store.trainings.studies(limit=1)
        if not studies:
            raise UserError("no study yet: `s3gym distill EXPERT EXPERT ...` makes one")
        study_id = studies[0].id
    print_matrix(console, study_matrix(store, study_id))
    from s3gym_tui.store.leases import shown_study_status

    leases = store.leases.training_leases()
    status = shown_study_status(store.trainings.get_study(study_id).status,
                                [leases.get(t.id) for t in store.trainings.list(study_id=study_id)])
    console.print(f"[dim]study {safe_markup(study_id)}: {safe_markup(status)}[/]")
