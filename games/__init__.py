"""Registry of the seven S3Gym games: `make(name, mode)`, `names()`, reference policies, verification.

Beside them: `prompt` (the paper's prompt for a state), `reply` (the `Answer: ..., Score: ...` parser),
`seeds` (the protocol's exploration and evaluation seed ranges), `gym_env` (Gymnasium environments, the
gym extra), `trl_env` (TRL's environment_factory) and `verifiers_env` (verifiers' load_environment, the
verifiers extra).

Third-party games join through the `s3gym.games` entry-point group (name = the game's name, value = a
module exposing GAME, a Game subclass, and POLICY, a Policy class), as model providers do through
`s3gym.providers`; a built-in game of the same name wins.
"""

from __future__ import annotations

import functools
import importlib
from importlib.metadata import entry_points
from typing import Iterable

from s3gym_games.base import MODES, Game, GameError, Move, Outcome, Policy, StepResult, play

__all__ = [
    "MODES", "Game", "GameError", "Move", "Outcome", "Policy", "StepResult", "play",
    "names", "make", "game_class", "reference_policy", "verify_trajectory", "canonical", "ENTRY_POINT_GROUP",
]

ENTRY_POINT_GROUP = "s3gym.games"

# name -> module under games/ (each module exposes GAME (a Game subclass) and POLICY (a Policy class))
_REGISTRY: dict[str, str] = {
    "chess": "s3gym_games.chess",
    "minesweeper": "s3gym_games.minesweeper",
    "nullify": "s3gym_games.nullify",
    "tetris": "s3gym_games.tetris",
    "snake": "s3gym_games.snake",
    "pvz": "s3gym_games.pvz",
    "trust": "s3gym_games.trust",
}
_ALIASES = {
    "plants-vs-zombies": "pvz", "plants_vs_zombies": "pvz", "plantsvszombies": "pvz",
    "trust-evolution": "trust", "trust_evolution": "trust", "mines": "minesweeper",
}


@functools.lru_cache(maxsize=1)
def _installed() -> tuple[tuple[str, str], ...]:
    """(name, module) of the entry points of the group, read once per process."""
    try:
        return tuple((ep.name.strip().lower(), ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # noqa: BLE001 - broken package metadata must not hide the built-in games
        return ()


def _registry() -> dict[str, str]:
    """The built-in games, then any installed under the entry-point group (built-ins win)."""
    found = dict(_REGISTRY)
    for name, module in _installed():
        if name not in _ALIASES:
            found.setdefault(name, module)
    return found


def names() -> list[str]:
    """The canonical game names: the seven in the spec's order, then installed third-party games."""
    return list(_registry())


def canonical(name: str) -> str:
    """Map a user-typed game name to its canonical name, or raise GameError listing the choices."""
    key = str(name).strip().lower()
    key = _ALIASES.get(key, key)
    if key not in _registry():
        raise GameError(f"unknown game {name!r}: choose one of {', '.join(names())}")
    return key


def _module(name: str):
    return importlib.import_module(_registry()[canonical(name)])


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
