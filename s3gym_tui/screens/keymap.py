"""Checking the config file's [keymap] before the app uses it: every id a real binding, every key
a key Textual knows, and always a way to quit (one line naming the config line that is wrong)."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Iterable, Optional

from textual.keys import Keys, key_to_character

MODIFIERS = {"ctrl", "shift", "alt", "meta", "super", "hyper"}
_NAMED = {k.value for k in Keys} | {k.value.split("+")[-1] for k in Keys}


def binding_ids(app_class: type) -> set[str]:
    """Every binding id of the app (its class given by the caller) and its screens: the ids a keymap
    may name."""
    from s3gym_tui.screens import (analysis_common, aspire, aspire_dialog, compare, credit, dialogs, help,
                                   home, pairs, play, protocol, report, run_control, search, summaries, sweep,
                                   training)

    ids: set[str] = set()
    classes: list[type] = [app_class]
    for module in (analysis_common, aspire, aspire_dialog, compare, credit, dialogs, help, home, pairs, play,
                   protocol, report, run_control, search, summaries, sweep, training):
        classes += [v for v in vars(module).values() if isinstance(v, type)]
    for cls in classes:
        for klass in getattr(cls, "__mro__", ()):
            for binding in vars(klass).get("BINDINGS", ()) or ():
                if getattr(binding, "id", None):
                    ids.add(binding.id)
    return ids


def key_problem(spec: str) -> Optional[str]:
    """Why a binding's key string (e.g. "ctrl+n,f5") is not usable, or None."""
    if not isinstance(spec, str) or not spec.strip():
        return "no key given"
    for key in spec.split(","):
        key = key.strip()
        if not key:
            return f"an empty key in {spec!r}"
        *mods, name = key.split("+")
        if not name:
            return f"{key!r} ends in '+' (write e.g. ctrl+n)"
        bad = [m for m in mods if m not in MODIFIERS]
        if bad:
            return f"{bad[0]!r} in {key!r} is not a modifier ({', '.join(sorted(MODIFIERS))})"
        if len(set(mods)) != len(mods):
            return f"{key!r} repeats a modifier"
        if len(name) != 1 and name not in _NAMED and key_to_character(name) is None:
            return f"{name!r} in {key!r} is not a key name (e.g. n, f5, enter, question_mark)"
    return None


def _line_of(text: str, binding_id: str) -> Optional[int]:
    in_keymap = False
    for number, line in enumerate(text.splitlines(), start=1):
        stripped = line.strip()
        if stripped.startswith("["):
            in_keymap = stripped.strip("[] ") == "keymap"
        elif in_keymap and re.match(rf"['\"]?{re.escape(binding_id)}['\"]?\s*=", stripped):
            return number
    return None


def keymap_problem(keymap: dict[str, str], known: Iterable[str], quit_default: str = "ctrl+q",
                   source: Optional[Path] = None) -> Optional[str]:
    """One line saying what is wrong with `keymap` (and where), or None."""
    known = set(known)
    text = ""
    if source is not None:
        try:
            text = source.read_text(encoding="utf-8")
        except OSError:
            text = ""

    def where(binding_id: str) -> str:
        line = _line_of(text, binding_id) if text else None
        place = f"{source} line {line}" if line else (str(source) if source else "config")
        return f"{place}: keymap.{binding_id}"

    for binding_id, spec in keymap.items():
        if binding_id not in known:
            close = sorted(k for k in known if k.split("_")[-1] == binding_id.split("_")[-1])[:3]
            hint = f" (did you mean {', '.join(close)}?)" if close else ""
            return f"{where(binding_id)}: no binding has this id{hint}; `?` in the app lists them"
        problem = key_problem(spec)
        if problem:
            return f"{where(binding_id)} = {spec!r}: {problem}"
    quit_keys = {k.strip() for k in keymap.get("quit", quit_default).split(",")}
    for binding_id, spec in keymap.items():
        if binding_id == "quit":
            continue
        taken = quit_keys & {k.strip() for k in spec.split(",")}
        if taken:
            return (f"{where(binding_id)} = {spec!r}: {sorted(taken)[0]} is the quit key; bind quit "
                    f"to another key first, so that the app can always be left")
    return None
