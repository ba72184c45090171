"""The play screen is built from parts it owns (live driver, fork controls, credit link): the parts
are typed by play_support.PlayHost and never import the screen back (no import circle)."""

from __future__ import annotations

import ast
from pathlib import Path

import s3gym_tui.screens as screens

PARTS = ("play_live", "play_replay", "play_support", "play_credit")


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
    assert {"play_live", "play_replay", "play_support"} <= set(found)
    for part in found:
        imported = _imports(folder / f"{part}.py")
        assert "s3gym_tui.screens.play" not in imported, part
        assert not any(name.startswith("s3gym_tui.screens.play.") for name in imported), part


def test_the_play_screen_satisfies_what_its_parts_use():
    from s3gym_tui.screens.play import PlayScreen
    from s3gym_tui.screens.play_support import PlayHost

    wanted = {n for n in vars(PlayHost) if not n.startswith("_")} | set(PlayHost.__annotations__)
    screen = PlayScreen(episode_id="e")
    missing = [n for n in wanted if not hasattr(PlayScreen, n) and n not in vars(screen)]
    assert not missing
