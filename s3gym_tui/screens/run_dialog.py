"""The run dialog: a protocol run's settings, and what they will cost, before anything starts."""

from __future__ import annotations

from typing import Any, Optional

from pydantic import ValidationError
from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Button, Input, Label, Select, Static

from s3gym_tui.models import RunConfig
from s3gym_tui.screens.dialogs import DialogScreen
from s3gym_tui.textgate import safe, safe_text
from s3gym_tui.widgets.thread_work import thread_work

# (field, label, input type, placeholder / hint)
FIELDS: tuple[tuple[str, str, str, str], ...] = (
    ("explore_episodes", "Episodes", "integer", "exploration episodes (paper: 30)"),
    ("eval_every", "Eval every", "integer", "evaluate after every N exploration episodes (paper: 3)"),
    ("eval_episodes", "Eval episodes", "integer", "evaluation episodes per checkpoint (paper: 3)"),
    ("history_budget", "History budget", "integer", "tokens of previous-episode history (paper: 100,000)"),
    ("step_cap", "Step cap", "integer", "steps per episode, at most 64 (the game's own cap applies too)"),
    ("max_tokens", "Max tokens", "integer", "output cap per reply (paper: 14,000)"),
    ("temperature", "Temperature", "number", "0 = greedy"),
    ("api_base", "API base", "text", "empty: the provider's default; e.g. http://127.0.0.1:11434"),
    ("timeout_s", "Timeout (s)", "number", "per model call"),
)


DECODING_CHOICES = [("free", "free"), ("grammar", "grammar")]


class RunDialog(DialogScreen):
    """Settings of a new protocol run for (model, game, pathway), prefilled with the paper's
    defaults and the model's own settings, and the estimate of calls, tokens and cost, recomputed
    off the UI thread as the fields change. Dismisses with a RunConfig, or None."""

    BINDINGS = DialogScreen.BINDINGS + [Binding("ctrl+s", "start", "Start", id="run_dialog_start", priority=True)]
    DEFAULT_CSS = """
    RunDialog #run-fields { height: auto; max-height: 20; }
    RunDialog .run-row { height: 1; margin-bottom: 1; }
    RunDialog .run-row Label { width: 16; height: 1; color: $text-muted; }
    RunDialog .run-row Input { width: 26; height: 1; background: $boost; }
    RunDialog .run-row Input:focus { background: $primary 30%; }
    RunDialog .run-row .run-hint { width: 1fr; height: 1; padding: 0 1; color: $text-muted;
                                   text-wrap: nowrap; text-overflow: ellipsis; }
    RunDialog .run-row Select { width: 26; height: 1; }
    RunDialog #run-server { height: auto; padding: 0 1; color: $text-muted; display: none; }
    RunDialog #run-estimate { height: auto; padding: 0 1; background: $boost; }
    RunDialog #run-error { height: auto; color: $text-error; }
    RunDialog.-short .run-row { margin-bottom: 0; }
    RunDialog.-short #run-fields { max-height: 9; }
    """

    def __init__(self, model: str, game: str, pathway: str, model_settings: Any = None) -> None:
        super().__init__()
        self.model, self.game, self.pathway = model, game, pathway
        own = model_settings
        base = RunConfig(model=model, game=game, pathway=pathway)
        if own is not None:
            base = base.model_copy(update={k: v for k, v in (("api_base", own.api_base),
                                                             ("max_tokens", own.max_tokens),
                                                             ("timeout_s", own.timeout_s),
                                                             ("decoding", own.decoding),
                                                             ("model_args", own.model_args or None))
                                           if v is not None})
        self.defaults = base
        self.config: Optional[RunConfig] = base
        self.estimate = None  # engine.estimate.RunEstimate of the fields, once computed
        self._estimated_for: Optional[RunConfig] = None
        self.server_notes: tuple[str, ...] = ()  # what the model's server said (engine.servers), shown
        self._described_base: Optional[str] = "?"

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label(safe_text(f"New protocol run: {self.game} · {self.model} · pathway {self.pathway}", one_line=True),
                        classes="dialog-title")
            with VerticalScroll(id="run-fields"):
                for name, label, kind, hint in FIELDS:
                    value = getattr(self.defaults, name)
                    with Horizontal(classes="run-row"):
                        yield Label(label)
                        yield Input("" if value is None else (f"{value:g}" if isinstance(value, float) else
                                                              safe(str(value), one_line=True)),
                                    type=kind, id=f"run-{name}", compact=True,
                                    placeholder="default" if kind == "text" else "")
                        yield Static(hint, classes="run-hint")
                with Horizontal(classes="run-row"):
                    yield Label("Decoding")
                    yield Select(DECODING_CHOICES, value=self.defaults.decoding, allow_blank=False,
                                 id="run-decoding", compact=True)
                    yield Static("grammar: replies constrained to the game's action grammar (changes what "
                                 "is measured)", classes="run-hint")
            yield Static("", id="run-error")
            yield Static("", id="run-server")
            yield Static(Text("estimating…", style="italic"), id="run-estimate")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start run (ctrl+s)", variant="success", id="run-start", compact=True)
                yield Button("Cancel (esc)", id="run-cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one(f"#run-{FIELDS[0][0]}", Input).focus()
        self._estimate(self.defaults)
        self._ask_server(self.defaults)

    def _ask_server(self, config: RunConfig) -> None:
        self._described_base = config.api_base
        self._describe_server(config)

    # ----- what the model's server says about itself (off the UI thread) ------------------------
    @thread_work(exclusive=True, group="run-server")
    def _describe_server(self, config: RunConfig) -> None:
        from s3gym_tui.engine.fitting import fit_config

        try:
            fitted, notes = fit_config(config)
        except Exception as exc:  # noqa: BLE001 - a server that cannot be asked: the fields stay as they are
            fitted, notes = config, (f"the server could not be asked: {exc}",)
        self.app.call_from_thread(self._show_server, config, fitted, notes)

    def _show_server(self, asked: RunConfig, fitted: RunConfig, notes: tuple[str, ...]) -> None:
        """Max tokens and the history budget fitted to the stated context (unless the person changed
        them), the context and server kind recorded with the run, and a note saying so."""
        if asked.api_base != self._described_base:
            return  # the person has named another server since: its answer comes
        self.server_notes = notes
        self.defaults = self.defaults.model_copy(update={"context_tokens": fitted.context_tokens,
                                                         "server_kind": fitted.server_kind})
        for name in ("max_tokens", "history_budget"):
            field = self.query_one(f"#run-{name}", Input)
            if field.value.strip() == str(getattr(asked, name)) and getattr(fitted, name) != getattr(asked, name):
                field.value = str(getattr(fitted, name))
        server = self.query_one("#run-server", Static)
        server.update(safe_text("\n".join(notes), max_chars=1000))
        server.display = bool(notes)
        try:
            self.config = self.read_config()
        except ValueError:
            pass

    # ----- reading the fields ---------------------------------------------------------------
    def read_config(self) -> RunConfig:
        """The config in the fields (raises ValueError with a one-line reason)."""
        values: dict[str, Any] = {}
        for name, label, kind, _ in FIELDS:
            text = self.query_one(f"#run-{name}", Input).value.strip()
            if kind == "text":
                values[name] = text or None
            elif text:
                values[name] = text
            else:
                raise ValueError(f"{label}: a value is needed")
        values["decoding"] = str(self.query_one("#run-decoding", Select).value)
        try:
            return RunConfig.model_validate({**self.defaults.model_dump(), **values})
        except ValidationError as exc:
            first = exc.errors()[0]
            name = str(first.get("loc", ("?",))[0])
            label = next((lbl for n, lbl, _, _ in FIELDS if n == name), name)
            raise ValueError(f"{label}: {first.get('msg')}") from exc

    @on(Select.Changed, "#run-decoding")
    def _decoding_changed(self, event: Select.Changed) -> None:
        event.stop()
        self._fields_changed()

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        self._fields_changed()

    def _fields_changed(self) -> None:
        error = self.query_one("#run-error", Static)
        try:
            config = self.read_config()
        except ValueError as exc:
            self.config = None
            error.update(safe_text(f"✗ {exc}"))
            return
        error.update("")
        self.config = config
        if config.api_base != self._described_base:  # another server: ask it
            self._ask_server(config)
        if config != self._estimated_for:
            self.query_one("#run-estimate", Static).update(Text("estimating…", style="italic"))
            self._estimate(config)

    @thread_work(exclusive=True, group="run-estimate")
    def _estimate(self, config: RunConfig) -> None:
        from s3gym_tui.engine.estimate import estimate_run

        try:
            estimate = estimate_run(config)
            text = Text()
            text.append("Estimate before starting\n", style="bold")
            text.append("\n".join(estimate.lines()))
        except Exception as exc:  # noqa: BLE001 - an estimate problem must not block the dialog
            text = Text(f"no estimate: {exc}", style="italic")
            estimate = None
        self.app.call_from_thread(self._show_estimate, config, text, estimate)

    def _show_estimate(self, config: RunConfig, text: Text, estimate) -> None:
        if config == self.config:  # still what the fields say
            self._estimated_for = config
            self.estimate = estimate
            self.query_one("#run-estimate", Static).update(safe_text(text))

    # ----- finishing -----------------------------------------------------------------------
    def action_start(self) -> None:
        try:
            config = self.read_config()
        except ValueError as exc:
            self.query_one("#run-error", Static).update(safe_text(f"✗ {exc}"))
            return
        self.dismiss(config)

    @on(Button.Pressed, "#run-start")
    def _start(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#run-cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Submitted)
    def _submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self.focus_next()
