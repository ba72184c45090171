"""Strict-mode evaluation of a training's checkpoints (epoch 0 = the base model): no history, no
memory, the source run's evaluation seeds; stored as a training run with the usual curve metrics."""

from __future__ import annotations

import secrets
from dataclasses import dataclass
from typing import Optional

from s3gym_tui.engine.events import CheckpointScored, EventSink, ignore
from s3gym_tui.engine.experience import ExperienceState
from s3gym_tui.engine.llm import CallSettings
from s3gym_tui.engine.metrics import CurveMetrics, game_curve_metrics
from s3gym_tui.engine.runner import eval_episode_id
from s3gym_tui.engine.session import EpisodeSession
from s3gym_tui.models import Checkpoint, Episode, Run, RunConfig
from s3gym_tui.training.runs import TrainingInfo, note_for, training_info

TRAINED_TIMEOUT_S = 600.0  # a CPU-served model on a busy machine can take a while per reply
NEGATIVE_TOLERANCE = 1e-9


def new_training_id(game: str) -> str:
    return f"{game}-trained-{secrets.token_hex(4)}"


def create_training_run(store, source: Run, info: TrainingInfo, eval_episodes: Optional[int] = None,
                        step_cap: Optional[int] = None, run_id: Optional[str] = None) -> Run:
    """A Run (pathway 'trained') whose checkpoints x are the epochs in `info.checkpoints`."""
    cfg = source.config
    epochs = sorted(info.checkpoints)
    last = epochs[-1] if epochs else 0
    every = 1 if epochs == list(range(last + 1)) else max(last, 1)  # remote: just the base and the end
    config = RunConfig(
        model=info.checkpoints.get(last, cfg.model), game=cfg.game, pathway="trained", explore_episodes=last,
        eval_every=every, eval_episodes=cfg.eval_episodes if eval_episodes is None else eval_episodes,
        explore_seed_base=cfg.explore_seed_base, eval_seed_base=cfg.eval_seed_base, history_budget=0,
        max_tokens=cfg.max_tokens, temperature=cfg.temperature, decoding_seed=cfg.decoding_seed,
        step_cap=step_cap or cfg.step_cap, timeout_s=max(cfg.timeout_s, TRAINED_TIMEOUT_S),
        max_retries=cfg.max_retries)
    return store.create_run(config, run_id=run_id, note=note_for(info))


async def evaluate_training(store, run: Run, on_event: EventSink = ignore,
                            backoff_base_s: float = 0.5) -> list[Checkpoint]:
    """Play every checkpoint's evaluation episodes (resumable: finished ones are kept) and store them."""
    info = training_info(run)
    if info is None:
        raise ValueError(f"run {run.id!r} is not a training run")
    cfg = run.config
    done = {c.x: c for c in store.checkpoints(run.id)}
    store.set_run_status(run.id, "running")
    scored: list[Checkpoint] = []
    try:
        for x in cfg.checkpoints():
            model = info.checkpoints.get(x)
            if model is None:
                continue
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
    epoch: int
    model: str
    mean: Optional[float]
    scores: tuple[float, ...]
    delta: Optional[float]  # mean - epoch 0 mean
    negative: bool  # below epoch 0: negative transfer
    repaired: Optional[int] = None  # replies regenerated under the answer grammar (local serving)


@dataclass(frozen=True)
class TrainingReport:
    run: Run
    info: TrainingInfo
    rows: tuple[CheckpointRow, ...]
    curve: CurveMetrics  # Avg, Max, AUC+, NABA, final delta over epochs
    negative_transfer: tuple[int, ...]  # epochs whose mean is below epoch 0's


def training_report(store, run: Run) -> TrainingReport:
    info = training_info(run)
    if info is None:
        raise ValueError(f"run {run.id!r} is not a training run")
    by_x = {c.x: c for c in store.checkpoints(run.id)}
    xs = [x for x in run.config.checkpoints() if x in info.checkpoints]
    points = [(x, by_x[x].mean if x in by_x else None) for x in xs]
    curve = game_curve_metrics(points, run.config.game, "eval")
    y0 = curve.y0
    rows = []
    for x, y in points:
        negative = x > 0 and y is not None and y0 is not None and y < y0 - NEGATIVE_TOLERANCE
        rows.append(CheckpointRow(x, info.checkpoints[x], y, by_x[x].scores if x in by_x else (),
                                  None if y is None or y0 is None else y - y0, negative,
                                  info.repairs.get(x) if info.repairs else None))
    return TrainingReport(run, info, tuple(rows), curve, tuple(r.epoch for r in rows if r.negative))


def record_repairs(store, run: Run, repairs: dict[int, int]) -> Run:
    """Store how many replies per checkpoint were repaired under the answer grammar."""
    info = training_info(run)
    if info is None:
        return run
    return store.set_run_note(run.id, note_for(info.model_copy(update={"repairs": dict(repairs)})))
