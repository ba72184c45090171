"""Self-judging metrics, checked against hand-computed values (arithmetic in the comments)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from s3gym_tui.engine.glossary import FEW_BLOCKS, NO_STEPS, NO_VARIANCE, R_CONSTANT, S_CONSTANT
from s3gym_tui.engine.judging import (
    Scale, agreement, coupling, game_range_width, group_reports, judging_report, nmae, nmae_why,
    over_confidence, pearson, pearson_why, reports_by_game, reports_by_run, scale_of, split_blocks,
    under_confidence,
)

# (s, r)                     s>0?  r>0?
TABLE = [
    (2.0, 1.0),     # 1   yes   yes  agree
    (1.0, 0.0),     # 2   yes   no   over
    (0.0, 0.0),     # 3   no    no   agree
    (0.0, 3.0),     # 4   no    yes  under
    (None, 10.0),   # 5   missing (its r = 10 must not enter the r bounds)
    (-1.0, 0.0),    # 6   no    no   agree
    (3.0, 3.0),     # 7   yes   yes  agree
    (None, 0.0),    # 8   missing
]


def test_report_on_small_table_with_missing_scores():
    rep = judging_report(TABLE)
    assert (rep.n, rep.missing) == (6, 2)
    assert rep.agreement == pytest.approx(4 / 6)
    assert rep.over == pytest.approx(1 / 6)
    assert rep.under == pytest.approx(1 / 6)
    # s over the 6 judged steps: 2, 1, 0, 0, -1, 3 -> min -1, max 3, width 4
    #   norm s = 3/4, 2/4, 1/4, 1/4, 0, 1
    # r over the same steps: 1, 0, 0, 3, 0, 3 -> min 0, max 3
    #   norm r = 1/3, 0, 0, 1, 0, 1
    # |diff| = 5/12, 6/12, 3/12, 9/12, 0, 0 -> sum 23/12 -> mean 23/72
    assert rep.nmae == pytest.approx(23 / 72)
    assert agreement(TABLE) == pytest.approx(4 / 6)
    assert over_confidence(TABLE) == pytest.approx(1 / 6)
    assert under_confidence(TABLE) == pytest.approx(1 / 6)
    assert nmae(TABLE) == pytest.approx(23 / 72)


def test_a_constant_series_cannot_be_min_max_normalised_so_nmae_is_undefined():
    # norm(v) = (v - min) / (max - min) is 0/0 for a series that never varies. It used to be taken
    # as 0, so a model that always says "Score: 1" got NMAE = mean norm(r), and one whose s and r
    # were both constant got NMAE 0.00, a perfect score it never earned.
    pairs = [(1.0, 0.0), (1.0, 2.0), (1.0, 4.0)]
    assert nmae(pairs) is None and nmae_why(pairs) == (None, S_CONSTANT)
    rep = judging_report(pairs)
    assert rep.nmae is None and rep.why == {"nmae": S_CONSTANT}
    assert rep.agreement == pytest.approx(2 / 3)  # (1,2), (1,4) agree; (1,0) over: still defined
    assert rep.over == pytest.approx(1 / 3) and rep.under == 0.0
    assert nmae_why([(0.0, 5.0), (2.0, 5.0)]) == (None, R_CONSTANT)
    assert nmae_why([(2.0, 5.0), (2.0, 5.0)]) == (None, S_CONSTANT)
    # on a scale where s does vary (e.g. its game's, over other runs' steps) it is defined
    assert nmae(pairs, (0.0, 2.0), (0.0, 4.0)) == pytest.approx((0.5 + 0.0 + 0.5) / 3)
    assert judging_report(pairs, scale=Scale(s=(0.0, 2.0), r=(0.0, 4.0))).why == {}


def test_empty_and_all_missing():
    rep = judging_report([])
    assert (rep.n, rep.missing) == (0, 0)
    assert rep.agreement is None and rep.nmae is None and rep.over is None and rep.under is None
    assert rep.why == dict.fromkeys(("agreement", "nmae", "over", "under"), NO_STEPS)
    rep = judging_report([(None, 1.0), (float("nan"), 0.0)])
    assert (rep.n, rep.missing) == (0, 2) and rep.agreement is None and rep.why["agreement"] == NO_STEPS
    assert scale_of([(None, 1.0)]) == Scale(s=None, r=None, n=0)


def test_grouping_normalises_within_each_group():
    rows = [
        SimpleNamespace(game="snake", run_id="r1", self_score=0.0, reward=0.0),
        SimpleNamespace(game="snake", run_id="r1", self_score=4.0, reward=1.0),
        SimpleNamespace(game="trust", run_id="r2", self_score=1.0, reward=10.0),
        SimpleNamespace(game="trust", run_id="r3", self_score=2.0, reward=20.0),
        SimpleNamespace(game="trust", run_id="r3", self_score=None, reward=20.0),
    ]
    by_game = reports_by_game(rows)
    assert list(by_game) == ["snake", "trust"]
    # snake: s 0,4 -> 0,1; r 0,1 -> 0,1 -> NMAE 0; trust: s 1,2 -> 0,1; r 10,20 -> 0,1 -> NMAE 0
    assert by_game["snake"].nmae == 0.0 and by_game["trust"].nmae == 0.0
    assert by_game["trust"].missing == 1 and by_game["trust"].n == 2
    # pooled: s 0,4,1,2 -> 0, 1, .25, .5; r 0,1,10,20 -> 0, .05, .5, 1
    # |diff| = 0, .95, .25, .5 -> 1.7 / 4 = 0.425
    pooled = judging_report([(r.self_score, r.reward) for r in rows])
    assert pooled.nmae == pytest.approx(0.425)
    by_run = reports_by_run(rows)
    assert list(by_run) == ["r1", "r2", "r3"]
    assert by_run["r3"].n == 1 and by_run["r3"].missing == 1
    # a run is on its game's scale (trust: s 1..2, r 10..20), not on its own steps' (one step each,
    # constant, so undefined): r2 (1, 10) -> |0 - 0| = 0; r3 (2, 20) -> |1 - 1| = 0
    assert by_run["r2"].nmae == 0.0 and by_run["r3"].nmae == 0.0
    assert group_reports(rows, "run_id")["r2"].why == {"nmae": S_CONSTANT}  # each run on its own
    # tuples ending in (s, r), keyed by index or by function
    tuples = [("snake", "r1", 0.0, 0.0), ("snake", "r1", 4.0, 1.0), ("trust", "r2", 1.0, -1.0)]
    by_index = group_reports(tuples, 0)
    assert by_index["trust"].agreement == 0.0  # s > 0, r <= 0: over
    assert by_index["trust"].over == 1.0
    assert group_reports(tuples, lambda t: t[1])["r1"].agreement == 1.0


def _coupling_steps():
    # s, r in {-1, 1}, both values occurring: with run-wide bounds (-1, 1) norm is 0 or 1, so
    # each agreeing step has |diff| 0 and each disagreeing step |diff| 1, i.e. E_t = 1 - A_t.
    P, N, D = (1.0, 1.0), (-1.0, -1.0), (1.0, -1.0)  # agree +, agree -, disagree (over)
    blocks = [
        [N, D, D, D],  # block 0, episodes 0..2: A = 1/4, E = 3/4
        [P, N, D, D],  # block 1, episodes 3..5: A = 2/4, E = 2/4
        [P, N, P, D],  # block 2, episodes 6..8: A = 3/4, E = 1/4
        [P, N, P, N],  # block 3, episodes 9..11: A = 1, E = 0
    ]
    steps = []
    for t, block in enumerate(blocks):
        for i, (s, r) in enumerate(block):
            steps.append((3 * t + i % 3, s, r))
    steps.append((4, None, 5.0))  # missing self-score in block 1: excluded, also from the bounds
    steps.append((12, 100.0, 1.0))  # episode 12 is after the last checkpoint: ignored
    return steps


def test_coupling_perfectly_correlated():
    xs = [0, 3, 6, 9, 12]
    ys = [0.0, 1.0, 3.0, 6.0, 10.0]  # gains 1, 2, 3, 4 -> /40 (Trust range -10..30)
    rep = coupling(list(zip(xs, ys)), _coupling_steps(), (-10.0, 30.0))
    assert [b.agreement for b in rep.blocks] == pytest.approx([0.25, 0.5, 0.75, 1.0])
    assert [b.nmae for b in rep.blocks] == pytest.approx([0.75, 0.5, 0.25, 0.0])
    assert [b.gain for b in rep.blocks] == pytest.approx([0.025, 0.05, 0.075, 0.1])
    assert [b.n for b in rep.blocks] == [4, 4, 4, 4]
    assert rep.blocks[1].missing == 1
    assert rep.n_used == 4
    # A = 0.25 k and g = k / 40 (k = 1..4) are exactly linear: r = 1; -E = A - 1 as well
    assert rep.corr_agreement == pytest.approx(1.0)
    assert rep.corr_neg_nmae == pytest.approx(1.0)


def test_coupling_anti_correlated_with_game_width():
    xs = [0, 3, 6, 9, 12]
    ys = [0.0, 4.0, 7.0, 9.0, 10.0]  # gains 4, 3, 2, 1: falling while A rises
    width = game_range_width("trust")
    assert width == 40.0  # 30 - (-10)
    rep = coupling(list(zip(xs, ys)), _coupling_steps(), width)
    assert [b.gain for b in rep.blocks] == pytest.approx([0.1, 0.075, 0.05, 0.025])
    assert rep.corr_agreement == pytest.approx(-1.0)
    assert rep.corr_neg_nmae == pytest.approx(-1.0)


def test_coupling_undefined_cases():
    steps = _coupling_steps()
    # two blocks only -> None
    rep = coupling([(0, 0.0), (3, 1.0), (6, 2.0)], steps, 40.0)
    assert rep.n_used == 2 and rep.corr_agreement is None and rep.corr_neg_nmae is None
    # missing y at x = 6 removes blocks 1 and 2 (their gains are undefined) -> 2 usable blocks
    rep = coupling([(0, 0.0), (3, 1.0), (6, None), (9, 6.0), (12, 10.0)], steps, 40.0)
    assert [b.gain for b in rep.blocks][1:3] == [None, None]
    assert rep.n_used == 2 and rep.corr_agreement is None
    # constant gains -> zero variance -> None
    rep = coupling([(0, 0.0), (3, 1.0), (6, 2.0), (9, 3.0), (12, 4.0)], steps, 40.0)
    assert rep.n_used == 4 and rep.corr_agreement is None
    with pytest.raises(ValueError):
        coupling([(0, 0.0), (3, 1.0)], steps, (5.0, 5.0))


def test_an_undefined_correlation_says_why():
    steps = _coupling_steps()
    rep = coupling([(0, 0.0), (3, 1.0), (6, 2.0)], steps, 40.0)
    assert rep.why == {"corr_agreement": FEW_BLOCKS, "corr_neg_nmae": FEW_BLOCKS}
    rep = coupling([(0, 0.0), (3, 1.0), (6, 2.0), (9, 3.0), (12, 4.0)], steps, 40.0)  # constant gains
    assert rep.why == {"corr_agreement": NO_VARIANCE, "corr_neg_nmae": NO_VARIANCE}
    rep = coupling([(0, 0.0), (3, 1.0), (6, 3.0), (9, 6.0), (12, 10.0)], steps, 40.0)
    assert rep.why == {} and rep.corr_agreement == pytest.approx(1.0)
    # on a scale where s never varies, no block has an NMAE: corr(-E, g) cannot be computed, while
    # corr(A, g) needs only A_t and g_t and stands (it was — once, for want of the NMAE it does not use)
    flat = Scale(s=(1.0, 1.0), r=(-1.0, 1.0), n=16)
    rep = coupling([(0, 0.0), (3, 1.0), (6, 3.0), (9, 6.0), (12, 10.0)], steps, 40.0, scale=flat)
    assert all(b.nmae is None for b in rep.blocks) and rep.n_used == 4
    assert rep.corr_neg_nmae is None and rep.why == {"corr_neg_nmae": FEW_BLOCKS}
    assert rep.corr_agreement == pytest.approx(1.0)
    assert pearson_why([1, 2, 3], [5, 5, 5]) == (None, NO_VARIANCE)
    assert pearson_why([1, 2], [1, 2]) == (None, FEW_BLOCKS)


def test_split_blocks_and_pearson():
    blocks = split_blocks([0, 2, 5], [(0, 1.0, 1.0), (1, 2.0, 0.0), (2, None, 1.0), (5, 1.0, 1.0)])
    # block 0 = episodes 0,1; block 1 = episodes 2,3,4; episode 5 is past x_K
    assert blocks == [[(1.0, 1.0), (2.0, 0.0)], [(None, 1.0)]]
    # x = 1,2,3; y = 2,4,7: means 2, 13/3; dx = -1,0,1; dy = -7/3,-1/3,8/3
    # cov = 7/3 + 8/3 = 5; sx = sqrt(2); sy = sqrt(49/9 + 1/9 + 64/9) = sqrt(114)/3
    # r = 5 / (sqrt(2) * sqrt(114)/3) = 15 / sqrt(228)
    assert pearson([1, 2, 3], [2, 4, 7]) == pytest.approx(15 / 228 ** 0.5)
    assert pearson([1, 2], [1, 2]) is None
