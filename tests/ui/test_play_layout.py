"""The board's placement on the play screens (screens.play_layout.place_board): a pure function of sizes."""

from __future__ import annotations

import pytest

from s3gym_tui.screens.play_layout import (AGENT_MIN_WIDTH, STEPS_MIN_ROWS, STEPS_MIN_WIDTH, BoardRoom, place_board)
from s3gym_tui.widgets.board import PANEL_CHROME


@pytest.mark.parametrize("width, natural, column", [
    (120, 30, 45),  # a small board: the column is 38% of the width (its least share)
    (120, 60, 60),  # its natural width when that fits
    (120, 100, 120 - AGENT_MIN_WIDTH),  # never so wide that the agent panel gets less than it needs
    (200, 190, 144),  # at most 72% of the width
    (100, 10, 40),  # never under 40 columns
])
def test_wide_the_board_column_takes_what_it_needs_within_its_share(width, natural, column):
    placed = place_board(BoardRoom(width, 40, narrow=False, short=False, natural=natural))
    assert (placed.columns, placed.outer_width, placed.draw_width) == (f"{column} 1fr", column, column - PANEL_CHROME)
    assert not placed.beside and placed.max_height is None


def test_narrow_and_tall_the_board_spans_the_width_as_the_stylesheet_lays_it_out():
    placed = place_board(BoardRoom(80, 40, narrow=True, short=False, narrowest=30, stacked_lines=50, beside_lines=60))
    assert (placed.columns, placed.outer_width, placed.draw_width, placed.beside, placed.max_height) == \
        (None, 80, 80 - PANEL_CHROME, False, None)


def test_narrow_and_short_a_short_board_goes_on_top_leaving_the_steps_their_rows():
    placed = place_board(BoardRoom(80, 24, narrow=True, short=True, narrowest=20, stacked_lines=6, beside_lines=8))
    assert not placed.beside and placed.columns is None and placed.outer_width == 80
    assert placed.max_height == 24 - 3 - STEPS_MIN_ROWS


def test_narrow_and_short_a_tall_board_goes_beside_the_steps_at_its_narrowest():
    """Chess's large board: 15 rows and more, taller than the room above a steps table."""
    room = BoardRoom(80, 24, narrow=True, short=True, narrowest=36, stacked_lines=17, beside_lines=17, scrollbar=1)
    placed = place_board(room)
    assert placed.beside and (placed.columns, placed.outer_width, placed.draw_width) == ("36 1fr", 36, 36 - PANEL_CHROME)
    assert placed.max_height is None
    taller = place_board(BoardRoom(80, 24, narrow=True, short=True, narrowest=36, stacked_lines=30, beside_lines=30,
                                   scrollbar=1))
    assert taller.beside and taller.outer_width == 37  # it scrolls there: room for its scrollbar


def test_narrow_and_short_a_board_too_wide_to_go_beside_stays_on_top():
    placed = place_board(BoardRoom(80, 24, narrow=True, short=True, narrowest=80 - STEPS_MIN_WIDTH + 1,
                                   stacked_lines=40, beside_lines=40))
    assert not placed.beside and placed.max_height == 24 - 3 - STEPS_MIN_ROWS


@pytest.mark.parametrize("shown, narrowest", [(False, 30), (True, 0)])
def test_narrow_and_short_without_a_board_to_measure_the_rows_stay_capped(shown, narrowest):
    placed = place_board(BoardRoom(80, 24, narrow=True, short=True, shown=shown, narrowest=narrowest,
                                   stacked_lines=40, beside_lines=40))
    assert not placed.beside and placed.draw_width == 80 - PANEL_CHROME and placed.max_height == 24 - 3 - STEPS_MIN_ROWS


def test_a_tiny_terminal_keeps_a_few_rows_for_the_board():
    assert place_board(BoardRoom(40, 6, narrow=True, short=True, shown=False)).max_height == 3
