"""Terminal renderings at the widths the app gives them: nothing essential wraps or drops out."""

from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

import s3gym_games as games
from s3gym_games.chess.render import ChessBoards

WIDTHS = (33, 40, 50, 76, 116, 196)


def played(name: str, mode: str, seed: int, steps: int):
    game = games.make(name, mode)
    game.reset(seed)
    policy = games.reference_policy(name)
    for _ in range(steps):
        if game.done:
            break
        game.step(policy.act(game.view()).action)
    return game


def text_at(renderable, width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None, record=True)
    console.print(renderable)
    return console.export_text().splitlines()


@pytest.mark.parametrize("name", games.names())
@pytest.mark.parametrize("width", WIDTHS)
def test_no_line_is_wider_than_the_room(name, width):
    game = played(name, "explore", 3, 6)
    for line in text_at(game.render(), width):
        assert len(line.rstrip()) <= width, line


@pytest.mark.parametrize("mode,seed", [("explore", 0), ("eval", 1_000_004)])
@pytest.mark.parametrize("width", WIDTHS)
def test_chess_focused_board_is_whole_with_coordinates(mode, seed, width):
    game = played("chess", mode, seed, 2)
    lines = text_at(game.render(), width)
    n = game.size
    board = game.view().boards[-1]
    for r, row in enumerate(board):  # every row, with its number, every cell spaced
        expected = f"{r:>2} " + " ".join(row)
        assert any(expected in line for line in lines), (r, expected)
    assert any(" ".join(str(c % 10) for c in range(n)) in line for line in lines)  # column units
    assert any("1 1 1 1 1" in line for line in lines)  # tens over columns 10-14
    start = next(i for i, line in enumerate(lines) if line.startswith("Pieces:"))
    legend = " ".join(lines[start:start + 4])  # it may wrap at narrow widths
    assert all(f" {p} " in legend for p in game.pieces)


@pytest.mark.parametrize("width", WIDTHS)
def test_chess_strip_shows_what_fits_and_names_the_rest(width):
    game = played("chess", "eval", 1_000_001, 1)
    view: ChessBoards = game.render()
    text = "\n".join(text_at(view, width))
    shown, hidden = view.layout(width)
    for i in shown:
        assert view.labels[i] in text
    if hidden:
        named = re.findall(r"t-\d", text.split("not shown at this width:")[1])
        assert named == [view.labels[i] for i in hidden]
    else:
        assert "not shown" not in text
    assert len(shown) + len(hidden) == view.frames - 1


def test_chess_all_seven_boards_fit_in_a_wide_panel():
    view = played("chess", "explore", 0, 1).render()
    assert view.full_width() <= 196 - 4
    assert view.layout(196 - 4)[1] == []


def test_chess_focus_moves_the_large_board_to_an_older_tick():
    game = played("chess", "explore", 5, 3)
    older = game.render(focus=3)
    lines = text_at(older, 76)
    assert "t-3" in lines[0] and "t0" not in lines[0]  # the strip keeps the ticks nearest to t-3
    board = game.view().boards[-4]
    assert any(f"{r:>2} " + " ".join(row) in line for r, row in enumerate(board) for line in lines)
    assert older.focused_index == 3
    assert game.render(focus=99).focus == 6  # clamped to the oldest board


@pytest.mark.parametrize("mode", ["explore", "eval"])
@pytest.mark.parametrize("width", WIDTHS)
def test_tetris_rotations_never_wrap(mode, width):
    game = played("tetris", mode, 0 if mode == "explore" else 1_000_000, 3)
    text = "\n".join(text_at(game.render(), width))
    for rotation in (0, 90, 180, 270):
        assert f"rotation {rotation}" in text
    assert text.count("columns 1-") == 4  # each rotation's legal range, whole
    for row in game.observation().splitlines():
        if row.startswith("   |"):
            assert row in text  # board rows intact


@pytest.mark.parametrize("mode,seed,steps", [("explore", 0, 30), ("eval", 1_000_000, 40)])
@pytest.mark.parametrize("width", WIDTHS)
def test_pvz_every_row_and_the_price_list_stay(mode, seed, steps, width):
    game = played("pvz", mode, seed, steps)
    assert game.zombies  # zombies on the field: the case that used to push rows out
    lines = text_at(game.render(), width)
    text = "\n".join(lines)
    for r in range(game.config.rows):
        assert any(line.startswith(f"r{r} | ") for line in lines), r
    assert "Prices:" in text and all(f"{k} " in text for k in "XWSJHF")
    assert "Zombies (row,col type HP):" in text
