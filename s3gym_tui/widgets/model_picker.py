"""Model choice: built-in models, local servers and keyed providers found on the machine, or any
litellm string typed in; a button for the chosen model's api base, max tokens and timeout."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal
from textual.message import Message
from textual.widgets import Button, Input, Select

from s3gym_tui.providers import BUILTIN_MODELS
from s3gym_tui.textgate import safe, safe_text

PLACEHOLDER = "type a litellm model"  # the tooltip gives examples
SHORT_PLACEHOLDER = "or type"


SHORT_NAME_CHARS = 44


def short_name(model: str, limit: int = SHORT_NAME_CHARS) -> str:
    """A model id as the picker lists it: a GGUF path (what llama.cpp servers report) becomes its
    file stem, and a long id is shortened in the middle (the full id shows on focus)."""
    provider, sep, name = str(model).partition("/")
    if not sep:
        provider, name = "", str(model)
    if name.startswith(("/", "~", ".")) or "\\" in name or name.lower().endswith(".gguf"):
        stem = name.replace("\\", "/").rstrip("/").rsplit("/", 1)[-1]
        name = stem[:-5] if stem.lower().endswith(".gguf") else stem
    text = f"{provider}/{name}" if provider else name
    if len(text) > limit:
        head = limit // 2
        text = text[:head] + "…" + text[len(text) - (limit - 1 - head):]
    return text


@dataclass
class ModelsFound(Message):
    """Discovery finished (engine.discovery.FoundModel list; after a look for servers, `silent`:
    those that listed no models, engine.discovery.SilentServer); posted to the app's screens."""

    models: list
    silent: Optional[list] = None


class ModelPicker(Horizontal):
    """A Select of the built-in models, then the models discovery found (local servers on
    127.0.0.1, providers whose API keys are set), plus a free Input: one of the two holds the model
    (choosing in the list empties the input, typing clears the list's choice). `⚙` opens the model's settings. Posts ModelPicker.Changed when the model changes."""

    DEFAULT_CSS = """
    ModelPicker { height: auto; }
    ModelPicker Select { width: 1fr; }
    ModelPicker Input { width: 1fr; }
    ModelPicker #model-settings { width: 7; min-width: 7; }
    """

    class Opened(Message):
        """The person opened the model list (a good moment to look for more models)."""

    @dataclass
    class Described(Message):
        """The chosen model is listed by a short name: its full id, to show while it has focus."""

        model: str

    @dataclass
    class SettingsRequested(Message):
        """The person asked for the settings of `model` (`⚙`); the app opens the dialog."""

        model: str
        suggested_api_base: Optional[str] = None

    @dataclass
    class Changed(Message):
        picker: "ModelPicker"
        model: Optional[str]

        @property
        def control(self) -> "ModelPicker":
            return self.picker

    def __init__(self, default: str, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self.default = default
        self._found: list = []

    def _options(self) -> list[tuple]:
        """(label, model): a found model's name is what a server reported, shown through the gate."""
        options = [(name, name) for name, _ in BUILTIN_MODELS]
        known = {name for name, _ in BUILTIN_MODELS}
        for found in self._found:
            if found.model not in known:
                known.add(found.model)
                options.append((safe_text(f"{short_name(found.model)}  · {found.source}", one_line=True,
                                          max_chars=200), found.model))
        return options

    def compose(self) -> ComposeResult:
        self._found = list(getattr(self.app, "found_models", None) or [])
        values = {value for _, value in self._options()}
        yield Select(self._options(), value=self.default if self.default in values else Select.NULL,
                     allow_blank=True, prompt="built-in or found model", id="model-select")
        # a model named by the config file or $S3GYM_MODEL is shown (and used) as the gate shows it
        yield Input(value="" if self.default in values else safe(self.default, one_line=True, max_chars=500),
                    placeholder=PLACEHOLDER, id="model-input",
                    tooltip="Any litellm model string (it wins over the list), e.g. openai/gpt-4.1, "
                            "ollama/llama3, hosted_vllm/<model> with an api base (⚙)")
        yield Button("⚙", id="model-settings", tooltip="api base, max tokens, timeout, decoding and model args of this model")

    def fit(self, width: int) -> None:
        """A placeholder that fits the field at this terminal width (cut, it read "or any")."""
        field = self.query_one("#model-input", Input)
        placeholder = PLACEHOLDER if width >= 100 else SHORT_PLACEHOLDER
        if field.placeholder != placeholder:
            field.placeholder = placeholder

    def add_found(self, found: Sequence) -> None:
        """Add discovered models to the list (the choice is kept)."""
        self._found = list(found)
        select = self.query_one("#model-select", Select)
        value = select.value
        with select.prevent(Select.Changed):
            select.set_options(self._options())
            if value is not Select.NULL and value in {v for _, v in self._options()}:
                select.value = value

    def found(self, model: str):
        """The discovery record of `model` (its api base), if it was found on this machine."""
        return next((f for f in self._found if f.model == model), None)

    @property
    def model(self) -> Optional[str]:
        typed = self.query_one("#model-input", Input).value.strip()
        if typed:
            return typed
        value = self.query_one("#model-select", Select).value
        return None if value is Select.NULL else str(value)

    def set_model(self, model: str) -> None:
        values = {v for _, v in self._options()}
        if model in values:
            self.query_one("#model-select", Select).value = model
            self.query_one("#model-input", Input).value = ""
        else:
            self.query_one("#model-input", Input).value = safe(model, one_line=True, max_chars=500)

    def on_descendant_focus(self, _event) -> None:
        self.post_message(self.Opened())
        self._describe()

    def _describe(self) -> None:
        """The full id of a model the list shows shortened: as the list's tooltip and said once."""
        value = self.query_one("#model-select", Select).value
        model = None if value is Select.NULL else str(value)
        shortened = model is not None and short_name(model) != model
        self.query_one("#model-select", Select).tooltip = safe_text(model, one_line=True) if shortened else None
        if shortened:
            self.post_message(self.Described(model))

    @on(Select.Changed, "#model-select")
    def _selected(self, event: Select.Changed) -> None:
        event.stop()
        if event.value is not Select.NULL:
            self.query_one("#model-input", Input).value = ""
            found = self.found(str(event.value))
            settings = self.app.settings
            own = settings.model_settings(str(event.value))
            if found is not None and found.api_base and not own.api_base:  # a local server's model
                self.app.settings = settings.with_model_settings(
                    str(event.value), own.model_copy(update={"api_base": found.api_base}))
        self.post_message(self.Changed(self, self.model))
        self._describe()  # after Changed: the screen's compatibility check speaks first

    @on(Input.Changed, "#model-input")
    def _typed(self, event: Input.Changed) -> None:
        """One model shown: a typed model clears the list's choice (the typed string is the model)."""
        event.stop()
        select = self.query_one("#model-select", Select)
        if event.value.strip() and select.value is not Select.NULL:
            with select.prevent(Select.Changed):
                select.clear()
        self.post_message(self.Changed(self, self.model))

    @on(Button.Pressed, "#model-settings")
    def _settings(self, event: Button.Pressed) -> None:
        event.stop()
        model = self.model
        if not model:
            self.notify("Choose or type a model first.", severity="warning")
            return
        found = self.found(model)
        # the app opens the settings dialog (screens.dialogs.open_model_settings): a widget does not
        # reach up into the screens
        self.post_message(self.SettingsRequested(model, found.api_base if found else None))
