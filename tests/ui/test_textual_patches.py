"""The Textual patches (widgets/textual_patches.py): every private name they use is where they expect it,
with the signature they were written against, and another Textual is refused in one line."""

from __future__ import annotations

import importlib
import inspect

import pytest

from s3gym_tui.widgets import textual_patches
from s3gym_tui.widgets.textual_patches import PRIVATE_NAMES, UnsupportedTextual


def _instance(owner: type):
    """A fresh object of a Textual class, to look for the attributes its __init__ sets."""
    from textual.screen import Screen
    from textual.widget import AwaitMount

    if owner is AwaitMount:
        return AwaitMount(Screen(), [])
    return owner()


def test_every_private_name_the_patches_use_is_there_with_its_signature():
    """Fails when Textual moves, drops or changes one: read the patch that uses it before upgrading."""
    wrong = []
    for name, signature in PRIVATE_NAMES.items():
        module, path = name.split(":")
        owner_name, attribute = path.split(".")
        try:
            owner = getattr(importlib.import_module(module), owner_name, None)
        except ImportError:
            wrong.append(f"{name}: no module {module}")
            continue
        if owner is None:
            wrong.append(f"{name}: no {owner_name} in {module}")
            continue
        if signature is None:  # an attribute its objects get in __init__
            if not hasattr(_instance(owner), attribute):
                wrong.append(f"{name}: not an attribute of a new {owner_name}")
            continue
        try:
            found = textual_patches.replaced(name)
        except AttributeError:
            wrong.append(f"{name}: gone")
            continue
        function = found.fget if isinstance(found, property) else found
        if str(inspect.signature(function)) != signature:
            wrong.append(f"{name}: {inspect.signature(function)} (the patch expects {signature})")
    assert not wrong, "\n".join(wrong)


def test_the_patches_are_applied_once_and_the_names_they_replace_are_listed():
    from textual.screen import Screen

    textual_patches.apply()  # already applied (tests/ui/conftest.py): nothing wraps twice
    patched = Screen._refresh_layout
    textual_patches.apply()
    assert Screen._refresh_layout is patched
    assert textual_patches._originals, "apply() recorded nothing"
    assert set(textual_patches._originals) <= set(PRIVATE_NAMES), "a patched name is not checked"


def test_another_textual_is_refused_in_one_line(monkeypatch):
    monkeypatch.setattr(textual_patches, "_applied", False)
    monkeypatch.setattr(textual_patches, "textual_version", lambda: "9.0.0")
    with pytest.raises(UnsupportedTextual) as refused:
        textual_patches.apply()
    message = str(refused.value)
    assert "\n" not in message
    assert "9.0.0" in message and textual_patches.SUPPORTED_TEXTUAL in message


def test_the_app_refuses_another_textual_before_it_starts(monkeypatch, tmp_path, capsys):
    """`s3gym --db X` on another Textual: one error line on stderr, no traceback, a usage exit code."""
    from s3gym_tui.cli.entry import _main

    monkeypatch.setattr(textual_patches, "_applied", False)
    monkeypatch.setattr(textual_patches, "textual_version", lambda: "9.0.0")
    code = _main(["--db", str(tmp_path / "x.db")])
    err = capsys.readouterr().err
    assert code != 0
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error:") and "Textual 8.2.8" in lines[0], err
    assert "Traceback" not in err
    assert not (tmp_path / "x.db").exists()  # refused before the database was opened
