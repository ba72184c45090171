"""The annotation dialog (`m` on Search, Play replay and Compare): a label from the config's list,
a note, and for a step the action it should have taken. Dismisses with a dict or None."""

from __future__ import annotations

from typing import Optional, Sequence

from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import Button, Input, Label, Select, Static

from s3gym_tui.screens.dialogs import DialogScreen
from s3gym_tui.textgate import safe_text


class AnnotateDialog(DialogScreen):
    """Label, note and (steps) a corrected action for one target."""

    def __init__(self, title: str, labels: Sequence[str], *, step: bool, existing: str = "") -> None:
        super().__init__()
        self.title_text, self.labels, self.step, self.existing = title, tuple(labels), step, existing

    def compose(self) -> ComposeResult:
        with Vertical(classes="dialog dialog-wide"):
            yield Label(safe_text(self.title_text, one_line=True), classes="dialog-title")
            if self.existing:
                yield Static(safe_text(f"Already: {self.existing}", max_lines=4), classes="dialog-text muted")
            yield Select([(label, label) for label in self.labels], value=self.labels[0], allow_blank=False,
                         id="annotate-label")
            yield Input(placeholder="note (optional)", id="annotate-note")
            if self.step:
                yield Input(placeholder="the action it should have taken (optional: s3gym dataset --corrections)",
                            id="annotate-correction")
            with Horizontal(classes="dialog-buttons"):
                yield Button("Save", variant="primary", id="save")
                yield Button("Cancel", id="cancel")

    def on_mount(self) -> None:
        self.query_one("#annotate-note", Input).focus()

    def _value(self) -> dict:
        correction: Optional[str] = None
        if self.step:
            correction = self.query_one("#annotate-correction", Input).value.strip() or None
        return {"label": str(self.query_one("#annotate-label", Select).value),
                "note": self.query_one("#annotate-note", Input).value.strip(), "correction": correction}

    @on(Input.Submitted)
    def _submitted(self, _event: Input.Submitted) -> None:
        self.dismiss(self._value())

    @on(Button.Pressed)
    def _pressed(self, event: Button.Pressed) -> None:
        self.dismiss(self._value() if event.button.id == "save" else None)


def annotate(screen, *, kind: str, title: str, episode_id: Optional[str] = None, step_index: Optional[int] = None,
             summary_id: Optional[str] = None, done=None) -> None:
    """Ask for an annotation and store it as the app's human (settings.human_name); `done()` after."""
    from s3gym_tui.authors import human_author

    app = screen.app
    store = app.store
    try:
        if kind == "summary":
            existing = store.annotations.list(summary_id=summary_id)
        else:
            existing = [a for a in store.annotations.list(episode_id=episode_id, kind=kind)
                        if kind != "step" or a.step_index == step_index]
    except Exception:  # noqa: BLE001 - an older file without annotations: nothing shown
        existing = []
    shown = "; ".join(f"{a.label}" + (f": {a.note}" if a.note else "") for a in existing)

    def saved(value: Optional[dict]) -> None:
        if not value:
            return
        try:
            made = store.annotations.add_annotation(kind, value["label"], author=human_author(app.settings.human_name),
                                                    note=value["note"], episode_id=episode_id, step_index=step_index,
                                                    summary_id=summary_id, correction=value["correction"],
                                                    labels=app.settings.annotation_labels())
        except Exception as exc:  # noqa: BLE001 - one line, nothing stored
            app.notify(f"Not saved: {exc}", severity="error")
            return
        app.notify(f"{made.label} on {made.target}", title="Annotated")
        if done is not None:
            done()

    app.push_screen(AnnotateDialog(title, app.settings.annotation_labels(), step=kind == "step", existing=shown),
                    saved)
