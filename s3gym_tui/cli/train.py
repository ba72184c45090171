"""`s3gym train` (SFT or GRPO experts), `s3gym dataset` (the SFT JSONL alone) and `s3gym trainings`."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from s3gym_tui.cli.parallel import data_parallel
from s3gym_tui.cli.common import (DbOption, ProgressOption, Stopped, UserError, check_number, _store, cli, console,
                                  flags_named)
from s3gym_tui.cli.recipe_options import with_recipe_options
from s3gym_tui.progress import ProgressMode
from s3gym_tui.textgate import safe_markup
from s3gym_tui.training.config import METHODS, GrpoConfig, SftConfig, TaspoConfig

OutOption = typer.Option(None, "--out", help="Where adapters and JSONL go (default: $S3GYM_TRAINING_DIR or the user "
                                             "data dir, where any process finds trained/<id>/<x>).")


@cli.command()
@data_parallel
@with_recipe_options(SftConfig, GrpoConfig, TaspoConfig)
def train(
    run_id: str = typer.Argument(..., help="The run whose exploration becomes the training signal."),
    method: Optional[str] = typer.Option(None, "--method", help="sft (self-judged dataset) | grpo (RL on the run's "
                                         "exploration seeds) | taspo (episode-level GRPO with credit per action: "
                                         "advantages A_i * w_it) [default: the recipe's, else sft]."),
    config: Optional[Path] = typer.Option(None, "--config", help="A recipe file (YAML or TOML: settings by name, "
                                          "e.g. `learning_rate: 5e-4`, and `method`); flags given override it."),
    from_training: Optional[str] = typer.Option(None, "--from", help="Re-run the recipe a stored training was "
                                                "made with (on RUN); flags given override it."),
    out: Optional[Path] = OutOption,
    progress: Optional[ProgressMode] = ProgressOption,
    db: Optional[Path] = DbOption,
    recipe_values: dict = None,  # type: ignore[assignment]  (the generated recipe options that were given)
) -> None:
    """Train an expert from a run's exploration (SFT, GRPO or TASPO) and evaluate every checkpoint in strict
    mode. Every setting below comes from the method's recipe (training/config.py)."""
    from s3gym_tui.training import MissingExtra, require_extra

    store = _store(db, write=True) if from_training is not None else None  # a recipe alone is checked first
    recipe = resolve_recipe(store, method, config, from_training, recipe_values or {})
    store = store or _store(db, write=True)
    source = store.runs.get_run(run_id)  # an unknown run: one line, before anything loads
    check_eval_settings(source.config, recipe.eval_episodes, recipe.step_cap)
    from s3gym_tui.training.options import vllm_problem
    from s3gym_tui.training.ranks import world

    if isinstance(recipe, GrpoConfig):
        problem = vllm_problem(recipe.vllm, recipe.level, world().size)
        if problem:
            raise UserError(problem)
    try:
        if not isinstance(recipe, SftConfig) or recipe.backend == "local":
            require_extra()  # before anything is written: one line saying how to install it
        from s3gym_tui.training.console import Bars, print_outcome, run_with_bars
        from s3gym_tui.training.pipeline import TrainingError, train_from_run
    except MissingExtra as exc:
        raise UserError(str(exc)) from None
    bars = Bars(console, recipe.epochs if isinstance(recipe, SftConfig) else None, progress)
    try:
        with stopped_resumable(bars):
            outcome = run_with_bars(console, lambda hooks: train_from_run(store, run_id, recipe, hooks, out_dir=out),
                                    bars=bars)
    except (MissingExtra, TrainingError) as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        training = store.trainings.get_training(bars.training_id) if bars.training_id else None
        interrupted(f"training {training.id} {training.error}" if training and training.error else None,
                    training.id if training else None)
    print_outcome(console, outcome)
    if isinstance(recipe, GrpoConfig) and recipe.reward == "oracle":
        console.print("[yellow]oracle ablation[/]: trained on the verifier's rewards (recorded on the training)")


def resolve_recipe(store, method: Optional[str], config: Optional[Path], from_training: Optional[str],
                   given: dict):
    """The recipe of `s3gym train`: a stored training's (--from) or a file's (--config), then the flags given
    over it; the method from --method, else the file or the stored training, else sft. Validated once, by
    the method's model (training/config.py); a problem is one line naming the flag."""
    from s3gym_tui.training.config import RecipeError, build, read_recipe_file, stored_recipe

    if config is not None and from_training is not None:
        raise UserError("--config and --from both give a recipe: use one")
    values: dict = {}
    try:
        if from_training is not None:
            stored = store.trainings.get_training(from_training)
            if stored.role != "expert":
                raise UserError(f"{from_training} is part of study {stored.study_id}: its recipe is the study's")
            previous = stored_recipe(stored.settings, stored.method)
            values = previous.model_dump()
            method = method or previous.method
        elif config is not None:
            values = read_recipe_file(config)
            method = method or values.get("method")
        values.pop("method", None)
        if method is not None and method not in METHODS:
            raise UserError(f"unknown method {method!r}: {', '.join(METHODS)}")
        chosen = method or "sft"
        if from_training is not None and chosen != previous.method:  # the stored fields of another method
            values = {k: v for k, v in values.items() if k in METHODS[chosen].model_fields}
        return build(chosen, {**values, **given})
    except RecipeError as exc:
        raise UserError(str(exc)) from None


def interrupted(message, resume: Optional[str] = None) -> None:
    """Ctrl-C or SIGTERM: say what was stopped and exactly how to continue, exit 130."""
    from s3gym_tui.cli.common import EXIT_INTERRUPTED, err

    err.print(f"{safe_markup(message or 'interrupted', one_line=True)}; stored data is intact", soft_wrap=True,
              highlight=False)
    if resume:
        err.print(f"resume with: s3gym resume {safe_markup(resume, one_line=True)}", soft_wrap=True,
                  highlight=False)
    raise typer.Exit(EXIT_INTERRUPTED)


def check_eval_settings(template, eval_episodes: Optional[int], step_cap: Optional[int]) -> None:
    """The evaluation runs' settings, checked before anything is trained (they are made after it):
    an out-of-range value is one line naming the flag."""
    from s3gym_tui.models import RunConfig

    changes = {k: v for k, v in (("eval_episodes", eval_episodes), ("step_cap", step_cap)) if v is not None}
    if changes:
        with flags_named():
            RunConfig.model_validate({**template.model_dump(), **changes})


class stopped_resumable:
    """Around a training or a study: a failure after it was stored (the disk, the store, the model)
    is exit 3 with the resume command (`Bars.training_id`: set once one is created)."""

    def __init__(self, bars, study: Optional[str] = None) -> None:
        self.bars = bars
        self.study = study

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, tb) -> bool:
        from s3gym_tui.engine.llm import ModelUnavailable
        from s3gym_tui.store import StoreError
        from s3gym_tui.store.leases import RunBusy

        if not isinstance(exc, (StoreError, ModelUnavailable)) or isinstance(exc, RunBusy):
            return False
        target = self.study() if callable(self.study) else (self.study or self.bars.training_id)
        if target is None:
            return False  # nothing was stored yet: the one-line error as it is
        raise Stopped(f"{target} stopped: {exc}", resume=target) from None


def resume_training_cli(store, training_id: str, progress: Optional[ProgressMode] = None,
                        repair: bool = False) -> None:
    """`s3gym resume TRAINING`: the trainer from its last checkpoint, then the evaluation (with
    --repair: also the evaluation that repairs replies, if the training did not have it yet)."""
    from s3gym_tui.training import MissingExtra
    from s3gym_tui.training.console import Bars, print_outcome, run_with_bars
    from s3gym_tui.training.pipeline import TrainingError, resume_training

    bars = Bars(console, mode=progress)
    try:
        with stopped_resumable(bars, training_id):
            outcome = run_with_bars(console, lambda hooks: resume_training(store, training_id, hooks, repair or None),
                                    bars=bars)
    except (MissingExtra, TrainingError) as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        training = store.trainings.get_training(training_id)
        interrupted(f"training {training_id} {training.error or 'interrupted'}", training_id)
    print_outcome(console, outcome)


@cli.command()
def dataset(
    run_id: str = typer.Argument(..., help="The run whose exploration steps become the dataset."),
    out: Path = typer.Option(..., "--out", "-o", help="Directory for <id>.prompt_completion.jsonl and "
                                                      "<id>.messages.jsonl."),
    threshold: float = typer.Option(0.0, "--threshold", help="Keep steps whose self-score is above this."),
    correction: str = typer.Option("none", "--correction", help="none | reference | a litellm model string."),
    max_examples: Optional[int] = typer.Option(None, "--max-examples", min=1),
    max_length: Optional[int] = typer.Option(None, "--max-length", min=16,
                                             help="Drop (and name) examples longer than N tokens."),
    base: str = typer.Option("default", "--base", help="Tokenizer for the lengths: an HF model dir or 'default'."),
    exclude_label: List[str] = typer.Option(None, "--exclude-label", help="Leave out steps annotated with this "
                                            "label ('any': any label; repeat for several).", show_default=False),
    corrections: bool = typer.Option(False, "--corrections", help="Train on a person's corrected action "
                                     "(`s3gym annotate EP#I LABEL --correct ACTION`) where a step has one."),
    db: Optional[Path] = DbOption,
) -> None:
    """Build a run's SFT dataset and write its two JSONL files (no training)."""
    check_number("--threshold", threshold)
    import asyncio

    from s3gym_tui.training import MissingExtra
    from s3gym_tui.training.console import print_dataset
    from s3gym_tui.training.dataset import build_dataset, export_jsonl

    store = _store(db, write=True)
    source = store.runs.get_run(run_id)
    if source.config.pathway == "trained":
        raise UserError(f"run {run_id!r} is a training run: build datasets from the run that explored")
    if out.exists() and not out.is_dir():
        raise UserError(f"{out} is a file: --out names a directory")
    measure = None
    try:
        from s3gym_tui.training.lengths import TokenCounter, load_tokenizer

        measure = TokenCounter(load_tokenizer(base))
    except MissingExtra:
        if max_length is not None:
            raise UserError("--max-length needs the tokenizer: install the train extra "
                            "(pip install torch==2.13.0 -e \".[train]\")") from None
    except (OSError, ValueError) as exc:
        raise UserError(f"cannot load the tokenizer of {base}: {' '.join(str(exc).split())[:200]}") from None
    build = asyncio.run(build_dataset(store, run_id, threshold=threshold, correction=correction,
                                      max_examples=max_examples, measure=measure, max_length=max_length,
                                      exclude_labels=tuple(exclude_label or ()), annotated_corrections=corrections))
    exported = export_jsonl(store, build.dataset.id, out)
    print_dataset(console, build, exported)
    if measure is None:
        console.print("[dim]example lengths not measured (the train extra is not installed)[/]")
    use = build.annotations
    if use.excluded_labels:
        console.print(f"annotations: {use.labelled_excluded} labelled step(s) left out "
                      f"({safe_markup(', '.join(use.excluded_labels))})", highlight=False)
    if corrections:
        refused = f", {use.corrections_refused} the game did not accept there" if use.corrections_refused else ""
        console.print(f"annotations: {use.corrections_used} corrected action(s) used as the target{refused}",
                      highlight=False)
    console.print(f"wrote {exported.count} examples")


@cli.command("trainings")
def list_trainings(db: Optional[Path] = DbOption, limit: int = typer.Option(50, "--limit"),
                   as_json: bool = typer.Option(False, "--json", help="One JSON document: every training with its "
                                                "status, learning signal and checkpoint figures.")) -> None:
    """Stored trainings (experts, distillation students), oldest first. The status is read as a
    person should: a training whose process is gone (killed) is 'interrupted'."""
    from s3gym_tui.store.leases import shown_training_status
    from s3gym_tui.training.learning_signal import signal_summaries

    store = _store(db)
    leases = store.leases.training_leases()
    trainings = store.trainings.list(limit=limit)
    if as_json:
        from s3gym_tui.cli.common import emit_json

        emit_json([training_json(store, t, shown_training_status(t.status, leases.get(t.id))) for t in trainings])
        return
    table = Table(title="trainings (gain: the last checkpoint against the base served the same way, split into "
                        "format and play: training/baseline.py)")
    for col in ("id", "method", "role", "games", "status", "reward", "examples", "checkpoints", "updates",
                "no signal", "gain", "created"):
        table.add_column(col, justify="right" if col in ("examples", "checkpoints", "updates") else "left")
    for t in trainings:
        losses = store.trainings.losses(t.id)
        summaries = signal_summaries(losses)
        signal = ", ".join(f"{s.no_signal}/{s.updates}" for s in summaries) or "-"
        cells = (t.id, t.method, t.role, ", ".join(t.games), shown_training_status(t.status, leases.get(t.id)),
                 t.reward or "-", str(t.examples), str(len(store.trainings.training_checkpoints(t.id))),
                 str(updates_done(t, losses)), signal,
                 training_gain(store, t), t.created_at[:19])
        table.add_row(*(safe_markup(c, one_line=True) for c in cells))
    console.print(table)


def updates_done(training, losses) -> int:
    """The updates a training has made: its recorded total once it finishes, the updates already
    logged (each phase's last step) while it runs or after it was interrupted."""
    last: dict[str, int] = {}
    for p in losses:
        last[p.phase] = max(last.get(p.phase, 0), p.step)
    return max(training.steps, sum(last.values()))


def training_gain(store, training) -> str:
    """The verdict of a training's last checkpoint on its own game (format gain, play gain, no gain, not split),
    '—' before it is evaluated."""
    from s3gym_tui.training.baseline import outcome
    from s3gym_tui.training.evaluate import own_eval_run, training_report

    run = own_eval_run(store.trainings, store.runs, training)
    if run is None:
        return "—"
    found = outcome(training_report(store, run))
    return "—" if found is None or found.total is None else found.verdict


def training_json(store, training, shown_status: str) -> dict:
    """A training for `s3gym trainings --json`: its record, the status as shown, the learning signal
    per phase, and per checkpoint the figures as written and (separately) repaired."""
    from s3gym_tui.training.evaluate import eval_runs, training_report
    from s3gym_tui.training.learning_signal import signal_summaries
    from s3gym_tui.training.baseline import baseline_text, splits
    from s3gym_tui.training.runs import run_decoding

    reports = []
    for game, run, _ in eval_runs(store.trainings, store.runs, training):
        if run_decoding(run) != "free":
            continue
        report = training_report(store, run)
        reports.append({
            "run_id": run.id, "game": game, "serving": report.serving,
            "repair_run_id": report.repair_run.id if report.repair_run else None,
            "grammar_run_id": report.grammar_run.id if report.grammar_run else None,
            "baseline": baseline_text(report), "gains": [g.as_dict() for g in splits(report)],
            "checkpoints": [{
                "x": row.epoch, "model": row.model, "step": row.step, "mean": row.mean, "scores": list(row.scores),
                "delta": row.delta, "negative_transfer": row.negative, "unparsed": row.unparsed,
                "replies": row.replies,
                "repaired": None if row.repair is None else {
                    "mean": row.repair.mean, "scores": list(row.repair.scores), "delta": row.repair.delta,
                    "repaired_replies": row.repair.repaired, "steps": row.repair.steps},
                "grammar": None if row.grammar is None else {
                    "mean": row.grammar.mean, "scores": list(row.grammar.scores), "delta": row.grammar.delta},
                "legacy_repaired_count": row.legacy_repaired} for row in report.rows]})
    from s3gym_tui.training.device import SCOPE_LABELS, rss_scope

    scope = rss_scope(training.metrics)
    peak = None if scope is None else {"mb": training.metrics["peak_rss_mb"], "scope": scope,
                                       "label": SCOPE_LABELS[scope]}
    return {**training.model_dump(mode="json"), "shown_status": shown_status, "peak_rss": peak,
            "signal": [s.as_dict() for s in signal_summaries(store.trainings.losses(training.id))],
            "evaluations": reports}
