"""The report as tables in the paper's shapes: plain rows of values, rendered by the CLI (terminal,
JSON, CSV) without computing anything. Built from engine.report's RunReports."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from s3gym_tui.engine.judging import judging_report, pearson
from s3gym_tui.engine.paper import PAPER_MODELS, paper_agreement, paper_delta_naba
from s3gym_tui.engine.report import RunReport, summary_vs_history

ID, TEXT, INT, NUM, SIGNED, USD = "id", "text", "int", "num", "signed", "usd"


@dataclass(frozen=True)
class Column:
    key: str  # the name in JSON and CSV
    header: str  # the terminal header
    kind: str = NUM  # id (never cut), text, int, num (3 decimals), signed (+/-, 2 decimals)
    drop: int = 0  # 0: always shown; otherwise dropped first (highest first) to fit a narrow terminal


@dataclass(frozen=True)
class ReportTable:
    name: str  # file name of its CSV, key in the JSON
    title: str
    columns: tuple[Column, ...]
    rows: tuple[tuple[Any, ...], ...]
    note: str = ""  # printed under the table

    def records(self) -> list[dict[str, Any]]:
        keys = [c.key for c in self.columns]
        return [dict(zip(keys, row)) for row in self.rows]


@dataclass(frozen=True)
class Report:
    tables: tuple[ReportTable, ...]
    meta: dict[str, Any] = field(default_factory=dict)

    def table(self, name: str) -> ReportTable:
        return next(t for t in self.tables if t.name == name)

    def as_json(self) -> dict[str, Any]:
        return {**self.meta, "tables": {t.name: {"title": t.title, "columns": [c.key for c in t.columns],
                                                 "rows": t.records()} for t in self.tables}}


def _cfg(r: RunReport):
    return r.run.config


def _mean(values: Sequence[Optional[float]]) -> Optional[float]:
    present = [v for v in values if v is not None]
    return sum(present) / len(present) if present else None


def runs_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("run", "run", ID), Column("game", "game", TEXT), Column("pathway", "pathway", TEXT),
            Column("model", "model", TEXT, 3), Column("status", "status", TEXT),
            Column("episodes_done", "eps", INT, 4), Column("episodes_total", "of", INT, 4),
            Column("calls", "calls", INT, 2), Column("tokens_in", "tok in", INT, 5),
            Column("tokens_out", "tok out", INT, 5), Column("cost_usd", "cost $", USD, 1),
            Column("unpriced_calls", "unpriced", INT, 6))
    rows = tuple((r.run.id, _cfg(r).game, _cfg(r).pathway, _cfg(r).model, r.run.status, r.episodes_done,
                  r.episodes_total, r.usage.calls, r.usage.tokens_in, r.usage.tokens_out,
                  r.usage.cost if r.usage.calls > r.usage.unpriced else None, r.usage.unpriced)
                 for r in reports)
    return ReportTable("runs", "runs (model calls, tokens and cost where litellm knows the price)", cols, rows)


def curves_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("game", "game", TEXT), Column("pathway", "pathway", TEXT), Column("model", "model", TEXT),
            Column("run", "run", ID, 4), Column("checkpoints", "cps", TEXT, 5), Column("y0", "y0", NUM, 6),
            Column("avg", "Avg"), Column("max", "Max"), Column("auc_plus", "AUC+"), Column("naba", "NABA"),
            Column("final", "final", NUM, 7))
    ordered = sorted(reports, key=lambda r: (_cfg(r).game, _cfg(r).pathway, _cfg(r).model))
    rows = tuple((_cfg(r).game, _cfg(r).pathway, _cfg(r).model, r.run.id, f"{r.curve.n}/{len(r.points)}",
                  r.curve.y0, r.curve.avg, r.curve.max, r.curve.auc_plus, r.curve.naba, r.curve.final)
                 for r in ordered)
    return ReportTable("curves", "checkpoint curves per game, pathway and model (eval episodes, verifier "
                       "scores)", cols, rows, note="AUC+ compares only within a game; a checkpoint without "
                       "evaluation episodes is missing, never 0")


def by_model_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("model", "model", TEXT), Column("pathway", "pathway", TEXT), Column("games", "games", INT),
            Column("mean_naba", "mean NABA"), Column("min_naba", "min NABA", NUM, 2),
            Column("max_naba", "max NABA", NUM, 1))
    groups: dict[tuple[str, str], list[RunReport]] = {}
    for r in reports:
        groups.setdefault((_cfg(r).model, _cfg(r).pathway), []).append(r)
    rows = []
    for (model, pathway), group in sorted(groups.items()):
        nabas = [r.curve.naba for r in group if r.curve.naba is not None]
        rows.append((model, pathway, len({_cfg(r).game for r in group}), _mean(nabas),
                     min(nabas) if nabas else None, max(nabas) if nabas else None))
    return ReportTable("by_model", "per model and pathway: NABA over games (NABA is normalised by y0, so it "
                       "is the one curve metric comparable across games)", cols, tuple(rows))


def delta_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("game", "game", TEXT), Column("n", "n", INT), Column("wins", "wins", INT),
            Column("losses", "losses", INT), Column("ties", "ties", INT), Column("mean_delta", "mean", SIGNED),
            Column("paper_mean_delta", "paper", SIGNED), Column("skipped", "skipped", INT, 1))
    rows = tuple((d.game, d.n, d.wins, d.losses, d.ties, d.mean_delta,
                  paper_delta_naba(d.game), d.skipped) for d in summary_vs_history(reports))
    return ReportTable("delta_naba", "Summary vs History: Delta NABA = Summary NABA - History NABA, per game "
                       "(a win: Summary better)", cols, rows,
                       note=f"paper: the mean over its {PAPER_MODELS} models (arXiv 2608.31100)")


_JUDGING_COLS = (Column("steps", "steps", INT), Column("missing", "missing", INT, 3),
                 Column("agreement", "agree"), Column("nmae", "NMAE"), Column("over", "over", NUM, 1),
                 Column("under", "under", NUM, 2))


def _judging_values(rep) -> tuple:
    return (rep.n, rep.missing, rep.agreement, rep.nmae, rep.over, rep.under)


def judging_by_game_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("game", "game", TEXT), Column("phase", "phase", TEXT), *_JUDGING_COLS[:3],
            Column("paper_agreement", "paper", NUM), *_JUDGING_COLS[3:])
    by_game: dict[str, tuple[list, list]] = {}
    for r in reports:
        explore, evaluation = by_game.setdefault(_cfg(r).game, ([], []))
        explore.extend((s, rw) for _, s, rw in r.explore_pairs)
        evaluation.extend(r.eval_pairs)
    rows = []
    for game in sorted(by_game):
        explore, evaluation = by_game[game]
        for phase, pairs in (("all", explore + evaluation), ("explore", explore), ("eval", evaluation)):
            rep = judging_report(pairs)  # NMAE normalised over this game's steps considered
            values = _judging_values(rep)
            rows.append((game, phase, *values[:3], paper_agreement(game) if phase == "all" else None,
                         *values[3:]))
    return ReportTable("judging_by_game", "self-judging by game: all steps of its runs, then split by phase",
                       cols, tuple(rows), note="paper: agreement over all steps (arXiv 2608.31100); over = "
                       "P(s>0, r<=0), under = P(s<=0, r>0)")


def judging_by_run_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("run", "run", ID), Column("game", "game", TEXT, 4), Column("phase", "phase", TEXT),
            *_JUDGING_COLS)
    rows = []
    for r in reports:
        for phase, rep in (("all", r.judging_all), ("explore", r.judging), ("eval", r.judging_eval)):
            if rep is not None:
                rows.append((r.run.id, _cfg(r).game, phase, *_judging_values(rep)))
    return ReportTable("judging_by_run", "self-judging by run: all steps, exploration, evaluation", cols,
                       tuple(rows))


def coupling_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("run", "run", ID), Column("game", "game", TEXT, 3), Column("pathway", "pathway", TEXT, 2),
            Column("blocks", "blocks", INT, 1), Column("used", "used", INT),
            Column("corr_agreement_gain", "corr(A,g)"), Column("corr_neg_nmae_gain", "corr(-E,g)"))
    rows = tuple((r.run.id, _cfg(r).game, _cfg(r).pathway, len(r.coupling.blocks), r.coupling.n_used,
                  r.coupling.corr_agreement, r.coupling.corr_neg_nmae) for r in reports)
    return ReportTable("coupling", "judgement-improvement coupling per run: per exploration block t, "
                       "agreement A_t and NMAE E_t against the next checkpoint's normalised gain g_t",
                       cols, rows, note="a correlation needs 3 usable blocks and is missing ('-') otherwise")


def coupling_by_game_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("game", "game", TEXT), Column("runs", "runs", INT), Column("blocks", "blocks", INT),
            Column("corr_agreement_gain", "corr(A,g)"), Column("corr_neg_nmae_gain", "corr(-E,g)"))
    by_game: dict[str, list] = {}
    counts: dict[str, int] = {}
    for r in reports:
        counts[_cfg(r).game] = counts.get(_cfg(r).game, 0) + 1
        by_game.setdefault(_cfg(r).game, []).extend(
            b for b in r.coupling.blocks if b.agreement is not None and b.nmae is not None and b.gain is not None)
    rows = tuple((game, counts[game], len(blocks), pearson([b.agreement for b in blocks], [b.gain for b in blocks]),
                  pearson([-b.nmae for b in blocks], [b.gain for b in blocks]))
                 for game, blocks in sorted(by_game.items()))
    return ReportTable("coupling_by_game", "coupling by game: the usable blocks of all its runs pooled", cols, rows)


def checkpoints_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("run", "run", ID), Column("game", "game", TEXT), Column("pathway", "pathway", TEXT),
            Column("model", "model", TEXT), Column("x", "x", INT), Column("mean", "mean score"))
    rows = tuple((r.run.id, _cfg(r).game, _cfg(r).pathway, _cfg(r).model, x, y) for r in reports
                 for x, y in r.points)
    return ReportTable("checkpoints", "checkpoint means (x = exploration episodes done)", cols, rows)


def build_report(reports: Sequence[RunReport], meta: Optional[dict] = None) -> Report:
    """Every table of the report, in print order."""
    tables = [runs_table(reports), curves_table(reports), by_model_table(reports)]
    delta = delta_table(reports)
    if delta.rows:
        tables.append(delta)
    tables += [judging_by_game_table(reports), judging_by_run_table(reports), coupling_table(reports),
               coupling_by_game_table(reports), checkpoints_table(reports)]
    return Report(tuple(tables), dict(meta or {}))
