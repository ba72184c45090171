"""`s3gym train` / `s3gym resume TRAINING` / `s3gym distill` in the terminal: progress for every phase
(dataset, base loading, rollouts, updates, checkpoints, evaluation) as bars or timestamped lines (the
commands' one progress mechanism, s3gym_tui.progress), and the final tables. The commands themselves
(options, errors) live in s3gym_tui/cli/train.py and cli/distill.py."""

from __future__ import annotations

from typing import Any, Optional

from rich.console import Console
from rich.table import Table

from s3gym_tui.progress import JobProgress, ProgressMode
from s3gym_tui.engine.events import CheckpointScored, EpisodeDone, StepDone
from s3gym_tui.textgate import safe_markup
from s3gym_tui.training.evaluate import TrainingReport
from s3gym_tui.training.pipeline import Hooks, TrainingOutcome

PHASE_LABEL = {"sft": "SFT updates", "grpo": "GRPO updates", "warm-start": "format warm start", "distill-off": "phase 1 updates",
               "distill-on": "phase 2 updates"}


def _fmt(value: Optional[float], digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


class Bars:
    """A bar (or a plain line) per phase, fed by the pipeline's hooks."""

    def __init__(self, console: Console, epochs: Optional[int] = None,
                 mode: Optional[ProgressMode] = None) -> None:
        self.progress = JobProgress(console, mode, label_width=16)
        self.tasks: dict[str, int] = {}
        self.epochs = epochs
        self.eval_total = 0
        self.training_id: Optional[str] = None  # the training this process works on, once created

    def task(self, name: str, total: Optional[int] = None) -> int:
        if name not in self.tasks:
            self.tasks[name] = self.progress.add_task(name, total=total)
        return self.tasks[name]

    def info(self, name: str, text: str, **kw: Any) -> None:
        self.progress.update(self.task(name), info=safe_markup(text, one_line=True), **kw)

    # ----- hooks --------------------------------------------------------------------------
    def on_dataset(self, seen: int, total: int) -> None:
        self.progress.update(self.task("dataset"), total=total, completed=seen, detail=True)

    def on_built(self, build, exported) -> None:
        c = build.dataset.counts
        too_long = f", too long {len(build.too_long)}" if build.too_long else ""
        self.info("dataset", f"{build.dataset.id}: kept {c.get('kept', 0)}, corrected {c.get('corrected', 0)}, "
                             f"dropped {c.get('dropped', 0)}{too_long}",
                  total=build.quality.steps, completed=build.quality.steps)

    def on_training(self, training) -> None:
        self.training_id = training.id
        self.info("loading base", f"{training.id}: loading the base model")

    def on_train(self, event) -> None:
        label = PHASE_LABEL.get(event.phase, "updates")
        if event.kind == "load":
            if event.warning:  # a setting that will not work as meant (said once, before the updates)
                self.progress.note(f"[yellow]warning[/]: {safe_markup(event.warning)}")
            self.info("loading base", "ready", total=1, completed=1)
            if event.max_steps:
                self.task(label, event.max_steps)
        elif event.kind == "step":
            t = self.task(label, event.max_steps or None)
            extra = "".join(f" · {k} {v:.3f}" for k, v in event.metrics.items()
                            if k in ("reward", "verifier_reward", "kl"))
            if "frac_reward_zero_std" in event.metrics:
                extra += f" · zero-var groups {event.metrics['frac_reward_zero_std']:.0%}"
            if event.warning:
                self.progress.note(f"[yellow]update {event.step} had no signal[/]: {safe_markup(event.warning)}"
                                   + _signal_figures(event.metrics))
            self.progress.update(t, total=event.max_steps or None, completed=event.step,
                                 info=f"loss {event.loss:.4f}{extra}" + (f" · epoch {event.epoch:.2f}"
                                                                          if event.phase == "sft" else ""))
        elif event.kind == "checkpoint":
            self.task("checkpoints", self.epochs if event.phase == "sft" else None)
            self.info("checkpoints", f"x={event.x} saved after {event.step} updates", advance=1)

    def on_rollout(self, game: str, seed: int, steps: int) -> None:
        self.info("rollouts", f"{game} seed {seed}: {steps} steps (explore mode)", advance=1)

    def on_remote(self, status: str, job) -> None:
        self.info("remote job", f"{getattr(job, 'id', '') or ''} {status}")

    def on_run(self, run) -> None:
        cfg = run.config
        if cfg.pathway != "trained":  # an ordinary run (distillation: an expert's rollouts)
            self.task(f"rollouts {cfg.game}", cfg.explore_episodes)
            return
        self.eval_total += len(cfg.checkpoints()) * cfg.eval_episodes
        self.progress.update(self.task("evaluation"), total=self.eval_total)
        self.info("evaluation", f"{run.id} ({cfg.game})")

    def on_eval(self, event) -> None:
        if isinstance(event, EpisodeDone) and event.episode.phase == "explore":
            e = event.episode
            self.info(f"rollouts {e.game}", f"episode {e.index}: score {_fmt(e.score, 2)}", advance=1)
            return
        if "evaluation" not in self.tasks:
            return
        t = self.tasks["evaluation"]
        if isinstance(event, StepDone) and event.episode.phase == "eval":
            self.progress.update(t, detail=True, info=safe_markup(
                f"{event.episode.game} x={event.episode.checkpoint} · step {event.step.index + 1} · ", one_line=True)
                + safe_markup(event.step.action, one_line=True, max_chars=24))
        elif isinstance(event, EpisodeDone):
            e = event.episode
            self.info("evaluation", f"{e.game} x={e.checkpoint} episode {e.index}: score {_fmt(e.score, 2)}",
                      advance=1)
        elif isinstance(event, CheckpointScored):
            mean = event.checkpoint.mean
            self.progress.update(t, info=f"x={event.checkpoint.x}: mean " + ("—" if mean is None else f"{mean:.2f}"))

    def hooks(self, cls=Hooks, **extra: Any):
        return cls(dataset_progress=self.on_dataset, dataset_built=self.on_built, training_created=self.on_training,
                   train_event=self.on_train, rollout=self.on_rollout, remote_status=self.on_remote,
                   run_created=self.on_run, eval_event=self.on_eval, **extra)


def _signal_figures(metrics: dict) -> str:
    from s3gym_tui.training.learning_signal import SIGNAL_KEYS, SIGNAL_LABELS

    shown = [f"{SIGNAL_LABELS[k]} {metrics[k]:.3g}" for k in SIGNAL_KEYS if isinstance(metrics.get(k), (int, float))]
    return f" ({', '.join(shown)})" if shown else ""


def stopping_note(bars: Bars):
    """Say, as soon as a stop is requested, what is being finished (training/stop.py's phase); returns the
    function that stops saying it."""
    from s3gym_tui.training import stop

    def stopping(reason: str, phase: Optional[str]) -> None:
        bars.progress.note(f"[yellow]stopping[/] ({safe_markup(reason, one_line=True)}): finishing "
                           f"{safe_markup(phase or 'the step in progress', one_line=True)}; what is done is kept "
                           f"(a second Ctrl-C quits at once)")

    return stop.on_request(stopping)


def run_with_bars(console: Console, coroutine_factory, epochs: Optional[int] = None,
                  mode: Optional[ProgressMode] = None, bars: Optional[Bars] = None):
    """Run a training coroutine with its bars, stoppable by Ctrl-C / SIGTERM (training/stop.py)."""
    from s3gym_tui.training import stop

    bars = bars or Bars(console, epochs, mode)
    forget = stopping_note(bars)
    try:
        with bars.progress:
            return stop.run(lambda: coroutine_factory(bars.hooks()))
    finally:
        forget()


# ----- tables ------------------------------------------------------------------------------------
def print_dataset(console: Console, build, exported, excluded: Optional[int] = None) -> None:
    q = build.quality
    data = Table(title="dataset (self-judged selection vs verifier)")
    for col in ("dataset", "kept", "corrected", "dropped", "too long", "longest", "precision", "recall",
                "eval steps excluded"):
        data.add_column(col, justify="left" if col == "dataset" else "right", no_wrap=True)
    data.add_row(safe_markup(build.dataset.id), str(q.kept), str(q.corrected), str(q.dropped), str(len(build.too_long)),
                 "-" if build.longest is None else str(build.longest), _fmt(q.precision), _fmt(q.recall),
                 str(build.excluded_eval_steps if excluded is None else excluded))
    console.print(data)
    if build.too_long:
        console.print(f"[yellow]{len(build.too_long)} example(s) longer than the limit of {build.limit} tokens were "
                      f"dropped (stored with the dataset, never truncated):[/]")
        for t in build.too_long[:20]:
            console.print(f"  episode {t.episode_index} step {t.step_index}: {t.tokens} tokens  "
                          f"[dim]({safe_markup(t.episode_id)})[/]")
        if len(build.too_long) > 20:
            console.print(f"  ... and {len(build.too_long) - 20} more (`s3gym dataset` lists them all)")
    if exported is not None:
        console.print(f"JSONL: {safe_markup(str(exported.prompt_completion))} (TRL prompt/completion), "
                      f"{safe_markup(str(exported.messages))} (OpenAI messages)", soft_wrap=True)


def _share(part: Optional[int], whole: Optional[int]) -> str:
    return "—" if part is None or not whole else f"{part}/{whole}"


def print_report(console: Console, report: TrainingReport) -> None:
    from s3gym_tui.training.device import SCOPE_LABELS, rss_scope
    from s3gym_tui.training.learning_signal import signal_summaries

    from s3gym_tui.training.baseline import baseline_text, outcome_line, splits

    t = report.training
    repaired = report.repair_run is not None
    constrained = report.grammar_run is not None
    title = (f"checkpoints of {safe_markup(report.run.id)} on {report.game} (strict mode, eval seeds; replies as "
             f"the model wrote them" + (", and repaired (R)" if repaired else "") + ")")
    cps = Table(title=title)
    cols = ["x", "after updates", "model", "mean score", "vs x=0", "negative transfer", "unparsed replies"]
    if repaired:
        cols += ["R mean score", "R vs x=0", "R repaired replies"]
    for col in cols:
        cps.add_column(col, justify="left" if col == "model" else "right", no_wrap=True)
    gains = {g.x: g for g in splits(report)}
    for row in report.rows:
        cells = [str(row.epoch), "-" if row.step is None else str(row.step), safe_markup(row.model), _fmt(row.mean),
                 _fmt(row.delta), "[red]yes[/]" if row.negative else "", _share(row.unparsed, row.replies)]
        if repaired:
            r = row.repair
            cells += [_fmt(r.mean if r else None), _fmt(r.delta if r else None),
                      _share(r.repaired, r.steps) if r else "—"]
        cps.add_row(*cells)
    console.print(cps)
    if constrained:
        split = Table(title="against the base served the same way: format gain (parsed replies) and play gain "
                            "(under the grammar, G)")
        for col in ("x", "parsed replies", "format gain", "G mean score", "G vs x=0 (play gain)", "gain"):
            split.add_column(col, justify="left" if col == "gain" else "right", no_wrap=True)
        for row in report.rows:
            g, gain = row.grammar, gains.get(row.epoch)
            share = "—" if row.parsed_share is None else f"{100 * row.parsed_share:.0f}%"
            fmt_gain = "—" if gain is None or gain.format_gain is None else f"{100 * gain.format_gain:+.0f} pp"
            verdict = gain.verdict if gain else ""
            split.add_row(str(row.epoch), share, fmt_gain, _fmt(g.mean if g else None), _fmt(g.delta if g else None),
                          f"[yellow]{verdict}[/]" if verdict == "format gain" else verdict)
        console.print(split)
    console.print(f"[dim]{safe_markup(baseline_text(report))}[/]", soft_wrap=True)
    line = outcome_line(report)
    if line:
        style = "yellow" if line.startswith(("format gain", "no gain")) else "green"
        console.print(f"[{style}]{safe_markup(line)}[/]", soft_wrap=True)
    if repaired:
        console.print(f"[dim]R = run {safe_markup(report.repair_run.id)}: replies breaking the answer format were "
                      f"regenerated under the game's grammar (--repair); each repair is stored with its step[/]",
                      soft_wrap=True)
    legacy = [row for row in report.rows if row.legacy_repaired]
    if legacy and not repaired:
        console.print(f"[yellow]an older s3gym repaired replies of this evaluation without keeping them[/] "
                      f"({', '.join(f'x={r.epoch}: {r.legacy_repaired}' for r in legacy)}): these means mix "
                      f"written and repaired replies", soft_wrap=True)
    if report.serving:
        line = f"[dim]every checkpoint, x = 0 (the base model) included, served by {safe_markup(report.serving)}[/]"
        if report.source_x0 is not None:
            mean, path = report.source_x0
            same = path == report.serving
            line += (f"; the source run {safe_markup(t.source_run or '')} scored x = 0 {_fmt(mean)} served by "
                     f"{safe_markup(path)}" + ("" if same else ", [yellow]another serving path[/] (and its own "
                                               "settings): the two x = 0 figures are not interchangeable"))
        console.print(line, soft_wrap=True)
    c = report.curve
    metrics = Table(title=f"{t.method} training {safe_markup(t.id)}" + (f" · reward {t.reward}" if t.reward else ""))
    for col in ("figures", "Avg", "Max", "final delta", "AUC+", "NABA", "loss first -> last", "train s", "examples/s",
                "tokens/s", "peak RSS MB"):
        metrics.add_column(col, justify="left" if col == "figures" else "right", no_wrap=True)
    losses = report.losses
    loss = f"{losses[0].loss:.3f} -> {losses[-1].loss:.3f}" if losses else "-"
    m = t.metrics
    metrics.add_row("as written", _fmt(c.avg), _fmt(c.max), _fmt(c.final_delta), _fmt(c.auc_plus), _fmt(c.naba), loss,
                    f"{t.train_seconds:.0f}", _fmt(m.get("examples_per_s"), 2), _fmt(m.get("tokens_per_s"), 1),
                    _fmt(m.get("peak_rss_mb"), 0))
    if report.repaired_curve is not None:
        r = report.repaired_curve
        metrics.add_row("R repaired", _fmt(r.avg), _fmt(r.max), _fmt(r.final_delta), _fmt(r.auc_plus), _fmt(r.naba),
                        "", "", "", "", "")
    console.print(metrics)
    scope = rss_scope(m)
    if scope is not None:
        console.print(f"[dim]peak RSS MB: {SCOPE_LABELS[scope]}[/]", soft_wrap=True)
    stops = [p for p in m.get("parts", []) if p.get("interrupted")]
    if stops:
        where = ", ".join(f"{p.get('phase')} after update {p.get('updates')}" for p in stops)
        console.print(f"[yellow]interrupted {len(stops)} time(s)[/] ({safe_markup(where)}) and resumed: train s, "
                      f"examples/s and tokens/s cover every part", soft_wrap=True)
    if report.negative_transfer:
        console.print(f"[red]negative transfer[/] at checkpoint(s) {', '.join(map(str, report.negative_transfer))}: "
                      f"below the base model (x = 0)")
    for summary in signal_summaries(losses):
        print_signal(console, summary)


def print_signal(console: Console, summary) -> None:
    """The after-training line: how many updates had no learning signal, with the mean figures."""
    figures = [f"{label} {value:.3g}" for label, value in (
        ("zero-variance groups", summary.zero_variance_share), ("parsed replies", summary.parsed_share),
        ("reward std", summary.reward_std), ("grad norm", summary.grad_norm), ("KL", summary.kl))
        if value is not None]
    style = "yellow" if summary.no_signal else "green"
    text = f"[{style}]{summary.line}[/]" + (f" (means: {', '.join(figures)})" if figures else "")
    if summary.verdict:
        text += f": [yellow]{summary.verdict}[/]"
    console.print(text, soft_wrap=True)


def print_outcome(console: Console, outcome: TrainingOutcome) -> None:
    if outcome.build is not None:
        print_dataset(console, outcome.build, outcome.exported)
    print_report(console, outcome.report)
