"""The demo's guided path, found in the demo database: Report's Delta NABA table -> the History-better
pairs, largest gap first -> Compare at that pair's first divergence -> the summary version it used, where
one rule added changes what the checkpoint's seeds score. Each stop says where it opens and what to see."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Optional

from s3gym_tui.engine.citations import cited, lacking
from s3gym_tui.engine.compare import EpisodePair, best_pairs, context_at, first_divergence
from s3gym_tui.engine.demo import DemoMark
from s3gym_tui.engine.metrics import OVERALL, delta_naba_table, game_curve_metrics

Screen = Literal["report", "pairs", "compare", "summaries"]


@dataclass(frozen=True)
class TourStop:
    """One step of the tour: the screen it opens, positioned, and what to look at there."""

    key: str  # the digit that opens it
    screen: Screen
    title: str
    text: str
    run_ids: tuple[str, ...] = ()  # report
    table: str = ""  # report: the table scrolled to
    winner: Optional[str] = None  # pairs: the filter
    episodes: tuple[str, ...] = ()  # compare: (History episode, Summary episode)
    run_id: Optional[str] = None  # summaries
    summary_id: Optional[str] = None  # summaries: the version selected
    ready: bool = True  # False: nothing to open (the text says why)


@dataclass(frozen=True)
class Tour:
    stops: tuple[TourStop, ...]
    about: str  # one line on the database itself


def _signed(value: Optional[float]) -> str:
    return "—" if value is None else f"{value:+.2f}"


def _deltas(store, runs) -> list:
    """Delta NABA rows of these runs (the report's own metrics and table)."""
    naba: dict[tuple[str, str, str], Optional[float]] = {}
    for run in runs:
        cfg = run.config
        by_x = {c.x: c.mean for c in store.checkpoints.list(run.id)}
        curve = game_curve_metrics(tuple((x, by_x.get(x)) for x in cfg.checkpoints()), cfg.game, "eval")
        naba[(cfg.game, cfg.model, cfg.pathway)] = curve.naba
    pairs = [(game, model, value, naba[(game, model, "history")]) for (game, model, pathway), value in naba.items()
             if pathway == "summary" and (game, model, "history") in naba]
    return delta_naba_table(pairs) if pairs else []


def _report_stop(store, runs, contrast) -> TourStop:
    rows = [r for r in _deltas(store, runs) if r.game != OVERALL and r.mean_delta is not None]
    history = sorted((r for r in rows if r.losses > r.wins), key=lambda r: r.mean_delta)
    summary = sorted((r for r in rows if r.wins > r.losses), key=lambda r: -r.mean_delta)
    ties = [r for r in rows if r.wins == r.losses]  # (the table's tie tolerance)
    parts = ["Delta NABA = Summary NABA − History NABA per game (below zero: raw history did better)."]
    if history:
        parts.append("History better: " + ", ".join(f"{r.game} {_signed(r.mean_delta)}" for r in history) + ".")
    if summary:
        parts.append("Summary better: " + ", ".join(f"{r.game} {_signed(r.mean_delta)}" for r in summary) + ".")
    if ties:
        parts.append("Even: " + ", ".join(r.game for r in ties) + ".")
    parts.append("The none runs are the flat baseline: no experience, no change.")
    if contrast:
        cfg = contrast[0].config
        episodes = f"{cfg.explore_episodes} exploration episode" + ("s" if cfg.explore_episodes != 1 else "")
        parts.append(f"For contrast, the curves include {cfg.model} on {cfg.game} ({cfg.pathway}, {episodes}).")
    ids = tuple(r.id for r in runs) + tuple(r.id for r in contrast)
    return TourStop("1", "report", "Report: Delta NABA per game", " ".join(parts), run_ids=ids, table="delta")


def _pair_text(pair: EpisodePair) -> str:
    return (f"{pair.game} on seed {pair.seed} at checkpoint x={pair.x}: History {pair.history_score:g}, "
            f"Summary {pair.summary_score:g}")


def demo_tour(store, mark: DemoMark) -> Tour:
    """The tour of a demo database (its mark names the sweeps)."""
    runs = store.sweeps.sweep_runs(mark.sweep_id) if mark.sweep_id else []
    contrast = store.sweeps.sweep_runs(mark.contrast_sweep_id) if mark.contrast_sweep_id else []
    stops = [_report_stop(store, runs, contrast)]
    pairs = best_pairs(store, limit=1, winner="history")
    pair = pairs[0] if pairs else None
    if pair is None:
        missing = "No pair where History beat Summary in this database."
        stops += [TourStop("2", "pairs", "Pairs: the largest History-vs-Summary gaps", missing, winner="history"),
                  TourStop("3", "compare", "Compare: the first divergence", missing, ready=False),
                  TourStop("4", "summaries", "Summaries: add the missing rule", missing, ready=False)]
    else:
        stops += _pair_stops(store, pair)
    about = f"Demo database: {len(runs)} learner runs"
    about += f" and {len(contrast)} run of {contrast[0].config.model}" if contrast else ""
    if mark.contrast_note:
        about += f" ({mark.contrast_note})"
    if mark.wall_s is not None:
        about += f"; built in {mark.wall_s:.0f} s ({mark.cpu_s:.0f} s of CPU)"
    if mark.status != "ready":
        about += "; its build did not finish: run `s3gym demo` again"
    return Tour(tuple(stops), about + ".")


def _pair_stops(store, pair: EpisodePair) -> list[TourStop]:
    pairs_stop = TourStop("2", "pairs", "Pairs: the largest History-vs-Summary gaps",
                          "Evaluation pairs History won, largest score gap first (f cycles the filter, G the game). "
                          f"The top one: {_pair_text(pair)}.", winner="history")
    h_episode = store.episodes.get_episode(pair.history_episode)
    s_episode = store.episodes.get_episode(pair.summary_episode)
    h_steps = store.episodes.steps(h_episode.id, include_prompt=False)
    s_steps = store.episodes.steps(s_episode.id, include_prompt=False)
    k = first_divergence(h_steps, s_steps, h_episode.game)
    compare_text = f"{_pair_text(pair)}. "
    rule = None
    if k is None or k >= min(len(h_steps), len(s_steps)):
        compare_text += "The two episodes take the same actions up to where one ends."
    else:
        h_cites = cited(h_steps[k].reply)
        compare_text += (f"At step {k + 1} History plays {h_steps[k].action} and Summary {s_steps[k].action}. "
                         "The reply cites its evidence; the lines it cites are highlighted in the context beside it")
        if h_cites.steps:
            episode, step = h_cites.steps[0]
            more = len(h_cites.steps) - 1
            compare_text += f" (History: Previous episode {episode}, step {step}" + (f" and {more} more" if more else "") + ")"
        compare_text += "."
        summary_context = context_at(store, s_episode, k, steps=s_steps)
        gaps = lacking(summary_context.text, h_cites) if summary_context.kind == "summary" else []
        if gaps:
            rule = next((c for c in h_cites.claims if c.startswith(gaps[0].rule)), None)
            compare_text += f" The summary has no rule for {gaps[0].rule}: the summary side says so under its step (✗)."
    compare_stop = TourStop("3", "compare", "Compare: where the two agents part", compare_text,
                            episodes=(pair.history_episode, pair.summary_episode))
    summary = store.summaries.get_summary(s_episode.summary_id) if s_episode.summary_id else None
    if summary is None:
        return [pairs_stop, compare_stop, TourStop("4", "summaries", "Summaries: edit a rule",
                                                   "That Summary episode saw no summary version.", ready=False)]
    text = (f"Version v{summary.version} of {pair.summary_run}: the summary the Summary agent played checkpoint "
            f"x={pair.x} with. "
            "Press e to edit it")
    text += (f", type this line at the top of Strategies to retain, then enter: {rule}  and save with ctrl+s (a "
             "new version)." if rule else
             ", change or add a rule line, save with ctrl+s (a new version).")
    text += (f" Then t on v{summary.version} and t on your version: the test column is the mean score on the "
             f"checkpoint's {store.runs.get_run(pair.summary_run).config.eval_episodes} evaluation seeds with each "
             "version (played at once, as standalone episodes: the run's own record is unchanged).")
    summaries_stop = TourStop("4", "summaries", "Summaries: one rule, another score", text, run_id=pair.summary_run,
                              summary_id=summary.id)
    return [pairs_stop, compare_stop, summaries_stop]
