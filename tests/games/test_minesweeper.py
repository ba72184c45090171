"""Minesweeper: rules, invalid actions, scoring, the reference solver and its level."""

from __future__ import annotations

import io
import itertools
import random
import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from rich.console import Console

from s3gym_games import make, reference_policy, verify_trajectory
from s3gym_games.base import Move, play
from s3gym_games.minesweeper import GAME, POLICY
from s3gym_games.minesweeper.game import NEIGHBOURS, MinesweeperGame, MinesweeperView
from s3gym_games.minesweeper.policy import MinesweeperPolicy, analyse

EVAL_SEEDS = range(1_000_000, 1_000_050)


def board(mode: str, layout: list[str], seed: int = 0) -> MinesweeperGame:
    """A game whose mines are fixed by `layout` (9 strings of 9 chars, '*' = mine)."""
    game = make("minesweeper", mode)
    game.reset(seed)
    game._set_layout([r * 9 + c for r, row in enumerate(layout) for c, ch in enumerate(row) if ch == "*"])
    return game


def grid(game: MinesweeperGame) -> list[str]:
    return list(game.view().grid)


# A board with a big zero region on the left, a wall of mines in column 5 and a pocket on the right.
WALL = [
    "....*....",
    "....*....",
    "....*....",
    "....*....",
    "....*....",
    "....*.*..",
    "....*....",
    "....*....",
    "....*....",
]  # 10 mines


# ----- generation ----------------------------------------------------------------------------
def test_registry_and_exports():
    assert GAME is MinesweeperGame and POLICY is MinesweeperPolicy
    assert isinstance(make("mines", "eval"), MinesweeperGame)
    assert isinstance(reference_policy("minesweeper"), MinesweeperPolicy)


def test_mine_count_drawn_at_reset_and_shown_before_first_uncover():
    counts = set()
    for seed in range(300):
        game = make("minesweeper", "eval")
        obs = game.reset(seed)
        assert 10 <= game.num_mines <= 20 and not game.placed
        assert obs.splitlines()[0] == f"Mines: {game.num_mines}  Flags: 0  Lives: 1"
        counts.add(game.num_mines)
        other = make("minesweeper", "explore")
        other.reset(seed)
        assert other.num_mines == game.num_mines  # same first draw in both modes
    assert counts == set(range(10, 21))


@pytest.mark.parametrize("mode", ["explore", "eval"])
def test_first_click_safety_over_many_seeds(mode):
    rng = random.Random(5)
    for seed in range(400):
        game = make("minesweeper", mode)
        game.reset(seed)
        r, c = rng.randrange(9), rng.randrange(9)
        res = game.step(f"uncover ({r},{c})")
        first = r * 9 + c
        assert res.valid and not res.info.get("mine")
        assert not game.mine[first] and not any(game.mine[j] for j in NEIGHBOURS[first])
        assert sum(game.mine) == game.num_mines
        # the first cell is a 0, so at least it and its neighbours are open
        assert game.cells[first] == "0"
        assert all(game.cells[j] != "?" for j in NEIGHBOURS[first])


def test_numbers_count_the_eight_neighbours():
    game = board("explore", [
        "*.*......",
        ".........",
        "*.*......",
        ".........",
        ".........",
        ".........",
        ".........",
        ".........",
        "........*",
    ])
    assert game.counts[1 * 9 + 1] == 4  # four diagonal/orthogonal neighbours
    assert game.counts[0 * 9 + 1] == 2
    assert game.counts[7 * 9 + 7] == 1
    assert game.counts[8 * 9 + 7] == 1
    game.step("uncover (1,1)")
    assert grid(game)[1][1] == "4"


# ----- flood fill ----------------------------------------------------------------------------
def test_zero_floods_and_reveals_its_numbered_border():
    game = board("explore", WALL)
    res = game.step("uncover (0,0)")
    g = grid(game)
    for r in range(9):
        assert g[r][:3] == "000"  # zeros spread through the whole left region
        assert g[r][3] in "123"  # the numbered border is revealed ...
        assert g[r][4:] == "?????"  # ... and the flood stops there
    assert res.info["opened"] == 36
    assert "opened 36 cells" in res.feedback


def test_numbered_cell_does_not_start_a_flood():
    game = board("explore", WALL)
    game.step("uncover (4,3)")
    g = grid(game)
    assert g[4][3] == "3"
    assert sum(row.count("?") for row in g) == 80


def test_flood_leaves_flags_alone_and_continues_around_them():
    game = board("explore", WALL)
    game.step("uncover (0,3)")  # a numbered cell, to be allowed to flag
    game.step("flag (2,1)")  # a wrong flag in the middle of the zero region
    game.step("uncover (8,0)")
    g = grid(game)
    assert g[2][1] == "F"
    assert g[2][0] == "0" and g[2][2] == "0" and g[1][1] == "0" and g[3][1] == "0"
    assert "Flags: 1" in game.observation()


def test_flood_stops_at_the_pocket():
    game = board("explore", WALL)
    game.step("uncover (0,8)")
    g = grid(game)
    assert g[0][5:] == "2000" and g[3][5:] == "3000" and g[4][5:] == "4110"
    assert g[5][5:] == "??10"  # the pocket mine stays hidden, and so does (5,5): no 0 touches it
    assert g[6][5:] == "4110" and g[8][5:] == "2000"
    assert all(row[4] == "?" for row in g)  # the wall is never crossed


# ----- flags ---------------------------------------------------------------------------------
def test_flag_before_first_uncover_is_allowed_and_mines_are_still_placed_at_the_first_uncover():
    for mode in ("explore", "eval"):
        plain = make("minesweeper", mode)
        plain.reset(3)
        plain.step("uncover (4,4)")
        mines = {i for i in range(81) if plain.mine[i]}
        game = make("minesweeper", mode)
        game.reset(3)
        res = game.step("flag (0,0)")
        assert res.valid and res.reward == 0.0 and not res.done and game.steps == 1
        assert game.flags == 1 and not game.placed
        assert "Flags: 1" in res.observation.splitlines()[0]
        assert not game.view().started  # a flag is not an uncover
        assert '"flag ("' in game.action_grammar() and '"unflag ("' in game.action_grammar()
        res = game.step("uncover (4,4)")
        assert res.valid and game.placed
        assert {i for i in range(81) if game.mine[i]} == mines  # the same draw as without the flag
        assert game.cells[0] == "F"  # a flood never uncovers a flag


def test_an_early_flag_on_a_mine_is_credited_at_the_first_uncover():
    """Find a seed where (0,0) turns out a mine: its early flag becomes correct at the uncover."""
    for seed in range(200):
        probe = make("minesweeper", "explore")
        probe.reset(seed)
        probe.step("uncover (4,4)")
        if probe.mine[0]:
            break
    else:
        pytest.fail("no seed with a mine at (0,0)")
    game = make("minesweeper", "explore")
    game.reset(seed)
    assert game.step("flag (0,0)").reward == 0.0
    res = game.step("uncover (4,4)")
    m = game.num_mines
    assert res.reward == pytest.approx(1 / m) and game.score() == pytest.approx(1 / m)
    assert game.step("unflag (0,0)").reward == pytest.approx(-1 / m) and game.score() == 0.0
    assert verify_trajectory("minesweeper", "explore", seed, ["flag (0,0)", "uncover (4,4)"]) \
        == pytest.approx(1 / m)


def test_the_flag_limit_holds_before_the_first_uncover():
    game = make("minesweeper", "explore")
    game.reset(5)
    m = game.num_mines
    cells = [(r, c) for r in range(9) for c in range(9)]
    for k in range(m):
        assert game.step("flag ({},{})".format(*cells[k])).valid
    res = game.step("flag ({},{})".format(*cells[m]))
    assert not res.valid and "no more flags than mines" in res.feedback


def test_the_reference_policy_opens_next_to_an_early_flag():
    game = make("minesweeper", "eval")
    game.reset(1_000_000)
    game.step("flag (3,3)")  # the policy's usual first cell
    move = reference_policy("minesweeper").act(game.view())
    assert move.action.startswith("uncover") and move.action != "uncover (3,3)"
    assert game.step(move.action).valid


def test_flag_counting_and_limit():
    game = board("explore", WALL)
    game.step("uncover (0,0)")
    targets = [(r, 4) for r in range(9)] + [(5, 6)]
    for k, (r, c) in enumerate(targets, start=1):
        res = game.step(f"flag ({r},{c})")
        assert res.valid and game.flags == k
        assert f"Flags: {k}" in res.observation.splitlines()[0]
    res = game.step("flag (0,8)")  # an 11th flag with 10 mines
    assert not res.valid and "no more flags than mines" in res.feedback
    assert game.flags == 10 and res.reward == 0.0
    res = game.step("unflag (0,4)")
    assert res.valid and game.flags == 9
    assert game.step("flag (0,8)").valid  # the freed flag can go elsewhere


def test_flag_and_unflag_invalid_cases():
    game = board("explore", WALL)
    game.step("uncover (0,0)")
    cases = {
        "flag (0,0)": "uncovered",
        "unflag (0,5)": "no flag",
        "flag (9,0)": "off the board",
        "unflag (0,-1)": "off the board",
    }
    for action, words in cases.items():
        res = game.step(action)
        assert not res.valid and words in res.feedback, (action, res.feedback)
    assert game.step("flag (0,5)").valid
    res = game.step("flag (0,5)")
    assert not res.valid and "already flagged" in res.feedback
    res = game.step("uncover (0,5)")
    assert not res.valid and "flagged" in res.feedback


# ----- score and rewards ---------------------------------------------------------------------
def test_flag_rewards_are_score_deltas():
    game = board("eval", WALL)
    game.step("uncover (0,0)")
    m = game.num_mines
    assert game.step("flag (0,4)").reward == pytest.approx(1 / m)  # a mine
    assert game.score() == pytest.approx(1 / m)
    assert game.step("flag (0,5)").reward == 0.0  # a safe cell: earns nothing
    assert game.step("flag (5,6)").reward == pytest.approx(1 / m)
    assert game.score() == pytest.approx(2 / m)
    assert game.step("unflag (0,5)").reward == 0.0
    assert game.step("unflag (0,4)").reward == pytest.approx(-1 / m)
    assert game.score() == pytest.approx(1 / m)
    assert sum(game.rewards) == pytest.approx(game.score())


SMALL = [
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    "......***",
    "......*.*",
]  # 5 mines (a hand-made board; real episodes have 10-20); (8,7) is a safe pocket


def test_win_by_uncovering_every_safe_cell():
    game = board("eval", SMALL)
    res = game.step("uncover (0,0)")
    assert not res.done and grid(game)[8][7] == "?"
    game.step("flag (7,6)")  # one correct flag before the win
    res = game.step("uncover (8,7)")
    assert res.terminated and res.info["won"] and "you win" in res.feedback
    assert game.score() == 1.0
    assert res.reward == pytest.approx(1.0 - 1 / 5)  # the jump from 1/5 to 1
    assert sum(game.rewards) == pytest.approx(1.0)


def test_wrong_flag_on_the_last_safe_cell_blocks_the_win():
    game = board("eval", SMALL)
    game.step("uncover (0,0)")
    game.step("flag (8,7)")
    assert not game.done and game.score() == 0.0
    assert not game.step("uncover (8,7)").valid
    game.step("unflag (8,7)")
    assert game.step("uncover (8,7)").terminated and game.score() == 1.0


# ----- mines: explore lives vs eval termination ------------------------------------------------
def test_explore_mine_costs_a_life_and_stays_as_x():
    game = board("explore", WALL)
    game.step("uncover (0,0)")
    game.step("flag (0,4)")
    res = game.step("uncover (1,4)")
    assert res.info["mine"] and not res.done and res.reward == 0.0
    assert "2 left" in res.feedback
    assert grid(game)[1][4] == "X"
    assert res.observation.splitlines()[0] == "Mines: 10  Flags: 1  Lives: 2"  # X is not a flag
    assert game.score() == pytest.approx(1 / 10)  # score kept
    for action in ("uncover (1,4)", "flag (1,4)"):
        assert not game.step(action).valid  # a hit mine can be neither uncovered nor flagged
    assert not game.step("uncover (2,4)").done
    res = game.step("uncover (3,4)")
    assert res.terminated and game.lives == 0 and "No lives left" in res.feedback
    assert game.score() == pytest.approx(1 / 10)
    assert grid(game)[3][4] == "X"


def test_explore_can_still_win_after_a_hit():
    game = board("explore", SMALL)
    game.step("uncover (0,0)")
    game.step("uncover (7,7)")
    assert grid(game)[7][7] == "X" and game.lives == 2
    res = game.step("uncover (8,7)")
    assert res.terminated and game.score() == 1.0


def test_eval_mine_ends_the_episode_and_keeps_the_score():
    game = board("eval", WALL)
    game.step("uncover (0,0)")
    game.step("flag (0,4)")
    res = game.step("uncover (1,4)")
    assert res.terminated and res.info["mine"] and res.reward == 0.0
    assert game.score() == pytest.approx(1 / 10)
    assert "Lives: 0" in res.observation and grid(game)[1][4] == "X"
    after = game.step("uncover (2,0)")
    assert not after.valid and after.reward == 0.0 and game.steps == 3


# ----- invalid actions and parsing ---------------------------------------------------------------
@pytest.mark.parametrize("mode", ["explore", "eval"])
def test_invalid_costs_the_step_only(mode):
    game = board(mode, WALL)
    game.step("uncover (0,0)")
    before = game.observation()
    lives, score = game.lives, game.score()
    for k, action in enumerate(["uncover (0,0)", "dig (1,1)", "", "uncover (9,9)", "unflag (3,3)",
                                "flag (0,1)"], start=2):
        res = game.step(action)
        assert not res.valid and res.reward == 0.0 and not res.done and "Invalid action" in res.feedback
        assert game.steps == k and game.lives == lives and game.score() == score
        assert res.observation.splitlines()[:-1] == before.splitlines()[:-1]
    # only the step line moved; and 64 invalid steps end the episode by truncation
    while not game.done:
        game.step("nonsense")
    assert game.truncated and not game.terminated and game.steps == 64


@pytest.mark.parametrize("text", [
    "uncover (3,4)", "uncover(3, 4)", "uncover 3 4", "uncover 3,4", "UNCOVER (3,4)", "Uncover [3, 4]",
    "uncover ( 3 , 4 )", "  uncover (3,4).  ", "uncover(3 4)",
])
def test_parse_variants(text):
    game = make("minesweeper", "explore")
    game.reset(11)
    res = game.step(text)
    assert res.valid, res.feedback
    assert grid(game)[3][4] == "0"


@pytest.mark.parametrize("text", [
    "uncover (3,4", "uncover 3", "uncover 3 4 5", "reveal 3 4", "uncover (3;4)", "uncover ３ ４",
    "uncover 3.5 4", "flag", "uncover (3,4) please", "uncover 99999999999 1", "\x00", "x" * 10_000,
])
def test_malformed_actions_are_invalid(text):
    game = make("minesweeper", "explore")
    game.reset(11)
    res = game.step(text)
    assert not res.valid and res.reward == 0.0
    assert "uncover (r,c)" in res.feedback
    assert len(res.feedback) < 300  # the echo is capped


def test_off_board_feedback_names_the_range():
    game = make("minesweeper", "eval")
    game.reset(1)
    res = game.step("uncover (4,9)")
    assert not res.valid and "column 9 is off the board" in res.feedback and "0-8" in res.feedback
    res = game.step("flag -1 12")
    assert "row -1 and column 12 are off the board" in res.feedback


@settings(max_examples=300, deadline=None)
@given(st.text(max_size=80), st.sampled_from(["explore", "eval"]))
def test_any_string_never_raises(text, mode):
    game = make("minesweeper", mode)
    game.reset(2)
    game.step("uncover 4 4")
    res = game.step(text)
    assert isinstance(res.feedback, str) and res.observation.isascii()


def test_action_grammar_lists_exactly_the_legal_actions():
    game = board("explore", WALL)
    assert game.action_grammar().startswith('"uncover ("')
    game.reset(0)
    assert '"flag ("' in game.action_grammar()  # flags are allowed before the first uncover
    game = board("explore", WALL)
    game.step("uncover (0,0)")
    game.step("flag (0,4)")
    body = game.action_grammar()
    assert "::=" not in body
    alternatives = []
    for verb, inner in re.findall(r'"(uncover|flag|unflag) \(" \(([^)]*)\) "\)"', body):
        alternatives += [f"{verb} ({cell})" for cell in re.findall(r'"(\d,\d)"', inner)]
    assert "unflag (0,4)" in alternatives and "uncover (0,0)" not in alternatives
    snap = game.snapshot()
    for action in alternatives:
        game.restore(snap)
        assert game.step(action).valid, action
    game.restore(snap)
    legal = sum(1 for ch in "".join(grid(game)) if ch == "?") * 2 + 1
    assert len(alternatives) == legal


def test_observation_layout_and_render():
    game = make("minesweeper", "explore")
    obs = game.reset(4)
    lines = obs.splitlines()
    assert len(lines) == 12 and lines[1] == "   0 1 2 3 4 5 6 7 8"
    assert lines[2] == "0  ? ? ? ? ? ? ? ? ?" and lines[-1] == "Steps used: 0 of 64"
    game.step("uncover 4 4")
    game.step("uncover 0 0")
    console = Console(width=80, record=True, color_system=None, file=io.StringIO())
    console.print(game.render())
    assert console.export_text().strip() == game.observation().strip()
    view = game.view()
    assert isinstance(view, MinesweeperView) and view.started and view.steps == 2
    assert "".join(view.grid) == "".join(game.cells)


def test_rules_and_format_per_mode():
    explore, evalg = make("minesweeper", "explore"), make("minesweeper", "eval")
    assert "3 lives" in explore.rules() and "ends the game at once" in evalg.rules()
    for game in (explore, evalg):
        text = game.rules().lower()
        assert "reward" not in text and "verifier" not in text
        assert "64 steps" in text
        assert "uncover (4,4)" in game.answer_format()
    assert MinesweeperGame.score_eps("eval") == pytest.approx(1 / 20)
    assert MinesweeperGame.score_range("explore") == (0.0, 1.0)


def test_sample_action_is_mostly_well_formed():
    game = make("minesweeper", "explore")
    game.reset(0)
    rng = random.Random(0)
    actions = [game.sample_action(rng) for _ in range(200)]
    assert all(MinesweeperGame.parse(a) is not None for a in actions)
    assert {a.split()[0] for a in actions} == {"uncover", "flag", "unflag"}


# ----- determinism, snapshots, replay ----------------------------------------------------------
def _trace(mode: str, seed: int, actions: list[str]) -> list[tuple]:
    game = make("minesweeper", mode)
    out = [game.reset(seed)]
    for a in actions:
        r = game.step(a)
        out.append((r.observation, r.feedback, r.reward, r.terminated, r.truncated))
    return out


def test_same_seed_same_actions_same_trajectory():
    rng = random.Random(9)
    verbs = ["uncover", "flag", "unflag"]
    actions = ["uncover (4,4)"] + [f"{rng.choice(verbs)} ({rng.randrange(9)},{rng.randrange(9)})"
                                   for _ in range(40)]
    for mode in ("explore", "eval"):
        assert _trace(mode, 77, actions) == _trace(mode, 77, actions)


def test_snapshot_restore_round_trip():
    game = make("minesweeper", "explore")
    policy = MinesweeperPolicy()
    game.reset(1_000_003)
    for _ in range(6):
        game.step(policy.act(game.view()).action)
    snap = game.snapshot()
    rng = random.Random(4)
    tail = [game.sample_action(rng) for _ in range(30)]
    first = [game.step(a) for a in tail]
    game.restore(snap)
    second = [game.step(a) for a in tail]
    assert first == second
    replayed = MinesweeperGame.replay("explore", 1_000_003, game.actions)
    assert replayed.observation() == game.observation() and replayed.score() == game.score()


# ----- the solver --------------------------------------------------------------------------------
def _brute_force(view: MinesweeperView) -> dict[int, float] | None:
    cells = "".join(view.grid)
    unknown = [i for i, ch in enumerate(cells) if ch in "?F"]
    remaining = view.mines - cells.count("X")
    if len(unknown) > 24 or comb_ok(len(unknown), remaining) > 4_000:
        return None
    numbers = [(i, int(ch)) for i, ch in enumerate(cells) if ch.isdigit()]
    hits = [0] * len(unknown)
    total = 0
    for mines in itertools.combinations(range(len(unknown)), remaining):
        chosen = {unknown[k] for k in mines}
        if all(sum(1 for j in NEIGHBOURS[i] if j in chosen or cells[j] == "X") == v for i, v in numbers):
            total += 1
            for k in mines:
                hits[k] += 1
    return {c: hits[k] / total for k, c in enumerate(unknown)}


def comb_ok(n: int, k: int) -> int:
    from math import comb
    return comb(n, k) if 0 <= k <= n else 0


def test_solver_probabilities_match_brute_force():
    policy = MinesweeperPolicy()
    checked = 0
    for seed in range(400):
        if checked >= 80:
            break
        game = make("minesweeper", "explore")
        game.reset(seed)
        while not game.done:
            view = game.view()
            if view.started:
                exact = _brute_force(view)
                if exact is not None:
                    a = analyse(view)
                    assert a.exact
                    for c, p in exact.items():
                        assert a.prob[c] == pytest.approx(p, abs=1e-9), (seed, c)
                        assert (c in a.safe) == (p == 0.0) and (c in a.mines) == (p == 1.0)
                    checked += 1
            game.step(policy.act(view).action)
    assert checked >= 80


@pytest.mark.parametrize("cap", [20000, 3])
def test_solver_certainties_are_sound_even_with_the_fallback(cap, monkeypatch):
    import s3gym_games.minesweeper.policy as policy_module
    monkeypatch.setattr(policy_module, "NODE_CAP", cap)
    monkeypatch.setattr(policy_module, "LOOK_NODE_CAP", min(cap, 2000))
    inexact = 0
    for seed in range(30):
        game = make("minesweeper", "explore")
        game.reset(seed)
        policy = MinesweeperPolicy()
        while not game.done:
            view = game.view()
            if view.started:
                a = analyse(view)
                inexact += not a.exact
                assert not any(game.mine[c] for c in a.safe)
                assert all(game.mine[c] for c in a.mines)
                assert all(0.0 <= p <= 1.0 for p in a.prob.values())
            assert game.step(policy.act(view).action).valid
    assert (inexact > 0) == (cap < 100)


def _view_from(layout: list[str], shown: list[str], steps: int = 10) -> MinesweeperView:
    """A view of the board `layout` ('*' mines): `shown` has 'o' for a revealed cell (its number is
    computed), '?' hidden, 'F' a flag, 'X' a hit mine."""
    mines = [r * 9 + c for r, row in enumerate(layout) for c, ch in enumerate(row) if ch == "*"]
    game = board("explore", layout)
    out = []
    for r, row in enumerate(shown):
        line = ""
        for c, ch in enumerate(row):
            i = r * 9 + c
            if ch == "o":
                assert i not in mines
                line += str(game.counts[i])
            else:
                assert ch != "X" or i in mines
                line += ch
        out.append(line)
    flags = sum(row.count("F") for row in shown)
    return MinesweeperView(9, 9, len(mines), flags, 1, steps, 64, tuple(out))


ONE_TWO_ONE = [
    "*.......*",
    ".........",
    "*.......*",
    ".........",
    "....*....",
    ".........",
    ".........",
    "...*.*...",
    ".........",
]  # 7 mines
BOTTOM_OPEN = ["?????????"] * 7 + ["ooo???ooo", "ooooooooo"]


def test_solver_one_two_one_pattern():
    view = _view_from(ONE_TWO_ONE, BOTTOM_OPEN)
    assert view.grid[8] == "001121100"
    a = analyse(view)
    assert {7 * 9 + 3, 7 * 9 + 5} <= a.mines and 7 * 9 + 4 in a.safe
    assert a.prob[7 * 9 + 4] == 0.0 and a.prob[7 * 9 + 3] == 1.0


def test_policy_first_move_is_interior_and_uses_only_the_view():
    policy = MinesweeperPolicy()
    move = policy.act(MinesweeperView(9, 9, 12, 0, 1, 0, 64, ("?" * 9,) * 9))
    assert isinstance(move, Move) and move.action == "uncover (3,3)"
    r, c = MinesweeperGame.parse(move.action)[1:]
    assert 1 <= r <= 7 and 1 <= c <= 7


def test_policy_uncovers_certain_safe_before_flagging():
    view = _view_from(ONE_TWO_ONE, BOTTOM_OPEN)
    move = MinesweeperPolicy().act(view)
    verb, r, c = MinesweeperGame.parse(move.action)
    assert verb == "uncover" and r * 9 + c in analyse(view).safe
    assert move.expected_reward == 0.0


def test_policy_flags_known_mines_when_the_win_is_out_of_reach():
    view = _view_from(ONE_TWO_ONE, BOTTOM_OPEN, steps=61)  # 3 steps left, ~60 safe cells covered
    move = MinesweeperPolicy().act(view)
    assert move.action in {"flag (7,3)", "flag (7,5)"}
    assert move.expected_reward == pytest.approx(1 / 7, abs=1e-3)


def test_policy_removes_a_flag_it_can_prove_wrong():
    shown = BOTTOM_OPEN[:7] + ["oooF??ooo", "ooooooooo"]
    move = MinesweeperPolicy().act(_view_from(ONE_TWO_ONE, shown))
    assert not move.action.startswith("unflag")  # (7,3) is a mine: the flag is right, it stays
    shown = BOTTOM_OPEN[:7] + ["ooo?F?ooo", "ooooooooo"]
    move = MinesweeperPolicy().act(_view_from(ONE_TWO_ONE, shown))
    assert move.action == "unflag (7,4)"


FIFTY = [
    "*.*......",
    "..*......",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    ".........",
    "........*",
]  # 4 mines: a 50/50 at (0,0)/(0,1) walled in by two hit mines, and a lone mine at (8,8)
FIFTY_SHOWN = ["??Xoooooo", "ooXoooooo"] + ["ooooooooo"] * 6 + ["oooooooo?"]


def test_policy_banks_a_certain_mine_before_a_forced_guess():
    view = _view_from(FIFTY, FIFTY_SHOWN)
    a = analyse(view)
    assert a.prob[0] == pytest.approx(0.5) and a.prob[1] == pytest.approx(0.5) and 80 in a.mines
    move = MinesweeperPolicy().act(view)
    assert move.action == "flag (8,8)" and move.expected_reward == pytest.approx(0.25)
    flagged = _view_from(FIFTY, FIFTY_SHOWN[:8] + ["ooooooooF"])
    move = MinesweeperPolicy().act(flagged)
    assert move.action in {"uncover (0,0)", "uncover (0,1)"}
    assert move.expected_reward == pytest.approx(0.5 * 0.75)  # the last safe cell: a win with chance 1/2
    # with no spare step (covered safe cells = steps left) it guesses at once instead of flagging
    move = MinesweeperPolicy().act(_view_from(FIFTY, FIFTY_SHOWN, steps=63))
    assert move.action in {"uncover (0,0)", "uncover (0,1)"}


# ----- levels ------------------------------------------------------------------------------------
def _run(mode: str, seeds, policy_factory) -> tuple[float, float]:
    wins, total = 0, 0.0
    for seed in seeds:
        game = make("minesweeper", mode)
        policy = policy_factory()
        game.reset(seed)
        while not game.done:
            move = policy.act(game.view())
            assert game.step(move.action).valid, (seed, move)
        wins += game.won
        total += game.score()
        assert verify_trajectory("minesweeper", mode, seed, game.actions) == pytest.approx(game.score())
    return wins / len(seeds), total / len(seeds)


def _random_mean(mode: str, seeds) -> float:
    total = 0.0
    for seed in seeds:
        game = make("minesweeper", mode)
        game.reset(seed)
        rng = random.Random(seed)
        while not game.done:
            game.step(game.sample_action(rng))
        total += game.score()
    return total / len(seeds)


def test_reference_policy_level_eval():
    win_rate, mean = _run("eval", EVAL_SEEDS, MinesweeperPolicy)
    rand = _random_mean("eval", EVAL_SEEDS)
    print(f"\nminesweeper eval: reference win rate {win_rate:.2f}, mean score {mean:.3f}; "
          f"random mean {rand:.3f}")
    assert win_rate >= 0.5
    assert mean > rand


def test_reference_policy_level_explore():
    win_rate, mean = _run("explore", EVAL_SEEDS, MinesweeperPolicy)
    rand = _random_mean("explore", EVAL_SEEDS)
    print(f"\nminesweeper explore: reference win rate {win_rate:.2f}, mean score {mean:.3f}; "
          f"random mean {rand:.3f}")
    assert win_rate >= 0.8
    assert mean > rand


def test_play_helper_and_policy_speed():
    import time
    game = make("minesweeper", "eval")
    start = time.perf_counter()
    moves = 0
    for seed in range(1_000_000, 1_000_010):
        play(game, MinesweeperPolicy(), seed)
        moves += game.steps
    per_move = (time.perf_counter() - start) / moves
    assert per_move < 0.02
