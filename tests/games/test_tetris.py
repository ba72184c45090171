"""Rule tests for Tetris (games/tetris)."""

from __future__ import annotations

import collections
import random

import pytest

from s3gym_games import make, reference_policy
from s3gym_games.tetris.game import PIECES, SHAPES, TetrisGame, column_range

EVAL_SEEDS = range(1_000_000, 1_000_050)
EXPLORE_SEEDS = range(0, 50)


def game_with(rows: list[str] | None = None, current: str = "I", next_piece: str = "O",
              mode: str = "explore") -> TetrisGame:
    """A game whose board (rows top to bottom, '*'/'.'; missing top rows are empty) and pieces are
    set directly."""
    game = TetrisGame(mode)
    game.reset(0)
    if rows is not None:
        rows = ["." * game.width] * (game.height - len(rows)) + rows
        game.board = [sum(1 << c for c, ch in enumerate(r) if ch == "*") for r in rows]
    game.current, game.next = current, next_piece
    return game


def rows_of(game: TetrisGame) -> list[str]:
    return list(game.view().board)


# ----- shapes ------------------------------------------------------------------------------------

EXPECTED_SHAPES = {
    "I": [("####",), ("#", "#", "#", "#"), ("####",), ("#", "#", "#", "#")],
    "O": [("##", "##")] * 4,
    "T": [(".#.", "###"), ("#.", "##", "#."), ("###", ".#."), (".#", "##", ".#")],
    "S": [(".##", "##."), ("#.", "##", ".#"), (".##", "##."), ("#.", "##", ".#")],
    "Z": [("##.", ".##"), (".#", "##", "#."), ("##.", ".##"), (".#", "##", "#.")],
    "J": [("#..", "###"), ("##", "#.", "#."), ("###", "..#"), (".#", ".#", "##")],
    "L": [("..#", "###"), ("#.", "#.", "##"), ("###", "#.."), ("##", ".#", ".#")],
}


def test_rotation_shapes_are_clockwise_and_normalised():
    assert set(SHAPES) == set(PIECES) == set(EXPECTED_SHAPES)
    for piece, expected in EXPECTED_SHAPES.items():
        shapes = SHAPES[piece]
        assert [s.rotation for s in shapes] == [0, 90, 180, 270]
        assert [s.drawing for s in shapes] == expected
        for s in shapes:
            assert sum(m.bit_count() for m in s.rows) == 4
            assert s.rows[0] != 0 and any(m & 1 for m in s.rows)  # top-left of the bounding box
            assert s.height == len(s.rows) and all(m < (1 << s.width) for m in s.rows)


@pytest.mark.parametrize("mode, piece, rotation, lo, hi", [
    ("explore", "I", 0, 1, 7), ("explore", "I", 90, 1, 10), ("eval", "I", 0, 1, 5),
    ("eval", "I", 90, 1, 8), ("explore", "O", 0, 1, 9), ("explore", "T", 0, 1, 8),
    ("explore", "T", 90, 1, 9), ("eval", "J", 180, 1, 6), ("eval", "L", 270, 1, 7),
])
def test_column_range_per_rotation(mode, piece, rotation, lo, hi):
    game = game_with(current=piece, mode=mode)
    shape = SHAPES[piece][rotation // 90]
    assert column_range(shape, game.width) == (lo, hi)
    assert game.step(f"{hi} {rotation}").valid
    game = game_with(current=piece, mode=mode)
    result = game.step(f"{hi + 1} {rotation}")
    assert not result.valid
    assert f"column {hi + 1} is off the board ({lo}-{hi} for this rotation)" in result.feedback
    assert not game_with(current=piece, mode=mode).step(f"0 {rotation}").valid


# ----- drops and clears --------------------------------------------------------------------------

def test_hard_drop_lands_on_the_stack_and_cannot_slide_under_overhangs():
    game = game_with(["**........",
                      "..........",
                      ".........."], current="I")
    game.step("1 90")  # vertical I in column 1 stops on the overhang
    assert rows_of(game)[-7:] == ["*.........", "*.........", "*.........", "*.........",
                                  "**........", "..........", ".........."]
    game = game_with(current="T")
    game.step("4 180")  # T pointing down: its middle cell reaches the floor
    assert rows_of(game)[-2:] == ["...***....", "....*....."]


def test_single_line_clear():
    game = game_with(["*********."], current="I")
    result = game.step("10 90")
    assert result.reward == 1.0 and game.score() == 1.0 and "1 row cleared" in result.feedback
    assert rows_of(game)[-3:] == [".........*"] * 3
    assert rows_of(game)[0] == ".........."


def test_four_line_clear():
    game = game_with(["*********."] * 4, current="I")
    result = game.step("10 90")
    assert result.reward == 4.0 and game.score() == 4.0
    assert rows_of(game) == [".........."] * 10


def test_non_contiguous_rows_clear_and_the_rest_shifts_down():
    game = game_with(["*********.",
                      "*.******..",
                      "*********.",
                      "**.*****.."], current="I")
    result = game.step("10 90")
    assert result.reward == 2.0
    assert rows_of(game) == [".........."] * 8 + ["*.******.*", "**.*****.*"]


def test_lines_accumulate_over_steps():
    game = game_with(["*********.", "*********."], current="O", next_piece="O")
    game.board[-1] &= ~(1 << 8)
    game.board[-2] &= ~(1 << 8)  # columns 9-10 empty in the two bottom rows
    assert game.step("9 0").reward == 2.0
    assert game.score() == 2.0 and rows_of(game) == [".........."] * 10


def test_top_out_terminates_without_placing():
    stack = ["....*....."] * 9
    game = game_with(stack, current="I")
    before = rows_of(game)
    result = game.step("5 90")  # a vertical I on a 9-high column sticks out by 3 rows
    assert result.terminated and result.reward == 0.0 and "Top-out" in result.feedback
    assert rows_of(game) == before and game.topped_out and game.done
    assert game.step("1 0").info.get("over")


def test_drop_that_exactly_fills_the_top_row_is_not_a_top_out():
    game = game_with(["....*....."] * 6, current="I")
    result = game.step("5 90")  # exactly rows 1-4
    assert result.valid and not result.terminated
    assert rows_of(game)[0] == "....*....."


def test_top_out_even_if_the_drop_would_complete_rows():
    rows = ["*********.", "*********.", ".........*"] + [".........."] * 7
    game = game_with(rows, current="I")
    result = game.step("10 90")  # the vertical I rests on row 3: rows 1-2 would be full, but
    assert result.terminated and result.reward == 0.0  # two of its cells stick out above
    assert game.score() == 0.0 and rows_of(game) == rows


# ----- actions -----------------------------------------------------------------------------------

@pytest.mark.parametrize("text", ["3 90", "3,90", "3, 90", "(3, 90)", "[3 90]", "3 90°", "3 90 °",
                                  "3 90deg", "3 90 degrees", "column 3 rotation 90",
                                  "Column 3, Rotation 90", "col 3 rot 90", "  3   90. ", "3;90"])
def test_action_spellings(text):
    game = game_with(current="T")
    result = game.step(text)
    assert result.valid, result.feedback
    assert rows_of(game)[-3:] == ["..*.......", "..**......", "..*......."]


@pytest.mark.parametrize("text", ["", "3", "3 45", "3 360", "3 -90", "three ninety", "3 90 1",
                                  "90° 3 x", "3\u00a090\u00a0x", "\u0663 90", "x" * 5000, "3 90%"])
def test_invalid_actions_cost_the_step_and_keep_the_piece(text):
    for mode in ("explore", "eval"):
        game = game_with(current="T", next_piece="S", mode=mode)
        before = rows_of(game)
        result = game.step(text)
        assert not result.valid and result.reward == 0.0 and not result.terminated
        assert result.feedback.startswith("Invalid") and result.feedback.isascii()
        assert len(result.feedback) < 200
        assert game.steps == 1 and game.current == "T" and game.next == "S"
        assert rows_of(game) == before


def test_bad_rotation_feedback():
    result = game_with().step("3 45")
    assert "rotation 45 is not one of 0, 90, 180, 270" in result.feedback


# ----- pieces and preview ------------------------------------------------------------------------

def test_preview_becomes_current():
    game = make("tetris", "explore")
    game.reset(11)
    for _ in range(20):
        upcoming = game.next
        assert f"Next piece: {upcoming}" in game.observation()
        game.step("1 90")  # vertical pieces in column 1 fill it up quickly
        if game.done:
            break
        assert game.current == upcoming
        assert game.observation().count(f"Current piece: {upcoming}") == 1


def test_piece_sequence_is_seeded_and_uniform():
    def sequence(seed):
        game = make("tetris", "explore")
        game.reset(seed)
        out = [game.current]
        while not game.done and len(out) < 30:
            game.board = [0] * game.height  # keep room: only the piece sequence matters here
            game.step("1 0")
            out.append(game.current)
        return out

    assert sequence(5) == sequence(5)
    assert sequence(5) != sequence(6)
    counts = collections.Counter(p for seed in range(200) for p in sequence(seed))
    total = sum(counts.values())
    assert set(counts) == set(PIECES)
    assert all(abs(c / total - 1 / 7) < 0.03 for c in counts.values())


def test_observation_layout():
    game = make("tetris", "eval")
    obs = game.reset(1_000_000)
    lines = obs.split("\n")
    assert lines[0] == "Board (8 columns x 8 rows, * filled, . empty):"
    assert lines[1] == "    1 2 3 4 5 6 7 8"
    assert lines[2:10] == ["   |. . . . . . . .|"] * 8
    assert lines[11] == f"Current piece: {game.current}"
    assert lines[12].split() == ["rotation", "0:", "rotation", "90:", "rotation", "180:",
                                 "rotation", "270:"]
    assert f"Next piece: {game.next}" in obs
    assert obs.isascii() and all(line == line.rstrip() for line in lines)
    view = game.view()
    assert view.board == ("........",) * 8 and view.current == game.current
    assert view.next == game.next and (view.width, view.height) == (8, 8)


def test_grammar_lists_the_legal_columns_per_rotation():
    game = game_with(current="T")
    grammar = game.action_grammar()
    assert '"8") " " ("0" | "180")' in grammar and '"9") " " ("90" | "270")' in grammar
    assert '"10"' not in grammar


def test_step_cap_and_score_range():
    game = game_with(current="T")
    for _ in range(63):
        assert not game.step("0 0").done
    assert game.step("0 0").truncated
    assert TetrisGame.score_range("explore") == (0.0, 25.0)
    assert TetrisGame.score_range("eval") == (0.0, 32.0)
    assert TetrisGame.score_eps("eval") == 1.0


def test_snapshot_restore_round_trip():
    game = make("tetris", "explore")
    game.reset(42)
    policy = reference_policy("tetris")
    for _ in range(10):
        game.step(policy.act(game.view()).action)
    snap = game.snapshot()
    tail = [game.step(policy.act(game.view()).action) for _ in range(10)]
    game.restore(snap)
    again = [game.step(policy.act(game.view()).action) for _ in range(10)]
    assert [(r.observation, r.feedback, r.reward) for r in tail] == \
        [(r.observation, r.feedback, r.reward) for r in again]


# ----- reference policy ---------------------------------------------------------------------------

def _run(mode, seeds, chooser):
    scores = []
    for seed in seeds:
        game = make("tetris", mode)
        game.reset(seed)
        while not game.done:
            game.step(chooser(game))
        scores.append(game.score())
    return scores


@pytest.mark.parametrize("mode, seeds, floor", [("eval", EVAL_SEEDS, 25.0),
                                                ("explore", EXPLORE_SEEDS, 20.0)])
def test_reference_policy_clearly_beats_random(mode, seeds, floor):
    policy = reference_policy("tetris")
    ref = _run(mode, seeds, lambda g: policy.act(g.view()).action)
    rng = random.Random(7)
    rand = _run(mode, seeds, lambda g: g.sample_action(rng))
    ref_mean, rand_mean = sum(ref) / len(ref), sum(rand) / len(rand)
    print(f"\ntetris {mode}: reference mean rows {ref_mean:.2f} (min {min(ref):.0f}), "
          f"random mean rows {rand_mean:.2f} over {len(ref)} seeds")
    assert ref_mean >= floor
    assert ref_mean >= rand_mean + 15


def test_reference_self_score_is_the_exact_reward():
    policy = reference_policy("tetris")
    for seed in EVAL_SEEDS[:10]:
        game = make("tetris", "eval")
        game.reset(seed)
        while not game.done:
            move = policy.act(game.view())
            result = game.step(move.action)
            assert result.valid and result.reward == move.expected_reward
