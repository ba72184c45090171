"""Per-run and cross-run reports computed from the store (the UI and CLI only render these).

Reports of several runs share one NMAE scale per game (`on_game_scales`): every NMAE of a game (by
phase, per run, pooled, per coupling block) is normalised by the bounds of s and r over all the
self-scored steps of that game's runs in the set, both phases (engine.judging)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Optional, Sequence

from s3gym_tui.engine.judging import (CouplingReport, JudgingReport, Scale, count_out_of_range, coupling,
                                      game_range_width, judging_report, scale_of)
from s3gym_tui.engine.metrics import CurveMetrics, DeltaNabaRow, delta_naba_table, game_curve_metrics
from s3gym_tui.models import Run

StepPair = tuple[Optional[float], float]  # (self-score s, verifier reward r)


@dataclass(frozen=True)
class Usage:
    """What a run's model calls used: steps and summaries (cost None where the price is unknown)."""

    calls: int = 0
    tokens_in: int = 0
    tokens_out: int = 0
    cost: float = 0.0  # over the calls whose price is known
    unpriced: int = 0  # calls without a known price
    tokens_cached: int = 0  # input tokens read from the provider's prompt cache, over the calls that say
    cache_calls: int = 0  # calls whose provider said how many input tokens it read from its cache
    cache_tokens_in: int = 0  # the input tokens of those calls

    def plus(self, tokens_in: int, tokens_out: int, cost: Optional[float],
             tokens_cached: Optional[int] = None) -> "Usage":
        """This usage and one more call (a step's or a summary's)."""
        known = tokens_cached is not None
        return Usage(self.calls + 1, self.tokens_in + tokens_in, self.tokens_out + tokens_out,
                     self.cost + (cost or 0.0), self.unpriced + (cost is None),
                     self.tokens_cached + (tokens_cached or 0), self.cache_calls + known,
                     self.cache_tokens_in + (tokens_in if known else 0))

    @property
    def cache_share(self) -> Optional[float]:
        """The share of input tokens read from the prompt cache, over the calls whose provider said
        (None: no call's provider did, or they had no input tokens)."""
        return self.tokens_cached / self.cache_tokens_in if self.cache_tokens_in else None


@dataclass(frozen=True)
class ReplicaFaults:
    """What the replicas of a run's model did wrong (from the steps' fault column, engine.llm)."""

    failures: int = 0  # a replica failed a call (the fault names the kind and the replica)
    failovers: int = 0  # calls another replica answered after one failed

    def plus(self, fault: Optional[str]) -> "ReplicaFaults":
        parts = (fault or "").split("; ")
        return ReplicaFaults(self.failures + sum("(replica" in p for p in parts),
                             self.failovers + sum(p.startswith("failover") for p in parts))


@dataclass(frozen=True)
class RunReport:
    run: Run
    points: tuple[tuple[int, Optional[float]], ...]  # (x, mean eval score) per checkpoint; None = missing
    curve: CurveMetrics
    judging: JudgingReport  # over the run's exploration steps
    judging_eval: JudgingReport  # over its evaluation steps (reported, never fed back)
    coupling: CouplingReport
    explore_scores: tuple[float, ...]
    judging_all: Optional[JudgingReport] = None  # over all its steps, both phases
    explore_pairs: tuple[tuple[int, Optional[float], float], ...] = ()  # (episode index, s, r)
    eval_pairs: tuple[StepPair, ...] = ()
    usage: Usage = Usage()
    episodes_done: int = 0  # finished episodes, both phases
    episodes_total: int = 0  # what the protocol plays (explore + eval at every checkpoint)
    scale: Optional[Scale] = None  # the NMAE scale of its game (over the runs reported with it)
    replicas: ReplicaFaults = ReplicaFaults()

    def judged_on(self, scale: Scale) -> "RunReport":
        """This report with every NMAE (and the coupling) normalised by `scale`."""
        explore = [(s, r) for _, s, r in self.explore_pairs]
        every, exploration, evaluation = phase_judging(self.run.config.game, explore, self.eval_pairs, scale)
        width = game_range_width(self.run.config.game, "eval")
        return replace(self, scale=scale, judging=exploration, judging_eval=evaluation, judging_all=every,
                       coupling=coupling(self.points, self.explore_pairs, width, scale=scale))


def phase_judging(game: str, explore: Sequence[StepPair], evaluation: Sequence[StepPair],
                  scale: Optional[Scale]) -> tuple[JudgingReport, JudgingReport, JudgingReport]:
    """The judging of all of a game's steps, of its exploration steps and of its evaluation steps, on
    one NMAE scale; each self-score checked against what a step of its phase's mode can pay (an
    episode's mode is its phase)."""
    outside_explore = count_out_of_range(game, "explore", explore)
    outside_eval = count_out_of_range(game, "eval", evaluation)
    return (judging_report(list(explore) + list(evaluation), scale=scale,
                           out_of_range=outside_explore + outside_eval),
            judging_report(explore, scale=scale, out_of_range=outside_explore),
            judging_report(evaluation, scale=scale, out_of_range=outside_eval))


def game_scales(reports: Sequence[RunReport]) -> dict[str, Scale]:
    """Per game, the bounds of s and r over every self-scored step of its runs here (both phases)."""
    pairs: dict[str, list[StepPair]] = {}
    for report in reports:
        pool = pairs.setdefault(report.run.config.game, [])
        pool.extend((s, r) for _, s, r in report.explore_pairs)
        pool.extend(report.eval_pairs)
    return {game: scale_of(p) for game, p in pairs.items()}


def on_game_scales(reports: Sequence[RunReport]) -> list[RunReport]:
    """The reports with every NMAE on one scale per game (see the module doc)."""
    scales = game_scales(reports)
    return [r if r.scale == scales[r.run.config.game] else r.judged_on(scales[r.run.config.game])
            for r in reports]


def run_report(store, run: Run) -> RunReport:
    config = run.config
    by_x = {c.x: c.mean for c in store.checkpoints.list(run.id)}
    points = tuple((x, by_x.get(x)) for x in config.checkpoints())
    curve = game_curve_metrics(points, config.game, "eval")
    explore_steps: list[tuple[int, Optional[float], float]] = []
    explore_scores: list[float] = []
    eval_pairs: list[StepPair] = []
    usage, done, replicas = Usage(), 0, ReplicaFaults()
    for episode in store.episodes.list(run.id):
        done += episode.status == "finished"
        steps = store.episodes.steps(episode.id, include_prompt=False)  # prompts are not needed here
        for s in steps:
            if s.actor == "model":
                usage = usage.plus(s.tokens_in, s.tokens_out, s.cost, s.tokens_cached)
            if s.fault:
                replicas = replicas.plus(s.fault)
        if episode.phase == "explore":
            explore_steps.extend((episode.index, s.self_score, s.reward) for s in steps)
            if episode.score is not None:
                explore_scores.append(episode.score)
        else:
            eval_pairs.extend((s.self_score, s.reward) for s in steps)
    for summary in store.summaries.list(run.id):
        if summary.author.startswith("model"):
            usage = usage.plus(summary.tokens_in, summary.tokens_out, summary.cost)
    explore_pairs = [(s, r) for _, s, r in explore_steps]
    scale = scale_of(explore_pairs + eval_pairs)  # the run alone: its own steps are the game's
    width = game_range_width(config.game, "eval")
    couple = coupling([(x, y) for x, y in points], explore_steps, width, scale=scale)
    total = config.explore_episodes + len(config.checkpoints()) * config.eval_episodes
    every, exploration, evaluation = phase_judging(config.game, explore_pairs, eval_pairs, scale)
    return RunReport(run, points, curve, exploration, evaluation, couple, tuple(explore_scores), every,
                     tuple(explore_steps), tuple(eval_pairs), usage, done, total, scale, replicas)


def summary_vs_history(reports: Sequence[RunReport]) -> list[DeltaNabaRow]:
    """Delta NABA rows pairing Summary and History runs of the same model and game (latest of each)."""
    latest: dict[tuple[str, str, str], RunReport] = {}
    for report in reports:
        cfg = report.run.config
        latest[(cfg.game, cfg.model, cfg.pathway)] = report
    pairs = []
    for (game, model, pathway), report in latest.items():
        if pathway != "summary":
            continue
        other = latest.get((game, model, "history"))
        if other is not None:
            pairs.append((game, model, report.curve.naba, other.curve.naba))
    return delta_naba_table(pairs) if pairs else []
