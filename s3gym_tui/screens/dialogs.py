"""Modal dialogs: confirm, text input, error, fork options and an episode picker."""

from __future__ import annotations

from typing import Callable, Optional

from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import ModalScreen
from textual.widgets import Button, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

from s3gym_tui.textgate import safe, safe_text
from s3gym_tui.widgets.model_picker import ModelPicker

PATHWAY_CHOICES = [("none", "none"), ("history", "history"), ("summary", "summary")]
FORK_AS_SOURCE, FORK_NO_EXPERIENCE = "source", "none"  # ForkDialog's experience values (or run:<id>)


class DialogScreen(ModalScreen):
    """Shared shape: a bordered box in the middle; escape cancels (dismisses with None/False). The texts a
    dialog is given (questions naming runs, errors quoting providers) are shown through the gate."""

    BINDINGS = [Binding("escape", "cancel", "Cancel", id="dialog_cancel")]
    CANCEL_VALUE: object = None

    def action_cancel(self) -> None:
        self.dismiss(self.CANCEL_VALUE)


class ConfirmDialog(DialogScreen):
    """Yes/no question; dismisses with True or False."""

    CANCEL_VALUE = False
    BINDINGS = DialogScreen.BINDINGS + [Binding("y", "yes", "Yes", id="dialog_yes")]

    def __init__(self, question: str, yes: str = "Yes", no: str = "No") -> None:
        super().__init__()
        self.question, self.yes_label, self.no_label = question, yes, no

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Static(safe_text(self.question, max_lines=20), classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button(self.yes_label, variant="primary", id="yes")
                yield Button(self.no_label, id="no")

    def action_yes(self) -> None:
        self.dismiss(True)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(event.button.id == "yes")


class TextInputDialog(DialogScreen):
    """One line of text (prefilled); enter submits, escape cancels (None).

    With `check` (text -> (ok, why)), a value it refuses is shown with the reason and needs a
    second enter (or OK) before it is returned: a person sees the problem before it costs anything."""

    def __init__(self, title: str, value: str = "", placeholder: str = "", hint: str = "",
                 check: Optional[Callable[[str], tuple[bool, str]]] = None) -> None:
        super().__init__()
        # a prefilled value (a model's proposed action) is edited as shown: through the gate
        self.title_text, self.value, self.placeholder, self.hint = title, safe(value, one_line=True), placeholder, hint
        self.check = check
        self._refused: Optional[str] = None

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog"):
            yield Label(safe_text(self.title_text, one_line=True), classes="dialog-title")
            if self.hint:
                yield Static(safe_text(self.hint), classes="dialog-text muted")
            yield Input(value=self.value, placeholder=self.placeholder, id="dialog-input")
            yield Static("", id="dialog-note", classes="dialog-text error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("OK", variant="primary", id="ok")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#dialog-note").display = False
        self.query_one(Input).focus()

    def _finish(self, value: str) -> None:
        if self.check is not None and value.strip() and value.strip() != self._refused:
            ok, why = self.check(value.strip())
            if not ok:
                self._refused = value.strip()
                note = self.query_one("#dialog-note", Static)
                note.update(safe_text(f"✗ Refused: {why}  Enter again to use it anyway."))
                note.display = True
                return
        self.dismiss(value)

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        if self._refused is not None and event.value.strip() != self._refused:
            self._refused = None
            self.query_one("#dialog-note").display = False

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        self._finish(event.value)

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ok":
            self._finish(self.query_one(Input).value)
        else:
            self.dismiss(None)


class ErrorDialog(DialogScreen):
    """An error that needs reading (a notification suffices for most)."""

    BINDINGS = DialogScreen.BINDINGS + [Binding("enter", "cancel", "Close", id="dialog_close", show=False)]

    def __init__(self, title: str, message: str) -> None:
        super().__init__()
        self.title_text, self.message = title, message

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-error"):
            yield Label(safe_text(self.title_text, one_line=True), classes="dialog-title")
            yield Static(safe_text(self.message, max_chars=4000, max_lines=40), classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Close", variant="error", id="close")

    @on(Button.Pressed)
    def _pressed(self, _event: Button.Pressed) -> None:
        self.dismiss(None)


class ForkDialog(DialogScreen):
    """Model, pathway and experience for a fork; dismisses with a dict or None.

    Experience: `source` (the default: what the source saw at that step), `none`, or `run:<id>` (that
    run's latest state, a person's choice, recorded with the fork; the engine stops a borrow from the
    source's own run at the source's state). `experiences` are (label, value) pairs.

    Keys: tab moves through the fields and buttons in order; enter forks from any field (the form is
    complete with a model), on a button it presses that button, and in an open list it picks the
    entry; space or the arrows open a list; escape cancels."""

    BINDINGS = DialogScreen.BINDINGS + [Binding("enter", "fork", "Fork", id="dialog_fork", show=False,
                                                priority=True)]
    KEYS_HINT = "enter forks · tab moves to the next field · space or ↓ opens a list · esc cancels"

    def __init__(self, title: str, model: str, pathway: str, experiences: list[tuple[str, str]],
                 game: Optional[str] = None) -> None:
        super().__init__()
        self.title_text, self.model, self.pathway = title, model, pathway
        self.experiences, self.game = experiences, game

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label(safe_text(self.title_text, one_line=True), classes="dialog-title")
            with Horizontal(classes="field-row"):
                yield Label("Model", classes="field-label-wide")
                yield ModelPicker(self.model, id="fork-model")
            with Horizontal(classes="field-row"):
                yield Label("Pathway", classes="field-label-wide")
                yield Select(PATHWAY_CHOICES, value=self.pathway if self.pathway != "trained" else "none",
                             allow_blank=False, id="fork-pathway")
            with Horizontal(classes="field-row"):
                yield Label("Experience", classes="field-label-wide")
                yield Select([(safe_text(label, one_line=True), value) for label, value in self.experiences],
                             value=FORK_AS_SOURCE, allow_blank=False, id="fork-experience")
            yield Static("", id="fork-error", classes="dialog-text error")
            yield Static(self.KEYS_HINT, id="fork-keys", classes="muted")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Fork", variant="primary", id="fork")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#fork-error").display = False
        self.query_one(ModelPicker).fit(self.app.size.width)

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action == "fork":  # enter: a button presses itself, an open list picks its entry
            focused = self.focused
            return not isinstance(focused, Button) and not (focused is not None and focused.parent is not None
                                                             and isinstance(focused.parent, Select))
        return True

    def action_fork(self) -> None:
        """Fork with what the form holds, or say in the dialog what is missing."""
        model = self.query_one(ModelPicker).model
        error = self.query_one("#fork-error", Static)
        problem = "Choose a model (or type a litellm model string)." if not model else None
        if model and self.game:
            from s3gym_tui.engine.preflight import model_game_problem

            problem = model_game_problem(model, self.game)
        if problem:  # said in the dialog (a notification would cover it)
            error.update(safe_text(f"✗ {problem}"))
            error.display = True
            return
        choice = str(self.query_one("#fork-experience", Select).value)
        experience, _, run_id = choice.partition(":")
        self.dismiss({"model": model, "pathway": str(self.query_one("#fork-pathway", Select).value),
                      "experience": experience, "run_id": run_id or None})

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "fork":
            self.action_fork()
        else:
            self.dismiss(None)


class EpisodePickerDialog(DialogScreen):
    """Pick one stored episode of a run (opens it read-only with fork available)."""

    def __init__(self, title: str, episodes: list[tuple[str, str]]) -> None:
        super().__init__()
        self.title_text, self.episodes = title, episodes

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label(safe_text(self.title_text, one_line=True), classes="dialog-title")
            if self.episodes:
                yield OptionList(*[Option(safe_text(label, one_line=True), id=episode_id)
                                   for episode_id, label in self.episodes],
                                 id="episode-list")
            else:
                yield Static("This run has no episodes yet.", classes="dialog-text")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Cancel", id="cancel")

    @on(OptionList.OptionSelected)
    def _chosen(self, event: OptionList.OptionSelected) -> None:
        self.dismiss(event.option.id)

    @on(Button.Pressed)
    def _pressed(self, _event: Button.Pressed) -> None:
        self.dismiss(None)


def model_args_text(args: dict) -> str:
    """`key=value; ...` of the model arguments that may be shown (secrets left out)."""
    import json

    from s3gym_tui.engine.decoding import storable_args

    return "; ".join(f"{k}={v if isinstance(v, str) else json.dumps(v)}" for k, v in storable_args(args).items())


class ModelSettingsDialog(DialogScreen):
    """A model's api base, max tokens, timeout, decoding and model arguments: for this session (Apply) or into the config
    file (Save). Dismisses with (ModelSettings, save) or None."""

    def __init__(self, model: str, current, suggested_api_base: Optional[str] = None) -> None:
        super().__init__()
        self.model, self.current, self.suggested = model, current, suggested_api_base

    def compose(self) -> ComposeResult:
        c = self.current
        with Vertical(classes="dialog dialog-wide"):
            yield Label(safe_text(f"Settings of {self.model}", one_line=True), classes="dialog-title")
            yield Static("Empty fields use the defaults (no api base, 14,000 max tokens, 120 s timeout). "
                         "Run settings (the run dialog) can override them for one run.",
                         classes="dialog-text muted")
            with Horizontal(classes="field-row"):
                yield Label("API base", classes="field-label-wide")
                yield Input(safe(c.api_base or self.suggested or "", one_line=True),
                            placeholder="e.g. http://127.0.0.1:11434",
                            id="ms-api-base")
            with Horizontal(classes="field-row"):
                yield Label("Max tokens", classes="field-label-wide")
                yield Input("" if c.max_tokens is None else str(c.max_tokens), placeholder="14000",
                            type="integer", id="ms-max-tokens")
            with Horizontal(classes="field-row"):
                yield Label("Timeout (s)", classes="field-label-wide")
                yield Input("" if c.timeout_s is None else f"{c.timeout_s:g}", placeholder="120",
                            type="number", id="ms-timeout")
            with Horizontal(classes="field-row"):
                yield Label("Decoding", classes="field-label-wide")
                yield Select([("free", "free"), ("grammar (the game's action grammar)", "grammar")],
                             value=c.decoding or Select.NULL, prompt="default (free)", id="ms-decoding")
            with Horizontal(classes="field-row"):
                yield Label("Model args", classes="field-label-wide")
                yield Input(safe(model_args_text(c.model_args), one_line=True), placeholder="top_k=40; min_p=0.05",
                            id="ms-model-args", tooltip="KEY=VALUE passed to the provider through litellm, "
                            "separated by ';' (VALUE read as JSON when it can be). Keys that look like "
                            "secrets are kept but never shown.")
            yield Static("", id="ms-error", classes="dialog-text error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Apply", variant="primary", id="ms-apply")
                yield Button("Save to config", id="ms-save")
                yield Button("Cancel", id="ms-cancel")

    def on_mount(self) -> None:
        self.query_one("#ms-error").display = False
        self.query_one("#ms-api-base", Input).focus()

    def values(self):
        """The settings in the fields (raises ValueError with a one-line reason)."""
        from pydantic import ValidationError

        from s3gym_tui.config import ModelSettings

        def field(selector: str) -> Optional[str]:
            text = self.query_one(selector, Input).value.strip()
            return text or None

        from s3gym_tui.engine.decoding import ModelArgError, parse_model_args, storable_args

        decoding = self.query_one("#ms-decoding", Select).value
        text = self.query_one("#ms-model-args", Input).value
        try:
            typed = parse_model_args([part.strip() for part in text.split(";") if part.strip()])
        except ModelArgError as exc:
            raise ValueError(str(exc).replace("--model-arg", "model args")) from exc
        hidden = {k: v for k, v in self.current.model_args.items() if k not in storable_args({k: v})}
        try:
            return ModelSettings(api_base=field("#ms-api-base"), max_tokens=field("#ms-max-tokens"),
                                 timeout_s=field("#ms-timeout"),
                                 decoding=None if decoding is Select.NULL else str(decoding),
                                 model_args={**hidden, **typed})
        except ValidationError as exc:
            first = exc.errors()[0]
            raise ValueError(f"{'.'.join(str(x) for x in first.get('loc', ()))}: {first.get('msg')}") from exc

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        if event.button.id == "ms-cancel":
            self.dismiss(None)
            return
        try:
            own = self.values()
        except ValueError as exc:
            error = self.query_one("#ms-error", Static)
            error.update(safe_text(str(exc)))
            error.display = True
            return
        self.dismiss((own, event.button.id == "ms-save"))


def open_model_settings(app, model: str, suggested_api_base: Optional[str] = None) -> None:
    """Open the settings of `model` (what the model picker's `⚙` asks for); the result applies to this
    session, or is also saved to the config file."""

    def done(result) -> None:
        if result is None:
            return
        own, save = result
        app.settings = app.settings.with_model_settings(model, own)
        if save:
            from s3gym_tui.config import ConfigError, save_model_settings

            try:
                path = save_model_settings(model, own)
            except ConfigError as exc:
                app.notify(str(exc), severity="error", title="Not saved")
                return
            app.notify(f"Saved the settings of {model} to {path}.")
        else:
            app.notify(f"Settings of {model} set for this session.")

    app.push_screen(ModelSettingsDialog(model, app.settings.model_settings(model),
                                        suggested_api_base=suggested_api_base), done)
