"""Strict-mode evaluation of a training's checkpoints (x = 0: the base model): no history, no memory,
the evaluation seeds of a template run; each evaluation is an ordinary run (pathway 'trained') linked to
the training, with the usual curve metrics and negative transfer flagged against x = 0."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from s3gym_tui.engine.events import CheckpointScored, EventSink, ignore
from s3gym_tui.engine.experience import ExperienceState
from s3gym_tui.engine.llm import CallSettings
from s3gym_tui.engine.metrics import CurveMetrics, game_curve_metrics
from s3gym_tui.engine.runner import eval_episode_id
from s3gym_tui.engine.session import EpisodeSession
from s3gym_tui.models import Checkpoint, Episode, Run, RunConfig
from s3gym_tui.store import LossPoint, Training, TrainingCheckpoint

TRAINED_TIMEOUT_S = 600.0  # a CPU-served model on a busy machine can take a while per reply
NEGATIVE_TOLERANCE = 1e-9


class NotATrainingRun(ValueError):
    """The run is not the evaluation run of a training."""


def create_eval_run(store, training: Training, template: RunConfig, xs: Sequence[int], *,
                    game: Optional[str] = None, eval_episodes: Optional[int] = None,
                    step_cap: Optional[int] = None, run_id: Optional[str] = None) -> Run:
    """A Run (pathway 'trained') playing checkpoints `xs` of the training on `game` (default: the
    template's), on the template's evaluation seeds and decoding settings; linked to the training."""
    models = {c.x: c.model for c in store.training_checkpoints(training.id)}
    xs = sorted(set(int(x) for x in xs))
    missing = [x for x in xs if x not in models]
    if not xs or missing:
        raise ValueError(f"training {training.id!r} has no checkpoint {missing[0] if missing else '(none asked)'}")
    last = xs[-1]
    every = max(last, 1) if xs in ([0, last], [last]) else 1
    config = RunConfig(
        model=models[last], game=game or template.game, pathway="trained", explore_episodes=last, eval_every=every,
        eval_episodes=template.eval_episodes if eval_episodes is None else eval_episodes,
        explore_seed_base=template.explore_seed_base, eval_seed_base=template.eval_seed_base, history_budget=0,
        max_tokens=template.max_tokens, temperature=template.temperature, decoding_seed=template.decoding_seed,
        step_cap=step_cap or template.step_cap, timeout_s=max(template.timeout_s, TRAINED_TIMEOUT_S),
        max_retries=template.max_retries)
    run = store.create_run(config, run_id=run_id)
    store.add_training_eval(training.id, config.game, run.id, xs)
    return run


def _link(store, run: Run) -> tuple[Training, str, tuple[int, ...]]:
    link = store.training_of_run(run.id)
    if link is None:
        raise NotATrainingRun(f"run {run.id!r} is not the evaluation run of a training")
    return link


def played_checkpoints(store, run: Run) -> dict[int, str]:
    """x -> model string for every checkpoint the evaluation run plays."""
    training, _, xs = _link(store, run)
    models = {c.x: c.model for c in store.training_checkpoints(training.id)}
    return {x: models[x] for x in run.config.checkpoints() if x in models and (not xs or x in xs)}


async def evaluate_training(store, run: Run, on_event: EventSink = ignore,
                            backoff_base_s: float = 0.5) -> list[Checkpoint]:
    """Play every checkpoint's evaluation episodes (resumable: finished ones are kept) and store them."""
    models = played_checkpoints(store, run)
    cfg = run.config
    done = {c.x: c for c in store.checkpoints(run.id)}
    store.set_run_status(run.id, "running")
    scored: list[Checkpoint] = []
    try:
        for x, model in models.items():
            if x in done:
                scored.append(done[x])
                continue
            settings = CallSettings(model=model, temperature=cfg.temperature, max_tokens=cfg.max_tokens,
                                    seed=cfg.decoding_seed, timeout_s=cfg.timeout_s, max_retries=cfg.max_retries,
                                    backoff_base_s=backoff_base_s)
            episodes = []
            for j in range(cfg.eval_episodes):
                episode = Episode(id=eval_episode_id(run.id, x, j), run_id=run.id, game=cfg.game, mode="eval",
                                  phase="eval", seed=cfg.eval_seed(j), index=j, checkpoint=x, model=model,
                                  pathway="trained")
                existing = store.find_episode(episode.id)
                if existing is not None and existing.status == "finished":
                    episodes.append(existing)
                    continue
                session = EpisodeSession(store, existing or episode, settings, ExperienceState(x, "trained"),
                                         on_event, oracle=False, step_cap=cfg.step_cap)
                episodes.append(session.finish("finished") if session.done else await session.play())
            checkpoint = Checkpoint(run_id=run.id, x=x, episode_ids=tuple(e.id for e in episodes),
                                    scores=tuple(float(e.score or 0.0) for e in episodes))
            store.add_checkpoint(checkpoint)
            on_event(CheckpointScored(checkpoint))
            scored.append(checkpoint)
    except BaseException:
        store.set_run_status(run.id, "stopped")
        raise
    store.set_run_status(run.id, "finished")
    return scored


@dataclass(frozen=True)
class CheckpointRow:
    epoch: int  # checkpoint x (epochs for SFT, saved checkpoints for GRPO)
    model: str
    mean: Optional[float]
    scores: tuple[float, ...]
    delta: Optional[float]  # mean - x = 0 mean
    negative: bool  # below x = 0: negative transfer
    repaired: Optional[int] = None  # replies regenerated under the answer grammar (local serving)
    step: Optional[int] = None  # optimizer steps behind the checkpoint


@dataclass(frozen=True)
class TrainingReport:
    run: Run
    training: Training
    game: str
    rows: tuple[CheckpointRow, ...]
    curve: CurveMetrics  # Avg, Max, AUC+, NABA, final delta over checkpoints
    negative_transfer: tuple[int, ...]  # checkpoints whose mean is below x = 0's
    losses: tuple[LossPoint, ...] = ()


def training_report(store, run: Run) -> TrainingReport:
    training, game, _ = _link(store, run)
    cps: dict[int, TrainingCheckpoint] = {c.x: c for c in store.training_checkpoints(training.id)}
    models = played_checkpoints(store, run)
    by_x = {c.x: c for c in store.checkpoints(run.id)}
    points = [(x, by_x[x].mean if x in by_x else None) for x in models]
    curve = game_curve_metrics(points, run.config.game, "eval")
    y0 = by_x[0].mean if 0 in by_x else None
    rows = []
    for x, y in points:
        negative = x > 0 and y is not None and y0 is not None and y < y0 - NEGATIVE_TOLERANCE
        rows.append(CheckpointRow(x, models[x], y, by_x[x].scores if x in by_x else (),
                                  None if y is None or y0 is None else y - y0, negative,
                                  cps[x].repaired, cps[x].step))
    return TrainingReport(run, training, game, tuple(rows), curve, tuple(r.epoch for r in rows if r.negative),
                          tuple(store.losses(training.id)))


def record_repairs(store, training_id: str, repairs: dict[int, int]) -> None:
    """Add the replies repaired under the answer grammar, per checkpoint, to the stored counts."""
    for cp in store.training_checkpoints(training_id):
        if cp.x in repairs:
            store.set_training_checkpoint(cp.model_copy(update={"repaired": (cp.repaired or 0) + int(repairs[cp.x])}))
