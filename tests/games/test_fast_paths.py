"""The games' fast paths (cached texts, bit-mask flood fills) agree with plain reference versions."""

from __future__ import annotations

import random

import pytest

from s3gym_games.snake.game import DIRECTIONS, interior_connected
from s3gym_games.tetris.game import draw_row


def _connected_by_search(size: int, obstacles: set) -> bool:
    free = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1) if (r, c) not in obstacles]
    if not free:
        return True
    seen, stack = {free[0]}, [free[0]]
    while stack:
        r, c = stack.pop()
        for dr, dc in DIRECTIONS.values():
            n = (r + dr, c + dc)
            if 0 < n[0] < size - 1 and 0 < n[1] < size - 1 and n not in obstacles and n not in seen:
                seen.add(n)
                stack.append(n)
    return len(seen) == len(free)


@pytest.mark.parametrize("size", [3, 4, 5, 6, 10])
def test_snake_connectivity_matches_a_plain_search(size):
    rng = random.Random(size)
    interior = [(r, c) for r in range(1, size - 1) for c in range(1, size - 1)]
    outcomes = set()
    for _ in range(3000):
        k = rng.randint(0, len(interior))
        obstacles = set(rng.sample(interior, k))
        if rng.random() < 0.1:
            obstacles.add((0, rng.randrange(size)))  # a cell in the wall ring changes nothing
        expected = _connected_by_search(size, obstacles)
        assert interior_connected(size, obstacles) == expected, (size, sorted(obstacles))
        outcomes.add(expected)
    assert outcomes == {True, False} or size == 3


def test_snake_corner_cut_off_is_disconnected():
    assert not interior_connected(10, {(1, 2), (2, 1)})
    assert interior_connected(10, {(1, 2), (2, 2)})


@pytest.mark.parametrize("width", [1, 4, 8, 10, 12, 13, 16])
def test_tetris_row_text_matches_a_plain_drawing(width):
    rng = random.Random(width)
    for mask in [0, (1 << width) - 1] + [rng.randrange(1 << width) for _ in range(200)]:
        assert draw_row(mask, width) == " ".join("*" if mask >> c & 1 else "." for c in range(width))


def test_nullify_scale_candidates_match_fraction_arithmetic():
    from fractions import Fraction

    from s3gym_games.nullify.game import _readable, _scale_candidates, apply_op

    values = {Fraction(n, d) for n in range(-120, 121) for d in (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12)}
    found = 0
    for m in sorted(values):
        for kind in ("*", "/"):
            plain = [((m / k) if kind == "*" else (m * k), (kind, k)) for k in range(-10, 11) if k not in (0, 1)]
            plain = [(n, op) for n, op in plain if _readable(n)]
            assert _scale_candidates(kind, m) == plain, (kind, m)
            assert all(apply_op(op, n) == m for n, op in plain)
            found += len(plain)
    assert found > 1000


def test_nullify_number_text_matches_the_plain_rule():
    from fractions import Fraction

    from s3gym_games.nullify.game import format_number, format_unit

    for n in range(-30, 31):
        for d in range(1, 13):
            x = Fraction(n, d)
            a = abs(x)
            plain = "0" if x == 0 else ("+" if x > 0 else "-") + (
                f"{a.numerator}" if a.denominator == 1 else f"{a.numerator}/{a.denominator}")
            assert format_number(x) == plain
            assert format_unit(("num", x)) == plain
    assert format_unit(("num", 3)) == "+3" and format_unit(("num", -2)) == "-2"
