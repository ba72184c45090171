"""`s3gym distill EXPERT...` (two-phase consolidation of single-game experts into one student, with its
ablations) and `s3gym matrix [STUDY]` (the consolidation matrix)."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer

from s3gym_tui.cli.parallel import data_parallel
from s3gym_tui.cli.common import DbOption, ProgressOption, UserError, check_number, _store, cli, console
from s3gym_tui.progress import ProgressMode
from s3gym_tui.textgate import safe_markup


@cli.command()
@data_parallel
def distill(
    experts: List[str] = typer.Argument(..., help="Expert trainings, one per game: ID (its last checkpoint) or ID:X."),
    rollout_episodes: int = typer.Option(3, "--rollout-episodes", min=1,
                                         help="Exploration episodes each expert plays on its game (phase 1 data)."),
    rollout_step_cap: Optional[int] = typer.Option(None, "--rollout-step-cap", min=1, max=64),
    threshold: Optional[float] = typer.Option(None, "--threshold", help="Keep expert steps whose self-score is "
                                              "above this (default: every reply of the expert)."),
    epochs: int = typer.Option(1, "--epochs", min=1, help="Phase 1 (off-policy SFT) epochs."),
    phase1_steps: int = typer.Option(-1, "--phase1-steps", help="Cap on phase 1 optimizer steps."),
    updates: int = typer.Option(8, "--updates", min=1, help="Phase 2 (on-policy) optimizer steps."),
    batch: int = typer.Option(2, "--batch", min=1, help="Phase 2 prompts per update."),
    learning_rate: float = typer.Option(1e-4, "--lr", help="Phase 2 learning rate (phase 1: 5e-4)."),
    completion_tokens: int = typer.Option(32, "--completion-tokens", min=4, help="Phase 2: tokens per reply."),
    ablations: bool = typer.Option(False, "--ablations", help="Also: off-policy only, on-policy only from the base, "
                                                               "mixed multi-task SFT (same budget)."),
    eval_episodes: Optional[int] = typer.Option(None, "--eval-episodes", min=1,
                                                help="Default: each game's expert evaluation run's."),
    step_cap: Optional[int] = typer.Option(None, "--step-cap", min=1, max=64),
    out: Optional[Path] = typer.Option(None, "--out", help="Where the students' files go."),
    progress: Optional[ProgressMode] = ProgressOption,
    db: Optional[Path] = DbOption,
) -> None:
    """Consolidate single-game experts into one student: off-policy SFT, then on-policy reverse KL."""
    from s3gym_tui.training import MissingExtra, require_extra

    check_number("--threshold", threshold)
    check_number("--lr", learning_rate, above=0, high=1)
    if phase1_steps != -1 and phase1_steps < 1:
        raise UserError(f"--phase1-steps must be -1 (follow --epochs) or at least 1, not {phase1_steps}")
    try:
        require_extra()
        from s3gym_tui.training.backend import TrainConfig
        from s3gym_tui.training.options import DistillOptions
        from s3gym_tui.training.pipeline import TrainingError
    except MissingExtra as exc:
        raise UserError(str(exc)) from None
    options = DistillOptions(
        rollout_episodes=rollout_episodes, rollout_step_cap=rollout_step_cap, threshold=threshold,
        phase1=TrainConfig(epochs=epochs, max_steps=phase1_steps), phase2_updates=updates, phase2_batch=batch,
        phase2_learning_rate=learning_rate, max_completion_length=completion_tokens, ablations=ablations,
        eval_episodes=eval_episodes, step_cap=step_cap, out_dir=out)
    from s3gym_tui.training.distill import distill as run_distill
    from s3gym_tui.training.distill import resolve_experts

    store = _store(db, write=True)
    try:
        resolved = resolve_experts(store, experts)  # refuse bad experts before anything is written
    except TrainingError as exc:
        raise UserError(str(exc)) from None
    _check_eval_settings(store, resolved, eval_episodes, step_cap)
    before = {s.id for s in store.studies(limit=1)}
    _run_study(store, lambda hooks: run_distill(store, experts, options, hooks), progress,
               study=lambda: next((s.id for s in store.studies(limit=1) if s.id not in before), None))


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
        studies = store.studies(limit=1)
        if not studies:
            raise UserError("no study yet: `s3gym distill EXPERT EXPERT ...` makes one")
        study_id = studies[0].id
    print_matrix(console, study_matrix(store, study_id))
    from s3gym_tui.store.leases import shown_study_status

    leases = store.training_leases()
    status = shown_study_status(store.get_study(study_id).status,
                                [leases.get(t.id) for t in store.trainings(study_id=study_id)])
    console.print(f"[dim]study {safe_markup(study_id)}: {safe_markup(status)}[/]")
