"""The paper's grid with the scripted players: all seven games x three pathways run as one sweep from the
CLI, every run consistent, and the sweep's report equal to values recomputed here from the stored rows.

The grid runs 9 exploration episodes (4 checkpoints x 3 evaluation episodes each: three blocks of
exploration between checkpoints, the fewest the coupling correlations are defined on) with a history
budget that the longer games' histories exceed, so the oldest-first cut is taken at the grid's scale as
well (at the default size, 30 episodes and 11 checkpoints, the same sweep took 234 of the suite's ~2,100
CPU seconds and checked the same relations). The default size itself is the plan `s3gym sweep` makes
without size options; its speed is benchmarks/sweep_scripted.py's (`--episodes 30`)."""

from __future__ import annotations

import json
import sqlite3
import statistics
from collections import defaultdict

import pytest

import s3gym_games as games
from s3gym_tui.cli import main
from s3gym_tui.store import Store

from tests.engine.helpers import check_run_consistency

pytestmark = pytest.mark.slow(minutes=3)  # one of the longest: started first (tests/conftest.py)

EPISODES, EVERY, EVAL_EPISODES = 9, 3, 3
HISTORY_BUDGET = 20_000  # tokens: below what 9 episodes of the longer games take


def _curve(points: list[tuple[int, float]], eps: float) -> dict:
    """y0, Avg, Max, AUC+ (positive part of y - y0, piecewise linear) and NABA, from scratch."""
    ys = [y for _, y in points]
    y0 = ys[0]
    auc = 0.0
    for (xa, ya), (xb, yb) in zip(points, points[1:]):
        a, b, w = ya - y0, yb - y0, xb - xa
        if a >= 0 and b >= 0:
            auc += w * (a + b) / 2
        elif a > 0 or b > 0:
            hi, lo = max(a, b), min(a, b)
            auc += 0.5 * w * hi * hi / (hi - lo)
    return {"y0": y0, "avg": statistics.mean(ys), "max": max(ys), "auc_plus": auc, "naba": auc / max(y0, eps)}


def _bounds(pairs: list[tuple]) -> tuple[tuple, tuple]:
    """The game's NMAE scale: min and max of s and of r over its self-scored steps, both phases."""
    kept = [(s, r) for s, r in pairs if s is not None]
    return (min(s for s, _ in kept), max(s for s, _ in kept)), (min(r for _, r in kept), max(r for _, r in kept))


def _nmae(pairs: list[tuple], sb: tuple, rb: tuple):
    """Mean |norm(s) - norm(r)|; None when a series cannot be min-max normalised (constant)."""
    if sb[1] == sb[0] or rb[1] == rb[0]:
        return None
    return statistics.mean(abs((s - sb[0]) / (sb[1] - sb[0]) - (r - rb[0]) / (rb[1] - rb[0])) for s, r in pairs)


def _judge(pairs: list[tuple], sb: tuple, rb: tuple) -> dict:
    kept = [(s, r) for s, r in pairs if s is not None]
    n = len(kept)
    return {"steps": n, "missing": len(pairs) - n,
            "agreement": sum((s > 0) == (r > 0) for s, r in kept) / n,
            "over": sum(s > 0 and r <= 0 for s, r in kept) / n,
            "under": sum(s <= 0 and r > 0 for s, r in kept) / n,
            "nmae": _nmae(kept, sb, rb)}


def _corr(xs, ys):
    if len(xs) < 3:
        return None
    try:
        return statistics.correlation(xs, ys)
    except statistics.StatisticsError:
        return None


def test_the_default_sweep_plan_is_the_papers_grid(capsys):
    code = main(["sweep", "--games", "all", "--models", "scripted", "--plan", "--db", "/nonexistent/plan.db"])
    out = capsys.readouterr().out
    assert code == 0
    assert f"{len(games.names())} game(s) x 3 pathway(s) x 1 model(s) = {3 * len(games.names())} runs" in out
    assert "each run: 30 exploration episodes; 3 eval episodes at x = 0..30 every 3 (11 checkpoints); " \
           "history budget 100,000 tokens" in out


def test_a_sweep_of_every_game_and_pathway_matches_its_report(tmp_path, capsys):
    db = tmp_path / "sweep.db"
    code = main(["sweep", "--games", "all", "--models", "scripted", "--episodes", str(EPISODES), "--eval-every",
                 str(EVERY), "--eval-episodes", str(EVAL_EPISODES), "--history-budget", str(HISTORY_BUDGET),
                 "--yes", "--db", str(db)])
    assert code == 0, capsys.readouterr().err
    capsys.readouterr()
    checkpoints = list(range(0, EPISODES + 1, EVERY))
    with Store(db) as store:
        [sweep] = store.sweeps.list_sweeps()
        runs = store.sweeps.sweep_runs(sweep.id)
        assert sweep.status == "finished" and len(runs) == 21
        assert {(r.config.game, r.config.pathway) for r in runs} == {(g, p) for g in games.names()
                                                                      for p in ("none", "history", "summary")}
        cut = set()
        for run in runs:
            assert run.status == "finished" and run.config.explore_episodes == EPISODES
            assert run.config.checkpoints() == checkpoints
            check_run_consistency(store, run)
            if run.config.pathway == "history":  # the most recent episodes within the budget, the cut recorded
                explore = sorted(store.episodes.list(run.id, phase="explore"), key=lambda e: e.index)
                for e in explore:
                    assert list(e.history_episode_ids) == [p.id for p in explore[e.history_cut:e.index]]
                if explore[-1].history_cut:
                    cut.add(run.config.game)
        assert len(cut) >= 3, cut  # chess, pvz, snake and tetris exceed it
    code = main(["report", "--sweep", sweep.id, "--json", "--db", str(db)])
    tables = json.loads(capsys.readouterr().out)["tables"]
    assert code == 0

    conn = sqlite3.connect(db)
    meta = {r[0]: (r[1], r[2]) for r in conn.execute("SELECT id, game, pathway FROM runs WHERE sweep_id = ?",
                                                      (sweep.id,))}
    # curves: checkpoint means from the stored evaluation episodes
    means = defaultdict(list)
    for run_id, x, mean in conn.execute("SELECT run_id, checkpoint, avg(score) FROM episodes WHERE phase = 'eval' "
                                        "GROUP BY run_id, checkpoint ORDER BY run_id, checkpoint"):
        means[run_id].append((x, mean))
    curves = {row["run"]: row for row in tables["curves"]["rows"]}
    nabas = {}
    for run_id, (game, pathway) in meta.items():
        assert [x for x, _ in means[run_id]] == checkpoints
        expected = _curve(means[run_id], games.game_class(game).score_eps("eval"))
        for key, value in expected.items():
            assert curves[run_id][key] == pytest.approx(value, abs=1e-9), (run_id, key)
        nabas[(game, pathway)] = expected["naba"]
    # Summary vs History per game
    deltas = {row["game"]: row for row in tables["delta_naba"]["rows"]}
    for game in games.names():
        delta = nabas[(game, "summary")] - nabas[(game, "history")]
        assert deltas[game]["mean_delta"] == pytest.approx(delta, abs=1e-9)
        assert deltas[game]["wins"] == (delta >= 1e-9) and deltas[game]["losses"] == (delta <= -1e-9)
    # self-judging by game, over all steps and per phase
    pairs = defaultdict(list)
    for game, phase, s, r in conn.execute(
            "SELECT e.game, e.phase, s.self_score, s.reward FROM steps s JOIN episodes e ON e.id = s.episode_id "
            "JOIN runs u ON u.id = e.run_id WHERE u.sweep_id = ?", (sweep.id,)):
        pairs[(game, phase)].append((s, r))
        pairs[(game, "all")].append((s, r))
    judged = {(row["game"], row["phase"]): row for row in tables["judging_by_game"]["rows"]}
    assert len(judged) == 21
    scales = {game: _bounds(pairs[(game, "all")]) for game in games.names()}  # one scale per game
    for key, values in pairs.items():
        for metric, value in _judge(values, *scales[key[0]]).items():
            if value is None:
                assert judged[key][metric] is None and judged[key]["why"], (key, metric)
            else:
                assert judged[key][metric] == pytest.approx(value, abs=1e-9), (key, metric)
    # coupling per run: blocks of exploration between checkpoints, E_t on the game's scale
    coupling = {row["run"]: row for row in tables["coupling"]["rows"]}
    for run_id, (game, _) in meta.items():
        lo, hi = games.game_class(game).score_range("eval")
        steps = conn.execute("SELECT e.\"index\", s.self_score, s.reward FROM steps s JOIN episodes e "
                             "ON e.id = s.episode_id WHERE e.run_id = ? AND e.phase = 'explore'", (run_id,)).fetchall()
        kept = [(i, s, r) for i, s, r in steps if s is not None]
        sb, rb = scales[game]
        a_t, g_a, e_t, g_e = [], [], [], []  # corr(A, g) needs A_t; corr(-E, g) needs E_t as well
        ys = dict(means[run_id])
        for x in checkpoints[:-1]:
            block = [(s, r) for i, s, r in kept if x <= i < x + EVERY]
            gain = (ys[x + EVERY] - ys[x]) / (hi - lo)
            if block:
                a_t.append(sum((s > 0) == (r > 0) for s, r in block) / len(block))
                g_a.append(gain)
            if block and _nmae(block, sb, rb) is not None:
                e_t.append(_nmae(block, sb, rb))
                g_e.append(gain)
        row = coupling[run_id]
        assert row["used"] == len(a_t)
        for key, value in (("corr_agreement_gain", _corr(a_t, g_a)), ("corr_neg_nmae_gain", _corr([-e for e in e_t], g_e))):
            if value is None:
                assert row[key] is None, (run_id, key)
            else:
                assert row[key] == pytest.approx(value, abs=1e-9), (run_id, key)
    # calls, tokens: every step and every model-written summary of the run
    usage = {row["run"]: row for row in tables["runs"]["rows"]}
    for run_id in meta:
        calls, t_in, t_out = conn.execute(
            "SELECT count(*), sum(s.tokens_in), sum(s.tokens_out) FROM steps s JOIN episodes e ON e.id = s.episode_id "
            "WHERE e.run_id = ?", (run_id,)).fetchone()
        s_calls, s_in, s_out = conn.execute(
            "SELECT count(*), coalesce(sum(tokens_in), 0), coalesce(sum(tokens_out), 0) FROM summaries "
            "WHERE run_id = ? AND author LIKE 'model%'", (run_id,)).fetchone()
        assert (usage[run_id]["calls"], usage[run_id]["tokens_in"], usage[run_id]["tokens_out"]) == \
            (calls + s_calls, t_in + s_in, t_out + s_out)
        assert usage[run_id]["episodes_done"] == usage[run_id]["episodes_total"] == \
            EPISODES + len(checkpoints) * EVAL_EPISODES
    conn.close()
