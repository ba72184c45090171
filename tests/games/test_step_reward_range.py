"""Every game declares the range of one step's verifier reward (`step_reward_range`), and no step pays
outside it: random play and the reference policy, both modes, all seven games. The bounds are tight:
each is paid by some step (the rare ones on a board built for it)."""

from __future__ import annotations

import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import s3gym_games as games
from s3gym_games.minesweeper.game import MinesweeperGame
from s3gym_games.tetris.game import TetrisGame

SEEDS = 12
EPS = 1e-12  # float noise of the declared bounds (e.g. minesweeper's -1/10)


def _seeds(mode: str) -> list[int]:
    return [s + (1_000_000 if mode == "eval" else 0) for s in range(SEEDS)]


def _rewards(name: str, mode: str, seed: int, policy_seed: int | None) -> list[float]:
    """The step rewards of one episode: random actions (`policy_seed`) or the reference policy (None)."""
    game = games.make(name, mode)
    game.reset(seed)
    rng = random.Random(policy_seed)
    policy = games.reference_policy(name) if policy_seed is None else None
    rewards = []
    while not game.done:
        action = policy.act(game.view()).action if policy else game.sample_action(rng)
        rewards.append(game.step(action).reward)
    return rewards


def _inside(reward: float, bounds: tuple[float, float]) -> bool:
    lo, hi = bounds
    return lo - EPS <= reward <= hi + EPS


@pytest.mark.parametrize("name", games.names())
@pytest.mark.parametrize("mode", games.MODES)
def test_no_step_pays_outside_the_declared_range(name, mode):
    bounds = games.game_class(name).step_reward_range(mode)
    assert bounds[0] < bounds[1]
    seen: list[float] = []
    for seed in _seeds(mode):
        for policy_seed in (None, seed, seed + 7):
            seen.extend(_rewards(name, mode, seed, policy_seed))
    outside = [r for r in seen if not _inside(r, bounds)]
    assert not outside, f"{name} {mode}: rewards {sorted(set(outside))} outside {bounds}"
    assert len(seen) > SEEDS  # the episodes were played


@pytest.mark.parametrize("name", games.names())
@settings(max_examples=15, deadline=None)
@given(seed=st.integers(0, 999_999), policy_seed=st.integers(0, 2**32 - 1), evaluation=st.booleans())
def test_random_play_on_any_seed_stays_in_range(name, seed, policy_seed, evaluation):
    mode = "eval" if evaluation else "explore"
    seed += 1_000_000 if evaluation else 0
    bounds = games.game_class(name).step_reward_range(mode)
    assert all(_inside(r, bounds) for r in _rewards(name, mode, seed, policy_seed))


@pytest.mark.parametrize("name", ["chess", "nullify", "snake", "pvz", "trust"])
@pytest.mark.parametrize("mode", games.MODES)
def test_play_reaches_both_bounds(name, mode):
    """The bounds are tight: the rewards played above include both ends of the range."""
    lo, hi = games.game_class(name).step_reward_range(mode)
    seen = {r for seed in _seeds(mode) for p in (None, seed, seed + 7) for r in _rewards(name, mode, seed, p)}
    assert min(seen) == pytest.approx(lo) and max(seen) == pytest.approx(hi)


@pytest.mark.parametrize("mode", games.MODES)
def test_a_tetris_drop_clears_four_rows_at_most(mode):
    game = TetrisGame(mode)
    game.reset(0 if mode == "explore" else 1_000_000)
    full = (1 << game.width) - 1
    game.board = [0] * (game.height - 4) + [full & ~1] * 4  # four rows short of their first cell
    game.current = "I"
    result = game.step("1 90")  # the I on end, in column 1
    assert result.reward == game.step_reward_range(mode)[1] == 4.0


@pytest.mark.parametrize("mode", games.MODES)
def test_minesweeper_pays_from_minus_one_flag_to_the_whole_score(mode):
    lo, hi = MinesweeperGame.step_reward_range(mode)
    layout = [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]  # the fewest mines (10): row 0 and (1,0)
    game = MinesweeperGame(mode)
    game.reset(0 if mode == "explore" else 1_000_000)
    game._set_layout(layout)
    assert game.step("flag (0,0)").reward == pytest.approx(1 / 10)
    assert game.step("unflag (0,0)").reward == pytest.approx(lo) == -0.1  # a correct flag removed
    win = game.step("uncover (8,8)")  # a zero that floods every safe cell: the win, from no flag
    assert win.info.get("won") and win.reward == hi == 1.0
