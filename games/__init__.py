"""Registry of the seven S3Gym games: `make(name, mode)`, `names()`, reference policies, verification."""

from __future__ import annotations

import importlib
from typing import Iterable

from games.base import MODES, Game, GameError, Move, Outcome, Policy, StepResult, play

__all__ = [
    "MODES", "Game", "GameError", "Move", "Outcome", "Policy", "StepResult", "play",
    "names", "make", "game_class", "reference_policy", "verify_trajectory", "canonical",
]

# name -> module under games/ (each module exposes GAME (a Game subclass) and POLICY (a Policy class))
_REGISTRY: dict[str, str] = {
    "chess": "games.chess",
    "minesweeper": "games.minesweeper",
    "nullify": "games.nullify",
    "tetris": "games.tetris",
    "snake": "games.snake",
    "pvz": "games.pvz",
    "trust": "games.trust",
}
_ALIASES = {
    "plants-vs-zombies": "pvz", "plants_vs_zombies": "pvz", "plantsvszombies": "pvz",
    "trust-evolution": "trust", "trust_evolution": "trust", "mines": "minesweeper",
}


def names() -> list[str]:
    """The canonical game names, in the spec's order."""
    return list(_REGISTRY)


def canonical(name: str) -> str:
    """Map a user-typed game name to its canonical name, or raise GameError listing the choices."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _REGISTRY:
        raise GameError(f"unknown game {name!r}: choose one of {', '.join(names())}")
    return key


def _module(name: str):
    return importlib.import_module(_REGISTRY[canonical(name)])


def game_class(name: str) -> type[Game]:
    return _module(name).GAME


def make(name: str, mode: str = "explore") -> Game:
    """A new, not yet reset, episode of game `name` in `mode` ('explore' or 'eval')."""
    return game_class(name)(mode)


def reference_policy(name: str) -> Policy:
    """The game's scripted reference policy (a fresh instance)."""
    return _module(name).POLICY()


def verify_trajectory(name: str, mode: str, seed: int, actions: Iterable[str]) -> float:
    """Recompute an episode's final verifier score from (game, mode, seed, actions) alone."""
    return game_class(name).replay(mode, seed, list(actions)).score()
