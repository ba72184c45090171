"""The games stand alone: installed as `s3gym_games` (no module named `games`), every package folder in
both distributions, and third-party games joining through the `s3gym.games` entry-point group."""

from __future__ import annotations

import ast
import re
import tomllib
from pathlib import Path

import pytest

import s3gym_games as games
from s3gym_games.base import GameError

ROOT = Path(__file__).resolve().parents[2]


def _package_folders(folder: Path, name: str) -> set[str]:
    """The packages under `folder` (not what a build left there: `pip install ./games` builds in place)."""
    found = set()
    for path in folder.rglob("__init__.py"):
        parts = path.parent.relative_to(folder).parts
        if not (parts and parts[0] == "build") and "__pycache__" not in parts:
            found.add(name + "".join("." + part for part in parts))
    return found


def test_both_distributions_list_every_package_folder():
    app = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    alone = tomllib.loads((ROOT / "games" / "pyproject.toml").read_text())["tool"]["setuptools"]
    game_packages = _package_folders(ROOT / "games", "s3gym_games")
    assert set(app["packages"]) == game_packages | _package_folders(ROOT / "s3gym_tui", "s3gym_tui")
    assert app["package-dir"] == {"s3gym_games": "games"}
    assert set(alone["packages"]) == game_packages and alone["package-dir"] == {"s3gym_games": ""}


def test_the_games_distribution_needs_only_what_the_games_import():
    project = tomllib.loads((ROOT / "games" / "pyproject.toml").read_text())["project"]
    assert [d.split(">")[0].split("=")[0] for d in project["dependencies"]] == ["rich"]
    imported = set()
    for path in (ROOT / "games").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Import):
                imported |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                imported.add(node.module.split(".")[0])
    import sys
    third_party = {m for m in imported if m not in sys.stdlib_module_names and m != "s3gym_games"}
    optional = {re.split(r"[<>=!~;\[ ]", e)[0] for extra in project["optional-dependencies"].values() for e in extra}
    assert third_party - optional == {"rich"}


def test_no_module_of_the_project_imports_games_by_its_old_name():
    offenders = []
    for top in ("s3gym_tui", "games", "tests", "benchmarks"):
        for path in (ROOT / top).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = ([a.name for a in node.names] if isinstance(node, ast.Import)
                         else [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 else [])
                offenders += [f"{path.relative_to(ROOT)}: {n}" for n in names
                              if n and (n == "games" or n.startswith("games."))]
    assert offenders == []


TOY_GAME = '''
"""A third-party game for the test: say the next number, three times."""
import random
from dataclasses import dataclass
from s3gym_games.base import Game, Move, Outcome, Policy


@dataclass(frozen=True)
class Config:
    max_steps: int


class CountGame(Game):
    name, title, description = "count", "Count", "Say the next number."
    CONFIGS = {"explore": Config(3), "eval": Config(3)}

    def _setup(self):
        self.n = self.rng.randrange(100)

    def _apply(self, action):
        if action != str(self.n + 1):
            return Outcome("Wrong number.", 0.0, valid=action.isdigit())
        self.n += 1
        return Outcome("Right.", 1.0)

    def observation(self):
        return f"Number: {self.n}"

    view = render = observation

    def rules(self):
        return "Say the number after the one shown."

    def answer_format(self):
        return "<number>   (example: 7)"

    def action_grammar(self):
        return "[0-9]+"

    def score(self):
        return float(sum(self.rewards))

    def sample_action(self, rng):
        return str(rng.randrange(100))

    @classmethod
    def score_eps(cls, mode):
        return 1.0

    @classmethod
    def score_range(cls, mode):
        return (0.0, 3.0)

    @classmethod
    def step_reward_range(cls, mode):
        return (0.0, 1.0)


class CountPolicy(Policy):
    def act(self, view):
        return Move(str(int(view.split()[-1]) + 1), 1.0)


GAME, POLICY = CountGame, CountPolicy
'''


@pytest.fixture
def installed_toy(tmp_path, monkeypatch):
    """A package `s3gym_toy` installed in tmp_path (its dist-info declares two games in the group: `count`,
    and one that tries to take the built-in name `trust`)."""
    (tmp_path / "s3gym_toy.py").write_text(TOY_GAME, encoding="utf-8")
    info = tmp_path / "s3gym_toy-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: s3gym-toy\nVersion: 0.1\n", encoding="utf-8")
    (info / "entry_points.txt").write_text(f"[{games.ENTRY_POINT_GROUP}]\ncount = s3gym_toy\ntrust = s3gym_toy\n",
                                           encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    games._installed.cache_clear()
    yield
    games._installed.cache_clear()


def test_a_game_installed_under_the_entry_point_group_is_registered(installed_toy):
    assert games.names()[:7] == ["chess", "minesweeper", "nullify", "tetris", "snake", "pvz", "trust"]
    assert games.names()[7:] == ["count"]
    assert games.canonical(" Count ") == "count"
    game = games.play(games.make("count", "eval"), games.reference_policy("count"), 5)
    assert game.score() == 3.0 and game.done
    assert games.verify_trajectory("count", "eval", 5, game.actions) == 3.0
    assert games.game_class("trust").title == "Trust Evolution"  # a built-in name is never taken over


def test_without_the_package_the_game_is_unknown():
    games._installed.cache_clear()
    assert "count" not in games.names()
    with pytest.raises(GameError, match="unknown game 'count'"):
        games.make("count")


@pytest.mark.parametrize("module, needs, extra", [("s3gym_games.gym_env", "gymnasium", "gym"),
                                                  ("s3gym_games.verifiers_env", "verifiers", "verifiers")])
def test_an_adapter_without_its_extra_names_the_extra(monkeypatch, module, needs, extra):
    import importlib
    import sys

    monkeypatch.setitem(sys.modules, needs, None)  # `import <needs>` now fails as if it were not installed
    monkeypatch.delitem(sys.modules, module, raising=False)
    with pytest.raises(ImportError, match=re.escape(f"pip install 's3gym-games[{extra}]'")):
        importlib.import_module(module)
