"""Strict-mode evaluation of a training's checkpoints (x = 0: the base model): no history, no memory,
the evaluation seeds of a template run; each evaluation is an ordinary run (pathway 'trained') linked to
the training, with the usual curve metrics and negative transfer flagged against x = 0."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional, Sequence

from s3gym_tui.engine.events import CheckpointScored, EventSink, ignore
from s3gym_tui.engine.experience import ExperienceState
from s3gym_tui.engine.llm import CallSettings
from s3gym_tui.engine.metrics import CurveMetrics, game_curve_metrics
from s3gym_tui.engine.runner import eval_episode_id
from s3gym_tui.engine.session import EpisodeSession
from s3gym_tui.models import Checkpoint, Episode, Run, RunConfig
from s3gym_tui.engine.contract import count_unparsed
from s3gym_tui.store import LossPoint, Training, TrainingCheckpoint
from s3gym_tui.training.runs import decoded_model, run_decoding, serving_path

if TYPE_CHECKING:
    from s3gym_tui.store.checkpoints import Checkpoints
    from s3gym_tui.store.episodes import Episodes
    from s3gym_tui.store.runs import Runs
    from s3gym_tui.store.trainings import Trainings

TRAINED_TIMEOUT_S = 600.0  # a CPU-served model on a busy machine can take a while per reply
NEGATIVE_TOLERANCE = 1e-9


class NotATrainingRun(ValueError):
    """The run is not the evaluation run of a training."""


def create_eval_run(store, training: Training, template: RunConfig, xs: Sequence[int], *,
                    game: Optional[str] = None, eval_episodes: Optional[int] = None,
                    step_cap: Optional[int] = None, run_id: Optional[str] = None, repair: bool = False,
                    decoding: str = "free") -> Run:
    """A Run (pathway 'trained') playing checkpoints `xs` of the training on `game` (default: the
    template's), on the template's evaluation seeds and decoding settings; linked to the training.
    `decoding` (runs.DECODINGS; `repair=True` is 'repair'): 'grammar' serves every checkpoint, the base
    included, with its action replies constrained to the game's grammar from the first token (model
    .../grammar: the baseline of a format gain); 'repair' regenerates the replies that break the answer
    contract (model .../repair; every repair is stored with its step); each a run of its own next to
    the run that scores the replies as written."""
    decoding = "repair" if repair else decoding
    models = {c.x: decoded_model(c.model, decoding) for c in store.trainings.training_checkpoints(training.id)}
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
    run = store.runs.create_run(config, run_id=run_id)
    store.trainings.add_training_eval(training.id, config.game, run.id, xs)
    return run


def eval_runs(trainings: Trainings, runs: Runs, training: Training) -> list[tuple[str, Run, tuple[int, ...]]]:
    """(game, run, checkpoints it plays) of each evaluation run of the training, oldest first."""
    from s3gym_tui.store import StoreError

    found = []
    for game, run_id, xs in trainings.training_evals(training.id):
        try:
            found.append((game, runs.get_run(run_id), xs))
        except StoreError:  # removed with `s3gym rm` meanwhile: the training keeps its checkpoints
            continue
    return found


def own_eval_run(trainings: Trainings, runs: Runs, training: Training, repair: bool = False,
                 decoding: Optional[str] = None) -> Optional[Run]:
    """The first evaluation run of the training on its own (first) game, if there is one: the one
    scoring replies as the model wrote them, or the one decoding them as `decoding` (repair=True: 'repair')."""
    wanted = decoding or ("repair" if repair else "free")
    for game, run, _ in eval_runs(trainings, runs, training):
        if (not training.games or game == training.games[0]) and run_decoding(run) == wanted:
            return run
    return None


def decoding_twin(trainings: Trainings, runs: Runs, run: Run, decoding: str) -> Optional[Run]:
    """The evaluation run of the same training, game and checkpoints as `run` decoded as `decoding`, if any."""
    link = trainings.training_of_run(run.id)
    if link is None:
        return None
    training, game, xs = link
    for other_game, other, other_xs in eval_runs(trainings, runs, training):
        if other.id != run.id and other_game == game and other_xs == xs and run_decoding(other) == decoding:
            return other
    return None


def repair_twin(trainings: Trainings, runs: Runs, run: Run) -> Optional[Run]:
    """The repairing evaluation run of the same training, game and checkpoints as `run`, if any."""
    return decoding_twin(trainings, runs, run, "repair")


def _link(trainings: Trainings, run: Run) -> tuple[Training, str, tuple[int, ...]]:
    link = trainings.training_of_run(run.id)
    if link is None:
        raise NotATrainingRun(f"run {run.id!r} is not the evaluation run of a training")
    return link


def played_checkpoints(trainings: Trainings, run: Run) -> dict[int, str]:
    """x -> model string for every checkpoint the evaluation run plays."""
    training, _, xs = _link(trainings, run)
    decoding = run_decoding(run)
    models = {c.x: decoded_model(c.model, decoding) if decoding != "free" else c.model
              for c in trainings.training_checkpoints(training.id)}
    return {x: models[x] for x in run.config.checkpoints() if x in models and (not xs or x in xs)}


async def evaluate_training(store, run: Run, on_event: EventSink = ignore,
                            backoff_base_s: float = 0.5) -> list[Checkpoint]:
    """Play every checkpoint's evaluation episodes (resumable: finished ones are kept) and store them,
    holding the run's lease like any run (`s3gym runs` and Home show who drives it)."""
    from s3gym_tui.engine.lease import holding

    models = played_checkpoints(store.trainings, run)
    # RunBusy if another process drives it
    with holding(store, store.leases.acquire_lease(run.id, "s3gym train (evaluation)")):
        return await _evaluate(store, run, models, on_event, backoff_base_s)


async def _evaluate(store, run: Run, models: dict[int, str], on_event: EventSink,
                    backoff_base_s: float) -> list[Checkpoint]:
    cfg = run.config
    done = {c.x: c for c in store.checkpoints.list(run.id)}
    store.runs.set_run_status(run.id, "running")
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
                existing = store.episodes.find_episode(episode.id)
                if existing is not None and existing.status == "finished":
                    episodes.append(existing)
                    continue
                session = EpisodeSession(store, existing or episode, settings, ExperienceState(x, "trained"),
                                         on_event, oracle=False, step_cap=cfg.step_cap)
                episodes.append(session.finish("finished") if session.done else await session.play())
            checkpoint = Checkpoint(run_id=run.id, x=x, episode_ids=tuple(e.id for e in episodes),
                                    scores=tuple(float(e.score or 0.0) for e in episodes))
            store.checkpoints.add_checkpoint(checkpoint)
            on_event(CheckpointScored(checkpoint))
            scored.append(checkpoint)
    except BaseException:
        store.runs.set_run_status(run.id, "stopped")
        raise
    store.runs.set_run_status(run.id, "finished")
    return scored


@dataclass(frozen=True)
class RepairedFigures:
    """A checkpoint's figures when replies breaking the answer contract were repaired (its own
    evaluation run, asked for with --repair): never mixed with the figures of the replies as written."""

    mean: Optional[float]
    scores: tuple[float, ...]
    delta: Optional[float]  # repaired mean - x = 0's repaired mean
    repaired: int  # steps whose reply was repaired (read from the store)
    steps: int  # steps played


@dataclass(frozen=True)
class ConstrainedFigures:
    """A checkpoint's figures when every action reply was constrained to the game's grammar from its first
    token (its own evaluation run, model .../grammar): compared with the base under the same constraint."""

    mean: Optional[float]
    scores: tuple[float, ...]
    delta: Optional[float]  # constrained mean - x = 0's constrained mean: what play gained (baseline.py)


@dataclass(frozen=True)
class CheckpointRow:
    epoch: int  # checkpoint x (epochs for SFT, saved checkpoints for GRPO)
    model: str
    mean: Optional[float]  # the replies as the model wrote them
    scores: tuple[float, ...]
    delta: Optional[float]  # mean - x = 0 mean
    negative: bool  # below x = 0: negative transfer
    step: Optional[int] = None  # optimizer steps behind the checkpoint
    unparsed: Optional[int] = None  # replies (as written) without a parsable answer
    replies: Optional[int] = None  # replies played
    repair: Optional[RepairedFigures] = None  # only when the evaluation was also run with --repair
    legacy_repaired: Optional[int] = None  # a count an older s3gym kept for this checkpoint (mixed figures)
    grammar: Optional[ConstrainedFigures] = None  # only when the evaluation was also run under the grammar

    @property
    def parsed_share(self) -> Optional[float]:
        """The share of replies (as written) with a parsable answer, None without replies."""
        if not self.replies or self.unparsed is None:
            return None
        return (self.replies - self.unparsed) / self.replies


@dataclass(frozen=True)
class TrainingReport:
    run: Run
    training: Training
    game: str
    rows: tuple[CheckpointRow, ...]
    curve: CurveMetrics  # Avg, Max, AUC+, NABA, final delta over checkpoints (replies as written)
    negative_transfer: tuple[int, ...]  # checkpoints whose mean is below x = 0's
    losses: tuple[LossPoint, ...] = ()
    repair_run: Optional[Run] = None  # the repairing twin of `run`, when there is one
    repaired_curve: Optional[CurveMetrics] = None
    serving: str = ""  # how the checkpoints were served (the base x = 0 included)
    # the source run's own x = 0 on this game: (its mean, how its model was served), when it has one
    source_x0: Optional[tuple[Optional[float], str]] = None
    grammar_run: Optional[Run] = None  # the twin of `run` constrained to the grammar, when there is one
    grammar_curve: Optional[CurveMetrics] = None


def _means(checkpoints: Checkpoints, run: Run, models: dict[int, str]) -> dict[int, Checkpoint]:
    return {c.x: c for c in checkpoints.list(run.id) if c.x in models}


def _unparsed(episodes: Episodes, run: Run) -> dict[int, tuple[int, int]]:
    """x -> (replies without a parsable answer, replies) over the run's evaluation episodes."""
    found: dict[int, tuple[int, int]] = {}
    for episode in episodes.list(run.id, phase="eval"):
        bad, total = count_unparsed(episodes.steps(episode.id, include_prompt=False))
        old = found.get(episode.checkpoint, (0, 0))
        found[episode.checkpoint] = (old[0] + bad, old[1] + total)
    return found


def training_report(store, run: Run) -> TrainingReport:
    trainings, runs, checkpoints = store.trainings, store.runs, store.checkpoints
    training, game, _ = _link(trainings, run)
    if run_decoding(run) != "free":
        done = {"repair": "repaired its replies", "grammar": "constrained its replies to the grammar"}[run_decoding(run)]
        raise NotATrainingRun(f"run {run.id!r} {done}: its report is part of the report of the run that scored "
                              f"them as written")
    cps: dict[int, TrainingCheckpoint] = {c.x: c for c in trainings.training_checkpoints(training.id)}
    models = played_checkpoints(trainings, run)
    by_x = _means(checkpoints, run, models)
    points = [(x, by_x[x].mean if x in by_x else None) for x in models]
    curve = game_curve_metrics(points, run.config.game, "eval")
    y0 = by_x[0].mean if 0 in by_x else None
    unparsed = _unparsed(store.episodes, run)
    twin = repair_twin(trainings, runs, run)
    fixed, counts, repaired_curve = {}, {}, None
    if twin is not None:
        twin_models = played_checkpoints(trainings, twin)
        fixed = _means(checkpoints, twin, twin_models)
        counts = trainings.repair_counts(twin.id)
        repaired_curve = game_curve_metrics([(x, fixed[x].mean if x in fixed else None) for x in twin_models],
                                            run.config.game, "eval")
    r0 = fixed[0].mean if 0 in fixed else None
    constrained_run = decoding_twin(trainings, runs, run, "grammar")
    constrained, grammar_curve = {}, None
    if constrained_run is not None:
        constrained_models = played_checkpoints(trainings, constrained_run)
        constrained = _means(checkpoints, constrained_run, constrained_models)
        grammar_curve = game_curve_metrics([(x, constrained[x].mean if x in constrained else None)
                                            for x in constrained_models], run.config.game, "eval")
    g0 = constrained[0].mean if 0 in constrained else None
    rows = []
    for x, y in points:
        negative = x > 0 and y is not None and y0 is not None and y < y0 - NEGATIVE_TOLERANCE
        repair = None
        if twin is not None:
            ry = fixed[x].mean if x in fixed else None
            repaired, steps = counts.get(x, (0, 0))
            repair = RepairedFigures(ry, fixed[x].scores if x in fixed else (),
                                     None if ry is None or r0 is None else ry - r0, repaired, steps)
        grammar = None
        if constrained_run is not None:
            gy = constrained[x].mean if x in constrained else None
            grammar = ConstrainedFigures(gy, constrained[x].scores if x in constrained else (),
                                         None if gy is None or g0 is None else gy - g0)
        bad, total = unparsed.get(x, (None, None))
        rows.append(CheckpointRow(x, models[x], y, by_x[x].scores if x in by_x else (),
                                  None if y is None or y0 is None else y - y0, negative,
                                  cps[x].step, bad, total, repair, cps[x].repaired, grammar))
    paths = sorted({serving_path(m) for m in models.values()})
    return TrainingReport(run, training, game, tuple(rows), curve, tuple(r.epoch for r in rows if r.negative),
                          tuple(trainings.losses(training.id)), twin, repaired_curve, "; ".join(paths),
                          _source_x0(runs, checkpoints, training, game), constrained_run, grammar_curve)


def _source_x0(runs: Runs, checkpoints: Checkpoints, training: Training,
               game: str) -> Optional[tuple[Optional[float], str]]:
    from s3gym_tui.store import StoreError

    if not training.source_run:
        return None
    try:
        source = runs.get_run(training.source_run)
    except StoreError:
        return None
    if source.config.game != game:
        return None
    found = {c.x: c for c in checkpoints.list(source.id)}
    return (found[0].mean if 0 in found else None), serving_path(source.config.model)
