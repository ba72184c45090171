"""`s3gym train`: the Training pathway from the command line."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from s3gym_tui.cli.common import DbOption, UserError, _store, cli, console


@cli.command()
def train(
    run_id: str = typer.Argument(..., help="The run whose exploration steps become the training data."),
    threshold: float = typer.Option(0.0, "--threshold", help="Keep steps whose self-score is above this."),
    epochs: int = typer.Option(2, "--epochs", min=1, help="Training epochs (one checkpoint each)."),
    base: str = typer.Option("default", "--base", help="HF model directory, or 'default' (embedded SmolLM2-135M)."),
    correction: str = typer.Option("none", "--correction", help="none | reference | a litellm model string."),
    max_examples: Optional[int] = typer.Option(None, "--max-examples", min=1, help="Stop after N examples."),
    eval_episodes: Optional[int] = typer.Option(None, "--eval-episodes", min=0,
                                                help="Evaluation episodes per checkpoint (default: the run's)."),
    backend: str = typer.Option("local", "--backend", help="local (LoRA with TRL) | remote (provider's API)."),
    remote_model: Optional[str] = typer.Option(None, "--remote-model", help="e.g. openai/gpt-4o-mini-2024-07-18"),
    max_steps: int = typer.Option(-1, "--max-steps", help="Cap on optimizer steps (overrides --epochs)."),
    batch_size: int = typer.Option(2, "--batch-size", min=1),
    grad_accum: int = typer.Option(2, "--grad-accum", min=1),
    learning_rate: float = typer.Option(5e-4, "--lr"),
    gradient_checkpointing: bool = typer.Option(False, "--gradient-checkpointing",
                                                help="Less RAM, ~40% slower on CPU."),
    step_cap: Optional[int] = typer.Option(None, "--step-cap", min=1, max=64, help="Steps per eval episode."),
    out: Optional[Path] = typer.Option(None, "--out", help="Where adapters and JSONL go (default: "
                                       "$S3GYM_TRAINING_DIR or the user data dir, where any process finds "
                                       "trained/<id>/<epoch>)."),
    db: Optional[Path] = DbOption,
) -> None:
    """Fine-tune on a run's self-judged exploration steps and evaluate every epoch (Training pathway)."""
    from s3gym_tui.training import MissingExtra, require_extra

    try:
        if backend == "local":
            require_extra()  # before anything is written: one line saying how to install it
        from s3gym_tui.training.backend import TrainConfig
        from s3gym_tui.training.console import run_training
        from s3gym_tui.training.pipeline import TrainingError, TrainOptions
    except MissingExtra as exc:
        raise UserError(str(exc)) from None
    options = TrainOptions(
        threshold=threshold, correction=correction, max_examples=max_examples, backend=backend, base=base,
        remote_model=remote_model, eval_episodes=eval_episodes, step_cap=step_cap, out_dir=out,
        train=TrainConfig(epochs=epochs, max_steps=max_steps, batch_size=batch_size, grad_accum=grad_accum,
                          learning_rate=learning_rate, gradient_checkpointing=gradient_checkpointing))
    try:
        run_training(console, _store(db), run_id, options)
    except (MissingExtra, TrainingError) as exc:
        raise UserError(str(exc)) from None


