"""The Training pathway: SFT datasets from self-judged exploration steps, a LoRA fine-tune (local,
TRL + PEFT) or a remote fine-tuning job, the trained model served through litellm, and strict-mode
checkpoint evaluation. No Textual here; torch and friends are imported only when training or serving.
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
