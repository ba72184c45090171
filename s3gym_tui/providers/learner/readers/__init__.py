"""The learner's readers, one per game: how a situation is read from that game's observation text."""

from __future__ import annotations

import importlib

from s3gym_tui.providers.learner.readers.base import Reader

_READERS = {
    "chess": "chess:ChessReader", "minesweeper": "minesweeper:MinesweeperReader",
    "nullify": "nullify:NullifyReader", "tetris": "tetris:TetrisReader", "snake": "snake:SnakeReader",
    "pvz": "pvz:PvzReader", "trust": "trust:TrustReader",
}
_LOADED: dict[str, Reader] = {}


def reader(game: str) -> Reader:
    """The reader of a canonical game name (KeyError for an unknown one)."""
    if game not in _LOADED:
        module, _, cls = _READERS[game].partition(":")
        _LOADED[game] = getattr(importlib.import_module(f"{__name__}.{module}"), cls)()
    return _LOADED[game]


def games() -> list[str]:
    return list(_READERS)


def detect(rules: str) -> Reader | None:
    """The reader whose game's rules these are (None: no game the learner knows)."""
    for game in _READERS:
        if reader(game).matches(rules):
            return reader(game)
    return None


__all__ = ["Reader", "detect", "games", "reader"]
