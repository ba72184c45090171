"""The report as tables in the paper's shapes: plain rows of values, rendered by the CLI (terminal,
JSON, CSV) without computing anything. Built from engine.report's RunReports.

An undefined figure is None (— in the terminal, null in JSON, an empty CSV cell) and its reason is
in the row's `why` column; aggregates count only defined values and say how many they used. No
table averages raw scores across games: the one cross-game mean is of NABA (normalised by y0)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional, Sequence

from s3gym_tui.engine.glossary import (NMAE_SCALE, NO_STEPS, NONE_DEFINED, NOT_REPORTED, NOT_SCORED, R_CONSTANT,
                                      S_CONSTANT, why_text)
from s3gym_tui.engine.judging import correlations, out_of_range_note
from s3gym_tui.engine.paper import PAPER_MODELS, paper_agreement, paper_delta_naba
from s3gym_tui.engine.report import RunReport, game_scales, on_game_scales, phase_judging, summary_vs_history

ID, TEXT, INT, NUM, SIGNED, USD, NOTE, PCT = "id", "text", "int", "num", "signed", "usd", "note", "pct"


@dataclass(frozen=True)
class Column:
    key: str  # the name in JSON and CSV
    header: str  # the terminal header
    kind: str = NUM  # id (never cut), text, int, num, signed (+/-), usd, note (text, blank when None),
    # pct (a share 0..1 shown as a percentage)
    drop: int = 0  # 0: always shown; otherwise dropped first (highest first) to fit a narrow terminal
    hide_empty: bool = False  # left out of the terminal table when no row has a value (JSON, CSV keep it)


def why_column() -> Column:
    """The reason(s) a row's undefined figures are undefined (engine.glossary.REASONS)."""
    return Column("why", "why —", NOTE, drop=9, hide_empty=True)


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
            Column("model", "model", TEXT, 3), Column("decoding", "decoding", TEXT, 3), Column("status", "status", TEXT),
            Column("episodes_done", "eps", INT, 4), Column("episodes_total", "of", INT, 4),
            Column("calls", "calls", INT, 2), Column("tokens_in", "tok in", INT, 5),
            Column("tokens_out", "tok out", INT, 5), Column("tokens_cached", "cached tok", INT, 7),
            Column("cache_share", "cached", PCT, 1), Column("cost_usd", "cost $", USD, 1),
            Column("unpriced_calls", "unpriced", INT, 6),
            Column("replica_failures", "replica faults", INT, 7, hide_empty=True),
            Column("failovers", "failovers", INT, 7, hide_empty=True), why_column())
    rows = tuple((r.run.id, _cfg(r).game, _cfg(r).pathway, _cfg(r).model, _cfg(r).decoding, r.run.status,
                  r.episodes_done, r.episodes_total, r.usage.calls, r.usage.tokens_in, r.usage.tokens_out,
                  r.usage.tokens_cached if r.usage.cache_calls else None, r.usage.cache_share,
                  r.usage.cost if r.usage.calls > r.usage.unpriced else None, r.usage.unpriced,
                  _replica_count(r, r.replicas.failures), _replica_count(r, r.replicas.failovers), cache_why(r))
                 for r in reports)
    return ReportTable("runs", "runs (model calls, tokens and cost where litellm knows the price; decoding "
                       "grammar: replies constrained to the game's action grammar)", cols, rows,
                       note="cached = share of input tokens read from the provider's prompt cache, over the "
                            "calls whose provider reports it (cached tok: those tokens)")


def _replica_count(r: RunReport, count: int) -> Optional[int]:
    """A replica figure: defined only for a model served by several replicas (else None, shown —)."""
    return count if len(_cfg(r).api_bases) > 1 else None


def cache_why(r: RunReport) -> Optional[str]:
    """The `why` of a run's undefined cache share (None when it is defined or there were no calls)."""
    if r.usage.calls and r.usage.cache_share is None:
        return f"cached tok, cached: {NOT_REPORTED}"
    return None


def curves_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("game", "game", TEXT), Column("pathway", "pathway", TEXT), Column("model", "model", TEXT),
            Column("run", "run", ID, 4), Column("checkpoints", "cps", TEXT, 5), Column("y0", "y0", NUM, 6),
            Column("avg", "Avg"), Column("max", "Max"), Column("auc_plus", "AUC+"), Column("naba", "NABA"),
            Column("final", "final", NUM, 7), why_column())
    ordered = sorted(reports, key=lambda r: (_cfg(r).game, _cfg(r).pathway, _cfg(r).model))
    names = {"y0": "y0", "avg": "Avg", "max": "Max", "auc_plus": "AUC+", "naba": "NABA", "final": "final"}
    rows = tuple((_cfg(r).game, _cfg(r).pathway, _cfg(r).model, r.run.id, f"{r.curve.n}/{len(r.points)}",
                  r.curve.y0, r.curve.avg, r.curve.max, r.curve.auc_plus, r.curve.naba, r.curve.final,
                  why_text(r.curve.why, names, names))
                 for r in ordered)
    return ReportTable("curves", "checkpoint curves per game, pathway and model (eval episodes, verifier "
                       "scores)", cols, rows, note="cps = checkpoints with a score / planned; AUC+ compares "
                       "only within a game; a checkpoint without evaluation episodes is missing, never 0")


def by_model_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("model", "model", TEXT), Column("pathway", "pathway", TEXT),
            Column("games_used", "games", INT), Column("games", "of", INT),
            Column("mean_naba", "mean NABA"), Column("min_naba", "min NABA", NUM, 2),
            Column("max_naba", "max NABA", NUM, 1), why_column())
    groups: dict[tuple[str, str], dict[str, list[Optional[float]]]] = {}
    for r in reports:
        groups.setdefault((_cfg(r).model, _cfg(r).pathway), {}).setdefault(_cfg(r).game, []).append(r.curve.naba)
    rows = []
    for (model, pathway), by_game in sorted(groups.items()):
        per_game = [_mean(nabas) for nabas in by_game.values()]  # a game with several runs counts once
        nabas = [v for v in per_game if v is not None]
        why = None if nabas else f"mean NABA, min NABA, max NABA: {NONE_DEFINED}"
        rows.append((model, pathway, len(nabas), len(by_game), _mean(nabas),
                     min(nabas) if nabas else None, max(nabas) if nabas else None, why))
    return ReportTable("by_model", "per model and pathway: NABA over games (NABA is normalised by y0, so it "
                       "is the one curve metric averaged across games)", cols, tuple(rows),
                       note="games = games with a defined NABA (the mean, min and max use only those), of = "
                       "games run; a game with several runs counts once, with the mean of its runs' NABA")


def delta_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("game", "game", TEXT), Column("n", "n", INT), Column("wins", "wins", INT),
            Column("losses", "losses", INT), Column("ties", "ties", INT), Column("mean_delta", "mean", SIGNED),
            Column("paper_mean_delta", "paper", SIGNED), Column("skipped", "skipped", INT, 1), why_column())
    rows = tuple((d.game, d.n, d.wins, d.losses, d.ties, d.mean_delta,
                  paper_delta_naba(d.game), d.skipped, why_text(d.why, {"mean_delta": "mean"}))
                 for d in summary_vs_history(reports))
    return ReportTable("delta_naba", "Summary vs History: Delta NABA = Summary NABA - History NABA, per game "
                       "(a win: Summary better)", cols, rows,
                       note=f"n = pairs with both NABAs defined (wins + losses + ties, the mean's count); "
                       f"skipped = pairs with an undefined NABA, neither a win, a loss nor a tie; overall: "
                       f"the mean over every counted pair of every game (NABA is normalised by y0); paper: "
                       f"the mean over its {PAPER_MODELS} models (arXiv 2608.31100)")


_JUDGING_COLS = (Column("steps", "steps", INT), Column("missing", "missing", INT, 3),
                 Column("agreement", "agree"), Column("nmae", "NMAE"), Column("over", "over", NUM, 1),
                 Column("under", "under", NUM, 2), Column("out_of_range", "out of range", INT),
                 Column("out_of_range_share", "out %", PCT, 4))


_JUDGING_NAMES = {"agreement": "agree", "nmae": "NMAE", "over": "over", "under": "under",
                  "out_of_range_share": "out %"}


def _judging_values(rep) -> tuple:
    return (rep.n, rep.missing, rep.agreement, rep.nmae, rep.over, rep.under, rep.out_of_range,
            rep.out_of_range_share)


def _range_note(reports: Sequence[RunReport]) -> str:
    """What `out of range` counts, with the step range of each game in the table."""
    notes = [out_of_range_note(game) for game in sorted({_cfg(r).game for r in reports})]
    return ("out of range = self-scored steps whose s (the step's immediate reward, as the model states it) "
            "is " + ("; ".join(notes) or "outside what one step of the game can pay") + "; out % = its share of steps")


def _judging_why(rep) -> Optional[str]:
    return why_text(rep.why, _JUDGING_NAMES, _JUDGING_NAMES)


def judging_by_game_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("game", "game", TEXT), Column("phase", "phase", TEXT), *_JUDGING_COLS[:3],
            Column("paper_agreement", "paper", NUM), *_JUDGING_COLS[3:], why_column())
    by_game: dict[str, tuple[list, list]] = {}
    for r in reports:
        explore, evaluation = by_game.setdefault(_cfg(r).game, ([], []))
        explore.extend((s, rw) for _, s, rw in r.explore_pairs)
        evaluation.extend(r.eval_pairs)
    scales = game_scales(reports)
    rows = []
    for game in sorted(by_game):
        explore, evaluation = by_game[game]
        reps = phase_judging(game, explore, evaluation, scales[game])  # every phase on the game's one scale
        for phase, rep in zip(("all", "explore", "eval"), reps):
            values = _judging_values(rep)
            rows.append((game, phase, *values[:3], paper_agreement(game) if phase == "all" else None,
                         *values[3:], _judging_why(rep)))
    return ReportTable("judging_by_game", "self-judging by game: all steps of its runs, then split by phase",
                       cols, tuple(rows), note="paper: agreement over all steps (arXiv 2608.31100); over = "
                       f"P(s>0, r<=0), under = P(s<=0, r>0); NMAE: {NMAE_SCALE}; {_range_note(reports)}")


def judging_by_run_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("run", "run", ID), Column("game", "game", TEXT, 4), Column("phase", "phase", TEXT),
            *_JUDGING_COLS, why_column())
    rows = []
    for r in reports:
        for phase, rep in (("all", r.judging_all), ("explore", r.judging), ("eval", r.judging_eval)):
            if rep is not None:
                rows.append((r.run.id, _cfg(r).game, phase, *_judging_values(rep), _judging_why(rep)))
    return ReportTable("judging_by_run", "self-judging by run: all steps, exploration, evaluation (NMAE on "
                       "its game's scale, table nmae_scale)", cols, tuple(rows), note=_range_note(reports))


def nmae_scale_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("game", "game", TEXT), Column("steps", "steps", INT), Column("s_min", "s min"),
            Column("s_max", "s max"), Column("r_min", "r min"), Column("r_max", "r max"), why_column())
    rows = []
    for game, scale in sorted(game_scales(reports).items()):
        s_lo, s_hi = scale.s or (None, None)
        r_lo, r_hi = scale.r or (None, None)
        why = (f"s min, s max, r min, r max: {NO_STEPS}" if scale.s is None else
               f"NMAE: {S_CONSTANT}" if s_lo == s_hi else f"NMAE: {R_CONSTANT}" if r_lo == r_hi else None)
        rows.append((game, scale.n, s_lo, s_hi, r_lo, r_hi, why))
    return ReportTable("nmae_scale", "NMAE scale per game: min and max of the self-score s and of the reward r "
                       "over every self-scored step of the game's runs here (both phases)", cols, tuple(rows),
                       note="every NMAE of a game (by phase, by run, per coupling block) normalises s and r "
                       "by these bounds; a constant series cannot be normalised, so its game's NMAE is —")


_CORR_NAMES = {"corr_agreement": "corr(A,g)", "corr_neg_nmae": "corr(-E,g)"}


def coupling_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("run", "run", ID), Column("game", "game", TEXT, 3), Column("pathway", "pathway", TEXT, 2),
            Column("blocks", "blocks", INT, 1), Column("used", "used", INT),
            Column("corr_agreement_gain", "corr(A,g)"), Column("corr_neg_nmae_gain", "corr(-E,g)"), why_column())
    rows = tuple((r.run.id, _cfg(r).game, _cfg(r).pathway, len(r.coupling.blocks), r.coupling.n_used,
                  r.coupling.corr_agreement, r.coupling.corr_neg_nmae, why_text(r.coupling.why, _CORR_NAMES))
                 for r in reports)
    return ReportTable("coupling", "judgement-improvement coupling per run: per exploration block t, "
                       "agreement A_t and NMAE E_t against the next checkpoint's normalised gain g_t",
                       cols, rows, note="a correlation needs 3 usable blocks whose series vary, and is — "
                       "otherwise; E_t is on its game's NMAE scale")


def coupling_by_game_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("game", "game", TEXT), Column("runs", "runs", INT), Column("blocks", "blocks", INT),
            Column("corr_agreement_gain", "corr(A,g)"), Column("corr_neg_nmae_gain", "corr(-E,g)"), why_column())
    by_game: dict[str, list] = {}
    counts: dict[str, int] = {}
    for r in reports:
        counts[_cfg(r).game] = counts.get(_cfg(r).game, 0) + 1
        by_game.setdefault(_cfg(r).game, []).extend(
            b for b in r.coupling.blocks if b.agreement is not None and b.gain is not None)
    rows = []
    for game, blocks in sorted(by_game.items()):
        corr_a, corr_e, why = correlations(blocks)
        rows.append((game, counts[game], len(blocks), corr_a, corr_e, why_text(why, _CORR_NAMES)))
    return ReportTable("coupling_by_game", "coupling by game: the usable blocks of all its runs pooled (E_t on "
                       "the game's one NMAE scale)", cols, tuple(rows))


def checkpoints_table(reports: Sequence[RunReport]) -> ReportTable:
    cols = (Column("run", "run", ID), Column("game", "game", TEXT), Column("pathway", "pathway", TEXT),
            Column("model", "model", TEXT), Column("x", "x", INT), Column("mean", "mean score"), why_column())
    rows = tuple((r.run.id, _cfg(r).game, _cfg(r).pathway, _cfg(r).model, x, y,
                  f"mean score: {NOT_SCORED}" if y is None else None) for r in reports for x, y in r.points)
    return ReportTable("checkpoints", "checkpoint means (x = exploration episodes done)", cols, rows)


def build_report(reports: Sequence[RunReport], meta: Optional[dict] = None) -> Report:
    """Every table of the report, in print order (every NMAE on one scale per game)."""
    reports = on_game_scales(reports)
    tables = [runs_table(reports), curves_table(reports), by_model_table(reports)]
    delta = delta_table(reports)
    if delta.rows:
        tables.append(delta)
    tables += [judging_by_game_table(reports), judging_by_run_table(reports), nmae_scale_table(reports),
               coupling_table(reports), coupling_by_game_table(reports), checkpoints_table(reports)]
    return Report(tuple(tables), dict(meta or {}))
