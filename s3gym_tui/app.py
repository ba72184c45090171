"""The Textual app: composes screens, binds global keys, routes navigation. No logic lives here."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from textual.app import App
from textual.binding import Binding

from s3gym_tui.config import Settings, load_settings


class S3GymApp(App):
    """s3gym: watch, judge and steer LLM agents on the seven S3Gym games."""

    TITLE = "s3gym"
    SUB_TITLE = "self-improving agents, judged"
    CSS_PATH = "app.tcss"
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="help"),
        Binding("ctrl+t", "toggle_theme", "Theme", id="toggle_theme", show=False),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(self, db_path: Optional[Path] = None, default_model: Optional[str] = None,
                 settings: Optional[Settings] = None) -> None:
        super().__init__()
        self.settings = settings or load_settings()
        if default_model:
            self.settings = self.settings.model_copy(update={"default_model": default_model})
        from s3gym_tui.store import default_db_path

        self.db_path = Path(db_path or self.settings.db or default_db_path())
        self._store = None

    # ----- shared services --------------------------------------------------------------
    @property
    def store(self):
        """The UI thread's store connection (thread workers open their own with for_thread())."""
        if self._store is None:
            from s3gym_tui.store import Store

            self._store = Store(self.db_path)
        return self._store

    def on_mount(self) -> None:
        self.theme = "textual-light" if self.settings.theme == "light" else "textual-dark"
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)
        from s3gym_tui.store import StoreError

        try:
            self.store  # open (and check) the database before any screen reads it
        except StoreError as exc:
            self.notify(f"{exc}. Quit with ctrl+q and choose another --db.", title="Database",
                        severity="error", timeout=3600)
            return
        from s3gym_tui.screens.home import HomeScreen

        self.push_screen(HomeScreen())

    def on_unmount(self) -> None:
        if self._store is not None:
            self._store.close()

    # ----- navigation (lazy imports keep start-up fast) -----------------------------------
    def open_play(self, **options) -> None:
        from s3gym_tui.screens.play import PlayScreen

        self.push_screen(PlayScreen(**options))

    def open_episode(self, episode_id: str) -> None:
        """A stored episode, read-only, with fork available."""
        from s3gym_tui.screens.play import PlayScreen

        self.push_screen(PlayScreen(episode_id=episode_id))

    def open_protocol(self, run_id: str) -> None:
        from s3gym_tui.screens.protocol import ProtocolScreen

        self.push_screen(ProtocolScreen(run_id))

    def open_summaries(self, run_id: str) -> None:
        from s3gym_tui.screens.summaries import SummariesScreen

        self.push_screen(SummariesScreen(run_id))

    def open_compare(self, episode_a: str, episode_b: str) -> None:
        from s3gym_tui.screens.compare import CompareScreen

        self.push_screen(CompareScreen(episode_a, episode_b))

    def open_pairs(self) -> None:
        from s3gym_tui.screens.pairs import PairsScreen

        self.push_screen(PairsScreen())

    def open_report(self, run_ids: list[str]) -> None:
        from s3gym_tui.screens.report import ReportScreen

        self.push_screen(ReportScreen(run_ids))

    def open_sweeps(self, sweep_id: Optional[str] = None) -> None:
        """Stored sweeps and their runs, followed live."""
        from s3gym_tui.screens.sweep import SweepScreen

        self.push_screen(SweepScreen(sweep_id))

    def open_training(self, run_id: str) -> None:
        """A run's SFT datasets and the checkpoint curves of the trainings made from it."""
        from s3gym_tui.screens.training import TrainingScreen

        self.push_screen(TrainingScreen(run_id))

    # ----- global actions -----------------------------------------------------------------
    def action_help(self) -> None:
        from s3gym_tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"
