"""The play screens are built from parts (fork controls, the board's placement, support helpers): the
parts are typed by play_support.PlayHost and never import the screens back (no import circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import s3gym_tui.screens as screens

PARTS = ("play_replay", "play_support", "play_layout")


def _imports(path: Path) -> set[str]:
    names = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names |= {a.name for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            names |= {node.module} | {f"{node.module}.{a.name}" for a in node.names}
    return names


def test_the_play_parts_do_not_import_the_play_screen():
    folder = Path(screens.__file__).parent
    found = [p for p in PARTS if (folder / f"{p}.py").exists()]
    assert set(found) == set(PARTS)
    for part in found:
        imported = _imports(folder / f"{part}.py")
        assert "s3gym_tui.screens.play" not in imported, part
        assert not any(name.startswith("s3gym_tui.screens.play.") for name in imported), part


@pytest.mark.parametrize("which", ["replay", "live"])
def test_both_play_screens_satisfy_what_their_parts_use(which):
    from s3gym_tui.engine.play import PlayOptions
    from s3gym_tui.screens.play import ReplayScreen
    from s3gym_tui.screens.play_live import LivePlayScreen
    from s3gym_tui.screens.play_support import PlayHost

    wanted = {n for n in vars(PlayHost) if not n.startswith("_")} | set(PlayHost.__annotations__)
    screen = ReplayScreen("e") if which == "replay" else LivePlayScreen(PlayOptions(game="trust", seed=0))
    missing = [n for n in wanted if not hasattr(type(screen), n) and n not in vars(screen)]
    assert not missing


def test_the_engine_and_the_layout_function_do_not_import_textual_themselves():
    import s3gym_tui.engine.live as live

    for path in (Path(live.__file__), Path(screens.__file__).parent / "play_layout.py"):
        assert not any(name.startswith("textual") for name in _imports(path)), path
