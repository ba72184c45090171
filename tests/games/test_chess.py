"""Rule, parsing, scoring and policy tests for the Chess (hidden-rule prediction) game."""

from __future__ import annotations

import io
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from s3gym_games import make, reference_policy
from s3gym_games.chess.game import (
    DIAGONALS, FAMILIES, HISTORY, KING, PATROL_SHAPES, SMALL_STEPS, WRAP_STEPS, ChessGame, ChessView,
    bounce_step, candidate_cells, candidate_moves, parse_prediction, patrol_perimeter, patrol_phases,
    patrol_step,
)
from s3gym_games.chess.policy import ChessPolicy, piece_tracks

N = 15
EVAL_SEEDS = range(1_000_000, 1_000_050)
EXPLORE_SEEDS = range(0, 50)


def new(mode: str = "explore", seed: int = 0) -> ChessGame:
    game = make("chess", mode)
    game.reset(seed)
    return game


def truth_answer(game: ChessGame) -> str:
    """The exactly right prediction for the next board, from the hidden trajectories."""
    t = game.now + 1
    return ", ".join(f"{p}:({game.traj[p][t][0]},{game.traj[p][t][1]})" for p in game.pieces)


def follow_rule(rule: tuple, start: tuple[int, int], horizon: int) -> list[tuple[int, int]]:
    """Re-derive a trajectory from a hidden rule description (independent of the generator)."""
    family = rule[0]
    cells = [start]
    if family == "stationary":
        return cells * horizon
    if family in ("fixed", "cycle"):
        steps = rule[1]
        for t in range(horizon - 1):
            dr, dc = steps[t % len(steps)]
            cells.append((cells[-1][0] + dr, cells[-1][1] + dc))
        return cells
    if family == "bounce":
        vel = rule[1]
        cur = start
        for _ in range(horizon - 1):
            cur, vel = bounce_step(cur, vel, N)
            cells.append(cur)
        return cells
    if family == "wrap":
        dr, dc = rule[1]
        for _ in range(horizon - 1):
            cells.append(((cells[-1][0] + dr) % N, (cells[-1][1] + dc) % N))
        return cells
    assert family == "patrol"
    r0, c0, h, w, cw = rule[1]
    cur = start
    for _ in range(horizon - 1):
        cur = patrol_step(cur, r0, r0 + h, c0, c0 + w, cw)
        cells.append(cur)
    return cells


# ----- movement rules ------------------------------------------------------------------------------

def test_bounce_reverses_the_leaving_component_first():
    # on the bottom row moving down-right: row component flips, then the move happens
    assert bounce_step((14, 5), (1, 1), N) == ((13, 6), (-1, 1))
    # on the right column moving up-right: column flips
    assert bounce_step((7, 14), (-1, 1), N) == ((6, 13), (-1, -1))
    # in a corner both flip
    assert bounce_step((0, 0), (-1, -1), N) == ((1, 1), (1, 1))
    assert bounce_step((14, 14), (1, 1), N) == ((13, 13), (-1, -1))
    # away from walls it just moves
    assert bounce_step((5, 5), (1, -1), N) == ((6, 4), (1, -1))
    # reaching the wall is fine; only the step after it reflects
    assert bounce_step((13, 3), (1, 1), N) == ((14, 4), (1, 1))


def test_bounce_trajectory_and_inference():
    cur, vel = (11, 2), (1, 1)
    path = [cur]
    for _ in range(7):
        cur, vel = bounce_step(cur, vel, N)
        path.append(cur)
    assert path == [(11, 2), (12, 3), (13, 4), (14, 5), (13, 6), (12, 7), (11, 8), (10, 9)]
    # before the wall: the window is a straight diagonal that ends on row 14; only a bounce fits
    window = [(8, 0), (9, 1), (10, 2), (11, 3), (12, 4), (13, 5), (14, 6)]
    assert candidate_moves(window, N) == [("bounce", (13, 7))]
    assert candidate_cells(path[:7], N) == [path[7]]


def test_wrap_drift_is_modular_and_inferred():
    # (0, 2) drift crossing the right edge: raw column step -13 is the same drift modulo 15
    window = [(4, 8), (4, 10), (4, 12), (4, 14), (4, 1), (4, 3), (4, 5)]
    assert candidate_moves(window, N) == [("wrap", (4, 7))]
    # about to cross for the first time: a one-cell orthogonal drift can only be a wrap
    window = [(3, 8), (3, 9), (3, 10), (3, 11), (3, 12), (3, 13), (3, 14)]
    assert candidate_cells(window, N) == [(3, 0)]
    # (-2, 1) crossing the top edge
    window = [(8, 0), (6, 1), (4, 2), (2, 3), (0, 4), (13, 5), (11, 6)]
    assert candidate_cells(window, N) == [(9, 7)]
    # one-cell diagonals are bounce moves, never wrap drifts
    assert all(abs(dr) != 1 or abs(dc) != 1 for dr, dc in WRAP_STEPS)
    assert len(WRAP_STEPS) == len(SMALL_STEPS) - 4


def test_fixed_step_never_leaves_the_board():
    # a fixed step would go off the board, so it is not a hypothesis; the same line is a wrap
    window = [(8, 8), (9, 8), (10, 8), (11, 8), (12, 8), (13, 8), (14, 8)]
    assert candidate_moves(window, N) == [("wrap", (0, 8))]
    window = [(1, 1), (2, 2), (3, 3), (4, 4), (5, 5), (6, 6), (7, 7)]
    assert candidate_cells(window, N) == [(8, 8)]  # fixed and bounce agree
    families = {f for f, _ in candidate_moves(window, N)}
    assert families == {"fixed", "bounce"}


def test_stationary():
    window = [(6, 6)] * HISTORY
    assert candidate_moves(window, N) == [("stationary", (6, 6))]


def test_cycle_knight_alternation_and_longer_cycles():
    steps = [(2, 1), (-2, 1)]
    cells = [(5, 0)]
    for t in range(7):
        dr, dc = steps[t % 2]
        cells.append((cells[-1][0] + dr, cells[-1][1] + dc))
    assert cells[:7] == [(5, 0), (7, 1), (5, 2), (7, 3), (5, 4), (7, 5), (5, 6)]
    assert candidate_moves(cells[:7], N) == [("cycle", (7, 7))]
    # a 3-cycle and a closed 4-cycle, seen from a shifted phase
    for cyc, start in ((((1, 2), (1, -1), (-2, 0)), (6, 6)), (((0, 2), (2, 0), (0, -1), (-2, -1)), (3, 3))):
        cells = [start]
        for t in range(1, 12):
            dr, dc = cyc[t % len(cyc)]
            cells.append((cells[-1][0] + dr, cells[-1][1] + dc))
        for i in range(5):
            assert candidate_cells(cells[i:i + 7], N) == [cells[i + 7]]
    # a cycle that would step off the board is not a hypothesis
    window = [(13, 0), (14, 1), (13, 2), (14, 3), (13, 4), (14, 5), (13, 6)]
    assert ("cycle", (14, 7)) in candidate_moves(window, N)
    window = [(14, 0), (12, 1), (14, 2), (12, 3), (14, 4), (12, 5), (14, 6)]
    assert candidate_moves(window, N) == [("cycle", (12, 7))]


def test_patrol_loops_clockwise_and_counterclockwise():
    r0, c0, h, w = 2, 3, 2, 2
    loop = patrol_perimeter(r0, c0, h, w)
    assert loop == [(2, 3), (2, 4), (2, 5), (3, 5), (4, 5), (4, 4), (4, 3), (3, 3)]
    cur = loop[0]
    for i in range(1, 17):
        cur = patrol_step(cur, r0, r0 + h, c0, c0 + w, True)
        assert cur == loop[i % len(loop)]
    cur = loop[0]
    for i in range(1, 17):
        cur = patrol_step(cur, r0, r0 + h, c0, c0 + w, False)
        assert cur == loop[-i % len(loop)]
    # a 3x3-apart square seen from mid-edge: the next cell is pinned down
    loop = patrol_perimeter(5, 5, 3, 3)
    window = [loop[i % 12] for i in range(4, 11)]
    assert candidate_moves(window, N) == [("patrol", loop[11])]
    # one-cell-thick strip (1,3), counter-clockwise
    loop = patrol_perimeter(9, 1, 1, 3)
    seq = [loop[-i % 8] for i in range(12)]
    for i in range(5):
        assert candidate_cells(seq[i:i + 7], N) == [seq[i + 7]]


def test_patrol_shapes_are_all_identifiable_at_every_phase():
    for h, w in PATROL_SHAPES:
        for cw in (True, False):
            assert patrol_phases(h, w, cw, 5) == tuple(range(2 * (h + w)))


def test_reversal_or_mixed_turns_are_not_patrols():
    # right, down, right: a clockwise then a counter-clockwise turn
    window = [(2, 2), (2, 3), (3, 3), (3, 4), (4, 4), (4, 5), (5, 5)]
    assert all(f != "patrol" for f, _ in candidate_moves(window, N))
    assert candidate_moves(window, N) == [("cycle", (5, 6))]


# ----- generation ----------------------------------------------------------------------------------

@pytest.mark.parametrize("mode", ["explore", "eval"])
def test_generation_never_puts_two_pieces_on_one_cell(mode):
    game = make("chess", mode)
    for seed in range(400):
        game.reset(seed)
        assert len(game.pieces) == game.config.pieces
        assert game.horizon == HISTORY + game.max_steps == 12
        for t in range(game.horizon):
            cells = [game.traj[p][t] for p in game.pieces]
            assert len(set(cells)) == len(cells), (seed, t)
            assert all(0 <= r < N and 0 <= c < N for r, c in cells)


@pytest.mark.parametrize("mode", ["explore", "eval"])
def test_trajectories_follow_their_hidden_rules_and_are_identifiable(mode):
    game = make("chess", mode)
    seen = {f: 0 for f in FAMILIES}
    for seed in range(300):
        game.reset(seed)
        for p in game.pieces:
            rule, traj = game.hidden_rules[p], game.traj[p]
            seen[rule[0]] += 1
            assert list(traj) == follow_rule(rule, traj[0], game.horizon)
            if rule[0] == "fixed":
                assert rule[1][0] in KING
            if rule[0] == "cycle":
                assert 2 <= len(rule[1]) <= 4 and all(s in SMALL_STEPS for s in rule[1])
            if rule[0] == "bounce":
                assert rule[1] in DIAGONALS
            if rule[0] == "wrap":
                assert rule[1] in WRAP_STEPS
            if rule[0] == "patrol":
                assert rule[1][2:4] in PATROL_SHAPES
            for i in range(game.max_steps):
                assert candidate_cells(traj[i:i + HISTORY], N) == [traj[i + HISTORY]], (seed, p, rule)
    assert all(count > 100 for count in seen.values()), seen


def test_letters_distinct_case_sensitive_and_deterministic():
    game = new("eval", 1_000_003)
    assert len(set(game.pieces)) == 22
    assert all(re.fullmatch("[A-Za-z]", p) for p in game.pieces)
    assert list(game.pieces) == sorted(game.pieces)
    cases = {new("eval", s).pieces for s in range(30)}
    assert any(any(p.isupper() for p in ps) and any(p.islower() for p in ps) for ps in cases)
    a, b = new("eval", 77), new("eval", 77)
    assert a.observation() == b.observation() and a.traj == b.traj
    assert new("eval", 78).observation() != a.observation()


def test_generation_is_fast():
    import time
    game = make("chess", "eval")
    game.reset(0)
    start = time.perf_counter()
    for seed in range(200):
        game.reset(seed)
    per_reset = (time.perf_counter() - start) / 200
    assert per_reset < 0.02  # typically well under 1 ms


# ----- observation and view ------------------------------------------------------------------------

def test_observation_layout_and_view_match():
    game = new("explore", 5)
    obs = game.observation()
    lines = obs.splitlines()
    assert lines[0].startswith("Predictions made: 0 of 5.")
    labels = [ln[:-1] for ln in lines if re.fullmatch(r"t(-\d)?0?:", ln)]
    assert labels == ["t-6", "t-5", "t-4", "t-3", "t-2", "t-1", "t0"]
    assert obs.isascii()
    view = game.view()
    assert isinstance(view, ChessView)
    assert view.labels == tuple(labels) and len(view.boards) == HISTORY
    assert view.pieces == game.pieces and view.predictions_made == 0
    tracks = piece_tracks(view)
    for p in game.pieces:
        assert tracks[p] == list(game.traj[p][:HISTORY])
    # the board text in the observation shows the same cells as the view
    t0 = lines.index("t0:")
    for r in range(N):
        row = lines[t0 + 2 + r].split()
        assert row[0] == str(r) and "".join(row[1:]) == view.boards[-1][r]
    assert f"Pieces to predict (12): {' '.join(game.pieces)}" in obs
    # the view carries no hidden rule information
    assert set(vars(view)) == {"size", "predictions_made", "max_steps", "labels", "boards", "pieces"}


def test_history_slides_after_each_prediction():
    game = new("eval", 1_000_001)
    before = game.view()
    game.step("junk")
    after = game.view()
    assert after.boards[:-1] == before.boards[1:]
    assert after.predictions_made == 1
    assert after.boards[-1] == game._board(HISTORY)


def test_render_has_the_boards():
    game = new("eval", 1_000_002)
    console = Console(record=True, width=200, file=io.StringIO())
    console.print(game.render())
    text = console.export_text()
    assert "t-6" in text and "t0" in text and game.pieces[0] in text


# ----- parsing -------------------------------------------------------------------------------------

PIECES = ("A", "a", "B", "z")


def test_parse_canonical_and_variants():
    want = {"A": (3, 4), "a": (0, 12), "z": (14, 0)}
    for text in (
        "A:(3,4), a:(0,12), z:(14,0)",
        "A:(3,4),a:(0,12),z:(14,0)",
        "A:(3, 4), a: (0,12) ,z:( 14 , 0 )",
        "z:(14,0), A:(3,4), a:(0,12)",
        "A (3,4) a (0,12) z (14,0)",
        "A=(3,4); a=(0,12); z=(14,0)",
        "A:[3,4], a:[0,12], z:[14,0]",
        "A:3,4, a:0,12, z:14,0",
        "A 3 4, a 0 12, z 14 0",
        "A:(3,4)a:(0,12)z:(14,0)",
        "A:(3 4), a:(0 12), z:(14 0),",
    ):
        preds, why = parse_prediction(text, PIECES, N)
        assert preds == want, (text, why)
    preds, _ = parse_prediction("B:(1,1)", PIECES, N)
    assert preds == {"B": (1, 1)}  # omitting pieces is fine


@pytest.mark.parametrize("text,reason", [
    ("A:(3,4), A:(5,6)", "named twice"),
    ("A:(3,4), A:(3,4)", "named twice"),
    ("C:(1,1)", "no piece 'C'"),
    ("b:(1,1)", "case-sensitive"),
    ("Z:(1,1)", "case-sensitive"),
    ("A:(3,4", "could not read"),
    ("A:(3)", "could not read"),
    ("A:(3,4,5)", "could not read"),
    ("A:(x,4)", "could not read"),
    ("A:(34)", "could not read"),
    ("A:(3,4) and more", "could not read"),
    ("A:(3,4),, a:(1,1)", "could not read"),
    (":(3,4)", "could not read"),
    ("AB:(3,4)", "could not read"),
    ("A:(15,0)", "off the board"),
    ("A:(0,99)", "off the board"),
    ("A:(-1,0)", "off the board"),
    ("A:(\u0663,4)", "could not read"),
    ("", "empty"),
    ("A:(1,1), " * 400, "too long"),
])
def test_parse_rejects(text, reason):
    preds, why = parse_prediction(text, PIECES, N)
    assert preds is None and reason in why, (text, why)


def test_invalid_answer_scores_zero_and_world_advances_in_both_modes():
    for mode in ("explore", "eval"):
        game = new(mode, 11)
        first = game.pieces[0]
        before = game.now
        result = game.step(f"{first}:(1,1), {first}:(2,2)")
        assert not result.valid and result.reward == 0.0
        assert result.feedback.startswith("Invalid action:") and "named twice" in result.feedback
        assert game.now == before + 1 and game.tick == 1 and not result.done
        # unknown letter makes even a partly right answer invalid
        result = game.step(truth_answer(game) + ", #:(1,1)")
        assert not result.valid and result.reward == 0.0
        missing = next(ch for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
                       if ch not in game.pieces)
        result = game.step(truth_answer(game) + f", {missing}:(1,1)")
        assert not result.valid and result.reward == 0.0 and repr(missing) in result.feedback
        assert game.tick == 3


def test_feedback_is_bounded_for_huge_and_odd_input():
    game = new("eval", 3)
    for junk in ("x" * 100_000, "\x00\x01\u2603 A:(1,1)", "🙂:(1,1)", "A:(" + "9" * 50 + ",1)", "\n\t"):
        result = game.step(junk)
        assert not result.valid and len(result.feedback) < 400
        if game.done:
            game.reset(3)


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80))
def test_any_text_never_raises(text):
    game = new("eval", 12)
    result = game.step(text)
    assert isinstance(result.feedback, str) and 0.0 <= result.reward <= 1.0
    if not result.valid:
        assert result.reward == 0.0


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("AaBzq"), st.integers(-3, 20), st.integers(-3, 20)), max_size=6),
       st.sampled_from([",", ", ", ";", " ", ""]))
def test_parse_structured_fuzz(pairs, sep):
    text = sep.join(f"{p}:({r},{c})" for p, r, c in pairs)
    preds, why = parse_prediction(text, PIECES, N)
    letters = [p for p, _, _ in pairs]
    ok = (bool(pairs) and len(set(letters)) == len(letters) and all(p in PIECES for p in letters)
          and all(0 <= r < N and 0 <= c < N for _, r, c in pairs))
    if ok:
        assert preds == {p: (r, c) for p, r, c in pairs}, why
    else:
        assert preds is None and why


# ----- scoring -------------------------------------------------------------------------------------

def test_step_reward_is_fraction_of_all_pieces_and_score_divides_by_max_steps():
    game = new("eval", 1_000_010)
    k = len(game.pieces)
    t = game.now + 1
    right = [f"{p}:{game.traj[p][t]}".replace(" ", "") for p in game.pieces]
    wrong_p = game.pieces[0]
    r, c = game.traj[wrong_p][t]
    wrong = f"{wrong_p}:({(r + 1) % N},{c})"
    # all right
    res = game.step(", ".join(right))
    assert res.valid and res.reward == 1.0
    # 5 right of 22, the rest omitted
    t = game.now + 1
    five = [f"{p}:{game.traj[p][t]}".replace(" ", "") for p in game.pieces[1:6]]
    res = game.step(", ".join(five))
    assert res.valid and res.reward == pytest.approx(5 / k)
    # one wrong, others right (order shuffled)
    t = game.now + 1
    rest = [f"{p}:{game.traj[p][t]}".replace(" ", "") for p in game.pieces[1:]]
    r, c = game.traj[wrong_p][t]
    wrong = f"{wrong_p}:({(r + 1) % N},{c})"
    res = game.step(", ".join(reversed(rest + [wrong])))
    assert res.valid and res.reward == pytest.approx((k - 1) / k)
    # END stops early; the remaining predictions earn nothing
    res = game.step("end")
    assert res.terminated and game.done
    assert game.score() == pytest.approx((1 + 5 / k + (k - 1) / k) / 5)
    assert ChessGame.score_eps("eval") == pytest.approx(1 / 22)
    assert ChessGame.score_eps("explore") == pytest.approx(1 / 12)
    assert ChessGame.score_range("eval") == (0.0, 1.0)


def test_episode_lasts_max_steps_and_truth_scores_one():
    game = new("explore", 8)
    steps = 0
    while not game.done:
        res = game.step(truth_answer(game))
        steps += 1
        assert res.reward == 1.0
    assert steps == 5 and game.terminated and not game.truncated and game.score() == pytest.approx(1.0)
    assert game.observation().startswith("Predictions made: 5 of 5.")


# ----- grammar -------------------------------------------------------------------------------------

def gbnf_to_regex(body: str) -> str:
    out = []
    for tok in re.findall(r'"(?:[^"\\]|\\.)*"|\{\d+,\d*\}|[()|*+?]|\s+', body):
        if tok.startswith('"'):
            out.append(re.escape(tok[1:-1]))
        elif not tok.isspace():
            out.append(tok)
    return "".join(out)


def test_grammar_matches_policy_and_truth_answers():
    game = new("eval", 1_000_020)
    body = game.action_grammar()
    assert "::=" not in body
    pattern = re.compile(gbnf_to_regex(body))
    policy = ChessPolicy()
    assert pattern.fullmatch(policy.act(game.view()).action)
    assert pattern.fullmatch(truth_answer(game))
    missing = next(ch for ch in "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz" if ch not in game.pieces)
    assert not pattern.fullmatch(f"{missing}:(1,1)")
    assert not pattern.fullmatch(f"{game.pieces[0]}:(15,1)")
    assert not pattern.fullmatch(", ".join(reversed(truth_answer(game).split(", "))))  # one canonical order
    rng = random.Random(4)
    for _ in range(50):  # every complete valid answer, written in piece order, is in the grammar
        preds, _ = parse_prediction(game.sample_action(rng), game.pieces, N)
        if preds is not None and len(preds) == len(game.pieces):
            ordered = ", ".join(f"{p}:({preds[p][0]},{preds[p][1]})" for p in game.pieces)
            assert pattern.fullmatch(ordered)


# ----- snapshot / restore --------------------------------------------------------------------------

def test_snapshot_restore_gives_identical_continuations():
    game = new("eval", 1_000_030)
    rng = random.Random(9)
    game.step(game.sample_action(rng))
    game.step(truth_answer(game))
    snap = game.snapshot()
    actions = [game.sample_action(rng), truth_answer(game), "nonsense"]
    first = [game.step(a) for a in actions]
    game.restore(snap)
    second = [game.step(a) for a in actions]
    assert [(r.observation, r.feedback, r.reward, r.done) for r in first] == \
           [(r.observation, r.feedback, r.reward, r.done) for r in second]
    replayed = ChessGame.replay("eval", 1_000_030, game.actions)
    assert replayed.score() == game.score() and replayed.observation() == game.observation()


# ----- reference policy ----------------------------------------------------------------------------

def _run(mode: str, seeds, chooser) -> float:
    game = make("chess", mode)
    total = 0.0
    for seed in seeds:
        game.reset(seed)
        rng = random.Random(seed)
        while not game.done:
            game.step(chooser(game, rng))
        total += game.score()
    return total / len(seeds)


@pytest.mark.parametrize("mode,seeds", [("eval", EVAL_SEEDS), ("explore", EXPLORE_SEEDS)])
def test_reference_policy_level(mode, seeds):
    policy = reference_policy("chess")
    selfscores = []

    def choose(game, rng):
        move = policy.act(game.view())
        selfscores.append(move.expected_reward)
        return move.action

    ref = _run(mode, seeds, choose)
    rand = _run(mode, seeds, lambda game, rng: game.sample_action(rng))
    print(f"\nchess {mode}: reference policy mean score {ref:.4f} over {len(seeds)} seeds; "
          f"random policy {rand:.4f}; mean self-score {sum(selfscores) / len(selfscores):.3f}")
    assert ref >= 0.9
    assert ref == pytest.approx(1.0)
    assert rand < 0.05


def test_policy_is_fast():
    import time
    game = new("eval", 1_000_040)
    policy = ChessPolicy()
    view = game.view()
    start = time.perf_counter()
    for _ in range(50):
        policy.act(view)
    assert (time.perf_counter() - start) / 50 < 0.05
