"""Per-run and cross-run reports computed from the store (the UI and CLI only render these)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from s3gym_tui.engine.judging import JudgingReport, CouplingReport, coupling, game_range_width, judging_report
from s3gym_tui.engine.metrics import CurveMetrics, DeltaNabaRow, delta_naba_table, game_curve_metrics
from s3gym_tui.models import Run


@dataclass(frozen=True)
class RunReport:
    run: Run
    points: tuple[tuple[int, Optional[float]], ...]  # (x, mean eval score) per checkpoint
    curve: CurveMetrics
    judging: JudgingReport  # over the run's exploration steps
    judging_eval: JudgingReport  # over its evaluation steps (reported, never fed back)
    coupling: CouplingReport
    explore_scores: tuple[float, ...]


def run_report(store, run: Run) -> RunReport:
    config = run.config
    by_x = {c.x: c.mean for c in store.checkpoints(run.id)}
    points = tuple((x, by_x.get(x)) for x in config.checkpoints())
    curve = game_curve_metrics(points, config.game, "eval")
    explore_steps: list[tuple[float, Optional[float], float]] = []
    explore_scores: list[float] = []
    eval_pairs: list[tuple[Optional[float], float]] = []
    for episode in store.episodes(run.id):
        steps = store.steps(episode.id)
        if episode.phase == "explore":
            explore_steps.extend((episode.index, s.self_score, s.reward) for s in steps)
            if episode.score is not None:
                explore_scores.append(episode.score)
        else:
            eval_pairs.extend((s.self_score, s.reward) for s in steps)
    judging = judging_report([(s, r) for _, s, r in explore_steps])
    width = game_range_width(config.game, "eval")
    couple = coupling([(x, y) for x, y in points], explore_steps, width)
    return RunReport(run, points, curve, judging, judging_report(eval_pairs), couple, tuple(explore_scores))


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
