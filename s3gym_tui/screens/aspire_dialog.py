"""The new-ASPIRE-run dialog: a goal of the goal set (its vague text, never its hidden suite), the agent's
model, the protocol, the explicit-goal control and the budget. Dismisses with the `s3gym aspire` argv
to start, or None."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Checkbox, Input, Label, Select, Static

from s3gym_tui.screens.dialogs import DialogScreen
from s3gym_tui.textgate import safe_text

PROTOCOL_CHOICES = [("final-only (no score before the end)", "final"),
                    ("adaptive (a few aggregate scores; score-gated retention)", "adaptive")]
# (budget key, label, input type, hint): prefilled with the command's defaults (engine/aspire/budget.py);
# an empty field lifts that limit
BUDGET_FIELDS = (("calls", "Model calls", "integer", "agent turns and the episodes' calls together"),
                 ("tokens", "Tokens", "integer", "input + output"),
                 ("dollars", "Dollars", "number", "at litellm's prices (empty: no limit)"),
                 ("seconds", "Wall time (s)", "number", "the agent's work (hidden evaluation excluded)"),
                 ("decisions", "Decisions", "integer", "tool calls, bad ones included"))


def goal_choices() -> list[tuple[str, str]]:
    """(label, goal id) of the goal set: the vague goal as the agent reads it (never its hidden suite)."""
    from s3gym_tui.engine.aspire.goals import GOALS

    return [(safe_text(f"{g.id}: {g.text}", one_line=True, max_chars=120), g.id) for g in GOALS]


def default_budget() -> dict:
    from s3gym_tui.engine.aspire.budget import Budget

    return Budget().as_dict()


class AspireDialog(DialogScreen):
    """Settings of a new ASPIRE run; ctrl+s starts it (as its own process)."""

    BINDINGS = DialogScreen.BINDINGS + [Binding("ctrl+s", "start", "Start", id="aspire_dialog_start",
                                                priority=True)]
    DEFAULT_CSS = """
    AspireDialog .asp-row { height: 1; margin-bottom: 1; }
    AspireDialog .asp-row Label { width: 16; height: 1; color: $text-muted; }
    AspireDialog .asp-row Input { width: 20; height: 1; background: $boost; }
    AspireDialog .asp-row Input:focus { background: $primary 30%; }
    AspireDialog .asp-row Select { width: 1fr; height: 1; }
    AspireDialog .asp-row #asp-model { width: 1fr; }
    AspireDialog .asp-hint { width: 1fr; height: 1; padding: 0 1; color: $text-muted; text-wrap: nowrap;
                             text-overflow: ellipsis; }
    AspireDialog #asp-error { height: auto; color: $text-error; }
    AspireDialog.-short .asp-row { margin-bottom: 0; }
    AspireDialog.-short .dialog-title { margin-bottom: 0; }
    """

    def __init__(self, db: Path, model: str) -> None:
        super().__init__()
        self.db = Path(db)
        # a game's scripted player is no agent: the offline plan (`scripted`) is, and a real model is typed
        self.model = "scripted" if not model or model.startswith("scripted") else model
        self.goals = goal_choices()
        self.budget = default_budget()

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label("New ASPIRE run: a vague goal, judged on hidden games", classes="dialog-title")
            with Horizontal(classes="asp-row"):
                yield Label("Goal")
                yield Select(self.goals, value=self.goals[0][1] if self.goals else Select.NULL,
                             allow_blank=not self.goals, id="asp-goal", compact=True)
            with Horizontal(classes="asp-row"):
                yield Label("Model")
                yield Input(safe_text(self.model, one_line=True).plain, id="asp-model", compact=True,
                            placeholder="a litellm model with tool calling; `scripted` plays a fixed plan offline")
            with Horizontal(classes="asp-row"):
                yield Label("Protocol")
                yield Select(PROTOCOL_CHOICES, value="final", allow_blank=False, id="asp-protocol", compact=True)
            with Horizontal(classes="asp-row"):
                yield Label("Control")
                yield Checkbox("explicit goal (games and metric named)", id="asp-explicit", compact=True)
            for key, label, kind, hint in BUDGET_FIELDS:
                value = self.budget.get(key)
                with Horizontal(classes="asp-row"):
                    yield Label(label)
                    yield Input("" if value is None else format(value, "g") if isinstance(value, float) else str(value),
                            type=kind, id=f"asp-{key}", compact=True)
                    yield Static(hint, classes="asp-hint")
            yield Static("", id="asp-error")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Start (ctrl+s)", variant="success", id="asp-start", compact=True)
                yield Button("Cancel (esc)", id="asp-cancel", compact=True)

    def on_mount(self) -> None:
        self.query_one("#asp-goal").focus()

    def read_argv(self) -> list[str]:
        """The command of the fields (ValueError with a one-line reason)."""
        from s3gym_tui.engine.detached import aspire_argv

        goal = self.query_one("#asp-goal", Select).value
        if goal is Select.NULL:
            raise ValueError("Goal: choose one")
        model = self.query_one("#asp-model", Input).value.strip()
        if not model:
            raise ValueError("Model: a litellm model is needed")
        budget: dict = {}
        for key, label, kind, _ in BUDGET_FIELDS:
            text = self.query_one(f"#asp-{key}", Input).value.strip()
            if not text:
                budget[key] = None
                continue
            try:
                value = float(text) if kind == "number" else int(text)
            except ValueError:
                raise ValueError(f"{label}: {text!r} is not a number") from None
            if value <= 0:
                raise ValueError(f"{label}: must be more than 0")
            budget[key] = value
        return aspire_argv(self.db, goal_id=str(goal), model=model,
                           protocol=str(self.query_one("#asp-protocol", Select).value),
                           explicit=self.query_one("#asp-explicit", Checkbox).value, budget=budget)

    def action_start(self) -> None:
        try:
            argv = self.read_argv()
        except ValueError as exc:
            self.query_one("#asp-error", Static).update(safe_text(f"✗ {exc}", one_line=True))
            return
        self.dismiss(argv)

    @on(Button.Pressed, "#asp-start")
    def _start(self) -> None:
        self.action_start()

    @on(Button.Pressed, "#asp-cancel")
    def _cancel(self) -> None:
        self.dismiss(None)

    @on(Input.Changed)
    def _changed(self, event: Input.Changed) -> None:
        event.stop()
        self.query_one("#asp-error", Static).update(Text(""))
