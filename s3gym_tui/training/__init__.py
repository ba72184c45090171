"""The Training pathway: single-game experts from a run's exploration (SFT on self-judged datasets,
locally with TRL + PEFT or as a remote fine-tuning job; GRPO on the run's exploration seeds with
self-judged rewards), two-phase distillation of experts into one multi-game student, the trained
models served through litellm, strict-mode checkpoint evaluation and the consolidation matrix.
No Textual here; torch and friends are imported only when training or serving.
"""

from __future__ import annotations

import importlib

INSTALL_HINT = 'pip install torch==2.13.0 -e ".[train]"'
EXTRA_MODULES: tuple[str, ...] = ("torch", "transformers", "peft", "trl", "datasets", "accelerate")


class MissingExtra(RuntimeError):
    """The optional `train` extra is not installed; the message says how to install it (one line)."""


def missing_modules() -> list[str]:
    """The modules of the train extra that cannot be imported (imports them: slow the first time)."""
    missing = []
    for name in EXTRA_MODULES:
        try:
            importlib.import_module(name)
        except ImportError:
            missing.append(name)
    return missing


def missing_message(missing: list[str]) -> str:
    return (f"training needs the optional train extra ({', '.join(missing)} not importable): "
            f"{INSTALL_HINT}")


def require_extra() -> None:
    """Raise MissingExtra (one line, with the install command) unless the train extra is importable."""
    missing = missing_modules()
    if missing:
        raise MissingExtra(missing_message(missing))


__all__ = ["EXTRA_MODULES", "INSTALL_HINT", "MissingExtra", "missing_message", "missing_modules", "require_extra"]
