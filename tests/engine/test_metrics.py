"""Checkpoint-curve metrics, checked against hand-computed values (arithmetic in the comments)."""

from __future__ import annotations

import pytest

from s3gym_tui.engine.glossary import NABA_UNDEFINED, NO_CHECKPOINT, NO_Y0, ONE_CHECKPOINT
from s3gym_tui.engine.metrics import (
    OVERALL, auc_plus, avg, curve_metrics, delta_naba_table, game_curve_metrics, game_eps,
    max_score, naba,
)


def test_monotone_curve():
    pts = [(0, 2.0), (3, 4.0), (6, 5.0), (9, 8.0)]
    # y0 = 2, d = y - y0 = 0, 2, 3, 6; all segments are trapezoids of width 3:
    # 3*(0+2)/2 = 3, 3*(2+3)/2 = 7.5, 3*(3+6)/2 = 13.5 -> AUC+ = 24
    m = curve_metrics(pts, eps=1.0)
    assert m.auc_plus == pytest.approx(24.0)
    assert m.avg == pytest.approx(4.75)  # (2+4+5+8)/4 = 19/4
    assert m.max == pytest.approx(8.0)
    assert m.naba == pytest.approx(12.0)  # 24 / max(2, 1)
    assert m.y0 == pytest.approx(2.0)
    assert m.final == pytest.approx(8.0)
    assert m.final_delta == pytest.approx(6.0)
    assert (m.n, m.missing) == (4, 0)
    assert avg(pts) == pytest.approx(4.75) and max_score(pts) == pytest.approx(8.0)


def test_dip_below_y0_and_cross_back_counts_only_positive_triangle():
    pts = [(0, 4.0), (3, 1.0), (6, 7.0), (9, 4.0)]
    # d = 0, -3, 3, 0
    # [0,3]: 0 -> -3, all below: 0
    # [3,6]: -3 -> 3 crosses at x = 4.5; positive triangle base 1.5, height 3: 0.5*1.5*3 = 2.25
    # [6,9]: 3 -> 0 trapezoid (triangle): 3*(3+0)/2 = 4.5
    # AUC+ = 6.75 (a naive trapezoid of max(0,d) at the nodes would give 4.5 + 4.5 = 9)
    assert auc_plus(pts) == pytest.approx(6.75)
    m = curve_metrics(pts, eps=1.0)
    assert m.naba == pytest.approx(6.75 / 4.0)
    assert m.avg == pytest.approx(4.0)  # (4+1+7+4)/4
    assert m.final_delta == pytest.approx(0.0)


def test_downward_crossing():
    pts = [(0, 4.0), (2, 6.0), (6, 0.0)]
    # d = 0, 2, -4
    # [0,2]: 2*(0+2)/2 = 2
    # [2,6]: 2 -> -4, zero at 2/(2+4) = 1/3 of the width 4 = 4/3; triangle 0.5 * 4/3 * 2 = 4/3
    # AUC+ = 2 + 4/3 = 10/3
    assert auc_plus(pts) == pytest.approx(10.0 / 3.0)


def test_curve_never_above_y0_has_zero_auc():
    pts = [(0, 5.0), (3, 2.0), (6, 5.0)]
    m = curve_metrics(pts, eps=1.0)
    assert m.auc_plus == 0.0
    assert m.naba == 0.0
    assert m.final_delta == 0.0


def test_unequal_spacing_and_unsorted_input():
    pts = [(5, 3.0), (0, 1.0), (10, 6.0), (1, 3.0)]
    # sorted: (0,1) (1,3) (5,3) (10,6); d = 0, 2, 2, 5
    # [0,1]: 1*(0+2)/2 = 1; [1,5]: 4*(2+2)/2 = 8; [5,10]: 5*(2+5)/2 = 17.5 -> 26.5
    m = curve_metrics(pts, eps=1.0)
    assert m.auc_plus == pytest.approx(26.5)
    assert m.naba == pytest.approx(26.5)  # / max(1, 1)
    assert m.y0 == 1.0 and m.final == 6.0


def test_interior_missing_checkpoint_is_bridged():
    pts = [(0, 2.0), (3, None), (6, 4.0)]
    # the line runs from (0,2) to (6,4): d = 0 -> 2 over width 6: 6*2/2 = 6
    # (a present (3, 0) would instead give d = 0, -2, 2: [0,3] -> 0, [3,6] crosses at 4.5,
    #  triangle 0.5 * 1.5 * 2 = 1.5, so a missing point is not treated as a zero)
    m = curve_metrics(pts, eps=1.0)
    assert m.auc_plus == pytest.approx(6.0)
    assert m.avg == pytest.approx(3.0)  # (2+4)/2, missing skipped
    assert m.max == pytest.approx(4.0)
    assert (m.n, m.missing) == (2, 1)
    assert auc_plus([(0, 2.0), (3, 0.0), (6, 4.0)]) == pytest.approx(1.5)


def test_trailing_missing_checkpoint_is_not_extrapolated():
    pts = [(0, 2.0), (3, 4.0), (6, None)]
    # integral stops at x = 3: 3*(0+2)/2 = 3
    m = curve_metrics(pts, eps=1.0)
    assert m.auc_plus == pytest.approx(3.0)
    assert m.final == 4.0 and m.final_delta == pytest.approx(2.0)


def test_missing_y0_makes_relative_metrics_undefined():
    pts = [(0, None), (3, 4.0), (6, 6.0)]
    m = curve_metrics(pts, eps=1.0)
    assert m.y0 is None
    assert m.auc_plus is None and m.naba is None and m.final_delta is None
    assert m.why == {"y0": NO_Y0, "auc_plus": NO_Y0, "naba": NO_Y0, "final_delta": NO_Y0}
    assert m.avg == pytest.approx(5.0)
    assert m.max == pytest.approx(6.0)
    assert m.final == pytest.approx(6.0)


def test_naba_with_zero_y0_uses_eps():
    pts = [(0, 0.0), (3, 3.0), (6, 3.0)]
    # d = 0, 3, 3: 3*3/2 + 3*(3+3)/2 = 4.5 + 9 = 13.5
    m = curve_metrics(pts, eps=0.25)  # e.g. 1/mines with 4 mines
    assert m.auc_plus == pytest.approx(13.5)
    assert m.naba == pytest.approx(54.0)  # 13.5 / max(0, 0.25)
    assert naba(13.5, 0.0, 1.0) == pytest.approx(13.5)
    assert naba(13.5, 0.1, 0.25) == pytest.approx(54.0)  # y0 below eps -> eps
    assert naba(13.5, 2.0, 0.25) == pytest.approx(6.75)  # y0 above eps -> y0
    assert naba(None, 2.0, 1.0) is None and naba(1.0, None, 1.0) is None
    with pytest.raises(ValueError):
        naba(1.0, 1.0, 0.0)


def test_negative_y0_trust():
    pts = [(0, -4.0), (3, 2.0), (6, -1.0)]
    # d = 0, 6, 3: 3*(0+6)/2 + 3*(6+3)/2 = 9 + 13.5 = 22.5; NABA = 22.5 / max(-4, 1) = 22.5
    assert game_eps("trust") == 1.0
    m = game_curve_metrics(pts, "trust")
    assert m.auc_plus == pytest.approx(22.5)
    assert m.naba == pytest.approx(22.5)
    assert m.final_delta == pytest.approx(3.0)  # -1 - (-4)
    assert m.avg == pytest.approx(-1.0)  # (-4+2-1)/3


def test_degenerate_curves():
    empty = curve_metrics([], eps=1.0)
    assert empty.avg is None and empty.max is None and empty.auc_plus is None and empty.naba is None
    assert set(empty.why.values()) == {NO_CHECKPOINT} and {"avg", "max", "naba"} <= set(empty.why)
    with pytest.raises(ValueError):
        curve_metrics([(0, 1.0), (0, 2.0)], eps=1.0)


@pytest.mark.parametrize("points", [
    [(0, 3.0)],  # a run with one checkpoint (no exploration)
    [(0, 3.0), (3, None)],  # 1 of 2 checkpoints: a budget-stopped or interrupted sweep
    [(0, 3.0), (3, None), (6, None)],
])
def test_fewer_than_two_checkpoints_leave_auc_and_naba_undefined_not_zero(points):
    # there is no curve to integrate: AUC+ over [x_0, x_0] would be 0 and read as "no gain"
    m = curve_metrics(points, eps=1.0)
    assert m.auc_plus is None and m.naba is None and m.final_delta is None
    assert m.why == {"auc_plus": ONE_CHECKPOINT, "naba": ONE_CHECKPOINT, "final_delta": ONE_CHECKPOINT}
    assert auc_plus(points) is None
    # what is defined stays defined: the one score there is, and how many checkpoints it came from
    assert (m.y0, m.avg, m.max, m.final, m.n) == (3.0, 3.0, 3.0, 3.0, 1)
    assert curve_metrics(points + [(9, 3.0)], eps=1.0).naba == 0.0  # a second point: a real 0
    assert curve_metrics(points + [(9, 3.0)], eps=1.0).why == {}


def test_delta_naba_table():
    pairs = [
        ("tetris", "m1", 10.0, 4.0),         # +6 win
        ("tetris", "m2", 3.0, 5.0),          # -2 loss
        ("tetris", "m3", 2.0 + 1e-12, 2.0),  # +1e-12 tie (not a win)
        ("snake", "m1", 1.0, 2.0),           # -1 loss
        ("snake", "m2", None, 3.0),          # skipped
        ("snake", "m3", 0.0, 0.5),           # -0.5 loss
    ]
    rows = delta_naba_table(pairs)
    assert [r.game for r in rows] == ["tetris", "snake", OVERALL]
    tetris, snake, overall = rows
    assert (tetris.n, tetris.wins, tetris.losses, tetris.ties, tetris.skipped) == (3, 1, 1, 1, 0)
    assert tetris.mean_delta == pytest.approx(4.0 / 3.0)  # (6 - 2 + 1e-12) / 3
    assert (snake.n, snake.wins, snake.losses, snake.ties, snake.skipped) == (2, 0, 2, 0, 1)
    assert snake.mean_delta == pytest.approx(-0.75)  # (-1 - 0.5) / 2
    assert (overall.n, overall.wins, overall.losses, overall.ties, overall.skipped) == (5, 1, 3, 1, 1)
    assert overall.mean_delta == pytest.approx(0.5)  # (6 - 2 + 0 - 1 - 0.5) / 5 = 2.5 / 5


def test_delta_naba_tie_threshold_and_empty_game():
    rows = delta_naba_table([("trust", "a", 1.0 + 5e-9, 1.0), ("trust", "b", 1.0, 1.0 + 1e-12),
                           ("pvz", "a", None, None)])
    trust, pvz, overall = rows
    assert (trust.wins, trust.losses, trust.ties) == (1, 0, 1)  # 5e-9 >= 1e-9 wins; -1e-12 ties
    assert pvz.n == 0 and pvz.mean_delta is None and pvz.skipped == 1
    assert pvz.why == {"mean_delta": NABA_UNDEFINED} and trust.why == {}
    assert overall.n == 2 and overall.skipped == 1


def test_an_undefined_naba_is_neither_a_tie_nor_a_win():
    # History stopped after x = 0: its NABA is undefined (it was 0.0 and made this pair a tie)
    history = curve_metrics([(0, 2.0), (3, None)], eps=1.0).naba
    summary = curve_metrics([(0, 2.0), (3, 2.0)], eps=1.0).naba
    [trust, overall] = delta_naba_table([("trust", "m", summary, history)])
    assert (trust.n, trust.wins, trust.losses, trust.ties, trust.skipped) == (0, 0, 0, 0, 1)
    assert trust.mean_delta is None and overall.mean_delta is None
