"""`s3gym train` (SFT or GRPO experts), `s3gym dataset` (the SFT JSONL alone) and `s3gym trainings`."""

from __future__ import annotations

from pathlib import Path
from typing import List, Optional

import typer
from rich.table import Table

from s3gym_tui.cli.parallel import data_parallel
from s3gym_tui.cli.common import (DbOption, ProgressOption, Stopped, UserError, check_number, _store, cli, console,
                                  flags_named, model_name)
from s3gym_tui.progress import ProgressMode
from s3gym_tui.textgate import safe_markup

# GRPO's format warm start by default (training/warm_start.py): measured on the bundled SmolLM2-135M
# (benchmarks/train_learns.py), free replies that parse 0-33% without it, 100% with 16 examples x 2
DEFAULT_WARM_START = 16

OutOption = typer.Option(None, "--out", help="Where adapters and JSONL go (default: $S3GYM_TRAINING_DIR or the user "
                                             "data dir, where any process finds trained/<id>/<x>).")


@cli.command()
@data_parallel
def train(
    run_id: str = typer.Argument(..., help="The run whose exploration becomes the training signal."),
    method: str = typer.Option("sft", "--method", help="sft (self-judged dataset) | grpo (RL on the run's "
                                                      "exploration seeds) | taspo (episode-level GRPO with credit "
                                                      "per action: advantages A_i * w_it)."),
    threshold: float = typer.Option(0.0, "--threshold", help="SFT: keep steps whose self-score is above this."),
    epochs: int = typer.Option(2, "--epochs", min=1, help="SFT: training epochs (one checkpoint each)."),
    base: str = typer.Option("default", "--base", callback=model_name,
                             help="'default' (embedded SmolLM2-135M), an HF model directory, or a hub id "
                                  "(owner/name[@revision], from the Hugging Face cache or hub)."),
    correction: str = typer.Option("none", "--correction", callback=model_name,
                                   help="SFT: none | reference | a litellm model string."),
    max_examples: Optional[int] = typer.Option(None, "--max-examples", min=1, help="SFT: stop after N examples."),
    max_length: Optional[int] = typer.Option(None, "--max-length", min=16, help="SFT: drop (and name) examples "
                                             "longer than N tokens; default: follow the data, cut nothing."),
    eval_episodes: Optional[int] = typer.Option(None, "--eval-episodes", min=0,
                                                help="Evaluation episodes per checkpoint (default: the run's)."),
    backend: str = typer.Option("local", "--backend", help="local (LoRA with TRL) | remote (provider's API, SFT)."),
    remote_model: Optional[str] = typer.Option(None, "--remote-model", callback=model_name,
                                               help="e.g. openai/gpt-4o-mini-2024-07-18"),
    max_steps: int = typer.Option(-1, "--max-steps", help="SFT: cap on optimizer steps (overrides --epochs)."),
    batch_size: int = typer.Option(1, "--batch-size", min=1, help="SFT: examples per step (RAM grows with it)."),
    grad_accum: int = typer.Option(4, "--grad-accum", min=1),
    learning_rate: Optional[float] = typer.Option(None, "--lr", help="Default: 5e-4 (SFT), 1e-4 (GRPO)."),
    gradient_checkpointing: bool = typer.Option(True, "--gradient-checkpointing/--no-gradient-checkpointing",
                                                help="Less RAM (on by default), ~35% slower on CPU."),
    reward: str = typer.Option("self", "--reward", help="GRPO: self (the agent's own judgement) | stated (the "
                                                        "score it states) | oracle (verifier reward: ablation)."),
    updates: int = typer.Option(8, "--updates", min=1, help="GRPO: optimizer steps."),
    generations: int = typer.Option(4, "--generations", min=2, help="GRPO: replies sampled per state."),
    states: int = typer.Option(2, "--states-per-update", min=1,
                               help="GRPO: groups per optimizer step (states; at --level episode, seeds)."),
    save_every: int = typer.Option(4, "--save-every", min=1, help="GRPO: a checkpoint every N updates."),
    rollout_episodes: Optional[int] = typer.Option(None, "--rollout-episodes", min=1,
                                                   help="GRPO: exploration seeds to roll out on (default: the run's)."),
    rollout_step_cap: Optional[int] = typer.Option(None, "--rollout-step-cap", min=1, max=64),
    completion_tokens: int = typer.Option(32, "--completion-tokens", min=4, help="GRPO: tokens per sampled reply."),
    level: Optional[str] = typer.Option(None, "--level", help="GRPO: step (a group is G replies at one state; the "
                                        "default) | episode (G whole episodes on one exploration seed, each stored as "
                                        "an exploration episode; the only level of taspo)."),
    credit: str = typer.Option("action", "--credit", help="TASPO: action (weights per action) | token (per token) | "
                               "uniform (w = 1: plain GRPO through the same path)."),
    kappa: float = typer.Option(0.05, "--kappa", min=0.0, help="TASPO: shifts below this are noise (filtered)."),
    tau: float = typer.Option(1.0, "--tau", min=1e-6, help="TASPO: temperature of tanh."),
    eps_w: float = typer.Option(0.5, "--eps-w", min=0.0, max=1.0, help="TASPO: weights stay in [1 - eps_w, 1 + eps_w]."),
    pi_source: str = typer.Option("siblings", "--pi-source", help="TASPO: siblings (successful rollouts of the same "
                                  "seed) | off-trajectory (of other seeds: the ablation)."),
    analyzer: Optional[str] = typer.Option(None, "--analyzer", callback=model_name,
                                           help="TASPO: the model that writes PI (default: the run's model)."),
    sampling: str = typer.Option("mixed", "--sampling", help="GRPO: how replies are sampled: mixed (half of each "
                                 "group under the answer-line grammar, half free) | constrained | free."),
    format_weight: float = typer.Option(1.0, "--format-weight", help="GRPO: taken off the reward of a reply "
                                        "without a parsable action."),
    warm_start: Optional[int] = typer.Option(None, "--warm-start", min=0, max=10_000, help="GRPO: before the "
                                             "first update, fine-tune on this many of the base's own replies written "
                                             "under the answer-line grammar at states it reaches on the exploration "
                                             "seeds (teaches the answer line; no reward is read). 0: none. Default: "
                                             f"{DEFAULT_WARM_START} for GRPO and TASPO (on the bundled model, free "
                                             "replies that parse went from 0-33% to 100%)."),
    warm_start_epochs: int = typer.Option(2, "--warm-start-epochs", min=1, max=100,
                                          help="GRPO: passes over the --warm-start examples."),
    vllm: Optional[str] = typer.Option(None, "--vllm", help="GRPO: sample replies with vLLM (TRL's modes): server "
                                       "(a `trl vllm-serve --model BASE` server) | colocate (in the training "
                                       "processes). Needs vLLM installed (a GPU in practice)."),
    vllm_url: Optional[str] = typer.Option(None, "--vllm-url", help="GRPO --vllm server: the server's base URL "
                                           "(default: TRL's, http://0.0.0.0:8000)."),
    step_cap: Optional[int] = typer.Option(None, "--step-cap", min=1, max=64, help="Steps per eval episode."),
    repair: bool = typer.Option(False, "--repair", help="Also evaluate every checkpoint with replies that break the "
                                "answer format regenerated under the game's grammar (a second evaluation run; "
                                "each repair stored with its step). Off: replies are scored as the model wrote them."),
    out: Optional[Path] = OutOption,
    progress: Optional[ProgressMode] = ProgressOption,
    db: Optional[Path] = DbOption,
) -> None:
    """Train an expert from a run's exploration (SFT or GRPO) and evaluate every checkpoint in strict mode."""
    from s3gym_tui.training import MissingExtra, require_extra

    if method not in ("sft", "grpo", "taspo"):
        raise UserError(f"unknown method {method!r}: sft, grpo or taspo")
    if level is None:
        level = "episode" if method == "taspo" else "step"
    if method == "taspo" and level != "episode":
        raise UserError("taspo is episode-level GRPO: leave out --level or give --level episode")
    if credit not in ("action", "token", "uniform"):
        raise UserError(f"unknown credit {credit!r}: action, token or uniform")
    if pi_source not in ("siblings", "off-trajectory"):
        raise UserError(f"unknown --pi-source {pi_source!r}: siblings or off-trajectory")
    if reward not in ("self", "stated", "oracle"):
        raise UserError(f"unknown reward {reward!r}: self, stated or oracle")
    if level not in ("step", "episode"):
        raise UserError(f"unknown level {level!r}: step or episode")
    if sampling not in ("mixed", "constrained", "free"):
        raise UserError(f"unknown sampling {sampling!r}: mixed, constrained or free")
    check_number("--format-weight", format_weight, low=0, high=100)
    check_number("--threshold", threshold)
    check_number("--lr", learning_rate, above=0, high=1)
    if max_steps != -1 and max_steps < 1:
        raise UserError(f"--max-steps must be -1 (follow --epochs) or at least 1, not {max_steps}")
    from s3gym_tui.training.options import vllm_problem

    if warm_start is None:
        warm_start = 0 if method == "sft" else DEFAULT_WARM_START
    if warm_start and method == "sft":
        raise UserError("--warm-start applies to GRPO and TASPO (--method grpo|taspo): SFT is already a fine-tune")
    if vllm is not None and method != "grpo":
        raise UserError("--vllm applies to GRPO (--method grpo): its rollouts are what vLLM generates")
    if vllm_url is not None and vllm != "server":
        raise UserError("--vllm-url names the server of --vllm server")
    from s3gym_tui.training.ranks import world

    problem = vllm_problem(vllm, level, world().size)
    if problem:
        raise UserError(problem)
    store = _store(db, write=True)
    source = store.get_run(run_id)  # an unknown run: one line, before anything loads
    check_eval_settings(source.config, eval_episodes, step_cap)
    if repair and backend != "local":
        raise UserError("--repair needs --backend local: only locally served checkpoints can be repaired")
    try:
        if backend == "local":
            require_extra()  # before anything is written: one line saying how to install it
        from s3gym_tui.training.backend import TrainConfig
        from s3gym_tui.training.console import Bars, print_outcome, run_with_bars
        from s3gym_tui.training.options import GrpoConfig, TrainOptions
        from s3gym_tui.training.pipeline import TrainingError, train_from_run
    except MissingExtra as exc:
        raise UserError(str(exc)) from None
    lr = learning_rate if learning_rate is not None else (5e-4 if method == "sft" else 1e-4)
    options = TrainOptions(
        method=method, threshold=threshold, correction=correction, max_examples=max_examples, backend=backend,
        base=base, remote_model=remote_model, eval_episodes=eval_episodes, step_cap=step_cap, out_dir=out, repair=repair,
        train=TrainConfig(epochs=epochs, max_steps=max_steps, batch_size=batch_size, grad_accum=grad_accum,
                          learning_rate=lr, gradient_checkpointing=gradient_checkpointing, max_length=max_length),
        grpo=GrpoConfig(reward=reward, updates=updates, num_generations=generations, states_per_update=states,
                        save_every=save_every, episodes=rollout_episodes, rollout_step_cap=rollout_step_cap,
                        max_completion_length=completion_tokens, learning_rate=lr, level=level, sampling=sampling,
                        format_weight=format_weight, warm_start=warm_start, warm_start_epochs=warm_start_epochs,
                        vllm=vllm, vllm_url=vllm_url,
                        **({"credit": credit, "kappa": kappa, "tau": tau, "eps_w": eps_w, "pi_source": pi_source,
                            "analyzer": analyzer} if method == "taspo" else {})))
    bars = Bars(console, epochs if method == "sft" else None, progress)
    try:
        with stopped_resumable(bars):
            outcome = run_with_bars(console, lambda hooks: train_from_run(store, run_id, options, hooks), bars=bars)
    except (MissingExtra, TrainingError) as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        training = store.get_training(bars.training_id) if bars.training_id else None
        interrupted(f"training {training.id} {training.error}" if training and training.error else None,
                    training.id if training else None)
    print_outcome(console, outcome)
    if reward == "oracle" and method in ("grpo", "taspo"):
        console.print("[yellow]oracle ablation[/]: trained on the verifier's rewards (recorded on the training)")


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
        training = store.get_training(training_id)
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
    source = store.get_run(run_id)
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
    leases = store.training_leases()
    trainings = store.trainings(limit=limit)
    if as_json:
        from s3gym_tui.cli.common import emit_json

        emit_json([training_json(store, t, shown_training_status(t.status, leases.get(t.id))) for t in trainings])
        return
    table = Table(title="trainings")
    for col in ("id", "method", "role", "games", "status", "reward", "examples", "checkpoints", "updates",
                "no signal", "created"):
        table.add_column(col, justify="right" if col in ("examples", "checkpoints", "updates") else "left")
    for t in trainings:
        summaries = signal_summaries(store.losses(t.id))
        signal = ", ".join(f"{s.no_signal}/{s.updates}" for s in summaries) or "-"
        cells = (t.id, t.method, t.role, ", ".join(t.games), shown_training_status(t.status, leases.get(t.id)),
                 t.reward or "-", str(t.examples), str(len(store.training_checkpoints(t.id))), str(t.steps), signal,
                 t.created_at[:19])
        table.add_row(*(safe_markup(c, one_line=True) for c in cells))
    console.print(table)


def training_json(store, training, shown_status: str) -> dict:
    """A training for `s3gym trainings --json`: its record, the status as shown, the learning signal
    per phase, and per checkpoint the figures as written and (separately) repaired."""
    from s3gym_tui.training.evaluate import training_report
    from s3gym_tui.training.learning_signal import signal_summaries
    from s3gym_tui.training.runs import eval_runs, is_repair_run

    reports = []
    for game, run, _ in eval_runs(store, training):
        if is_repair_run(run):
            continue
        report = training_report(store, run)
        reports.append({
            "run_id": run.id, "game": game, "serving": report.serving,
            "repair_run_id": report.repair_run.id if report.repair_run else None,
            "checkpoints": [{
                "x": row.epoch, "model": row.model, "step": row.step, "mean": row.mean, "scores": list(row.scores),
                "delta": row.delta, "negative_transfer": row.negative, "unparsed": row.unparsed,
                "replies": row.replies,
                "repaired": None if row.repair is None else {
                    "mean": row.repair.mean, "scores": list(row.repair.scores), "delta": row.repair.delta,
                    "repaired_replies": row.repair.repaired, "steps": row.repair.steps},
                "legacy_repaired_count": row.legacy_repaired} for row in report.rows]})
    from s3gym_tui.training.device import SCOPE_LABELS, rss_scope

    scope = rss_scope(training.metrics)
    peak = None if scope is None else {"mb": training.metrics["peak_rss_mb"], "scope": scope,
                                       "label": SCOPE_LABELS[scope]}
    return {**training.model_dump(mode="json"), "shown_status": shown_status, "peak_rss": peak,
            "signal": [s.as_dict() for s in signal_summaries(store.losses(training.id))], "evaluations": reports}
