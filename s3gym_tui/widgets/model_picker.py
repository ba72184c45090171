"""Model choice: the built-in models in a Select (listed first), or any litellm string typed in."""

from __future__ import annotations

from typing import Optional

from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.widgets import Input, Select

from s3gym_tui.providers import BUILTIN_MODELS


class ModelPicker(Horizontal):
    """A Select of `providers.BUILTIN_MODELS` plus a free Input; the typed string wins when set."""

    DEFAULT_CSS = """
    ModelPicker { height: auto; }
    ModelPicker Select { width: 3fr; }
    ModelPicker Input { width: 2fr; }
    """

    def __init__(self, default: str, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self.default = default

    def compose(self) -> ComposeResult:
        builtin = {name for name, _ in BUILTIN_MODELS}
        yield Select([(name, name) for name, _ in BUILTIN_MODELS],
                     value=self.default if self.default in builtin else Select.NULL,
                     allow_blank=True, prompt="built-in model", id="model-select")
        yield Input(value="" if self.default in builtin else self.default,
                    placeholder="or any litellm model, e.g. openai/gpt-4.1", id="model-input")

    @property
    def model(self) -> Optional[str]:
        typed = self.query_one("#model-input", Input).value.strip()
        if typed:
            return typed
        value = self.query_one("#model-select", Select).value
        return None if value is Select.NULL else str(value)

    def set_model(self, model: str) -> None:
        builtin = {name for name, _ in BUILTIN_MODELS}
        if model in builtin:
            self.query_one("#model-select", Select).value = model
            self.query_one("#model-input", Input).value = ""
        else:
            self.query_one("#model-input", Input).value = model
