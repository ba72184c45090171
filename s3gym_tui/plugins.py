"""Where the layers meet: litellm providers that live above the providers package, named here so that
`s3gym_tui.providers` never imports them (no upward import, no cycle), yet registers them in any
process that uses the engine.

A plugin is named by import path ("module:attribute") and loaded lazily, on `providers.register()`.
The trained-model provider (`trained/<training>/<checkpoint>`, s3gym_tui.training.serve) is declared
here; other packages can add their own with `add_provider(...)` or an entry point in the
`s3gym.providers` group (name = provider, value = "module:attribute" of a litellm CustomLLM).
"""

from __future__ import annotations

import functools
import importlib
import re
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Optional

ENTRY_POINT_GROUP = "s3gym.providers"


@dataclass(frozen=True)
class ProviderPlugin:
    name: str  # the litellm provider prefix, e.g. "trained"
    target: str  # "module:attribute" of the handler (a litellm CustomLLM instance)
    model_pattern: Optional[str] = None  # a full-match regex for valid model names after the prefix
    description: str = ""

    def accepts(self, model_name: str) -> bool:
        return self.model_pattern is None or re.fullmatch(self.model_pattern, model_name) is not None

    def load(self) -> Any:
        module, _, attribute = self.target.partition(":")
        return getattr(importlib.import_module(module), attribute)


_PLUGINS: dict[str, ProviderPlugin] = {
    "trained": ProviderPlugin(
        "trained", "s3gym_tui.training.serve:HANDLER", r"[A-Za-z0-9][A-Za-z0-9_.:-]*/\d+(?:/repair|/grammar)?",
        "a trained checkpoint: trained/<training>/<checkpoint> (0 = its base model; /repair: replies breaking the "
        "answer format regenerated under the game's grammar; /grammar: every action reply constrained to it; "
        "needs the train extra)"),
}


def add_provider(plugin: ProviderPlugin) -> None:
    """Declare (or replace) a provider plugin; `providers.register()` loads it."""
    _PLUGINS[plugin.name] = plugin


@functools.lru_cache(maxsize=1)
def _installed() -> tuple[tuple[str, str], ...]:
    """(name, target) of the entry points of the group, read once per process: scanning every
    installed package's metadata costs ~12 ms, and the engine registers its providers on each call."""
    try:
        return tuple((ep.name, ep.value) for ep in entry_points(group=ENTRY_POINT_GROUP))
    except Exception:  # noqa: BLE001 - broken package metadata must not stop the built-in providers
        return ()


def provider_plugins() -> list[ProviderPlugin]:
    """The declared plugins, then any installed under the entry point group (declared ones win)."""
    found = dict(_PLUGINS)
    for name, target in _installed():
        found.setdefault(name, ProviderPlugin(name, target))
    return list(found.values())


def find(name: str) -> Optional[ProviderPlugin]:
    return next((p for p in provider_plugins() if p.name == name), None)
