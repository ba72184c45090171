"""The Textual app: composes screens, binds global keys, routes navigation. No logic lives here."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

from textual.app import App
from textual.binding import Binding

from s3gym_tui.config import Settings, load_settings

STORE_POLL_S = 0.5  # how often the app asks SQLite whether anything changed (microseconds each)


class S3GymApp(App):
    """s3gym: watch, judge and steer LLM agents on the seven S3Gym games."""

    TITLE = "s3gym"
    SUB_TITLE = "self-improving agents, judged"
    CSS_PATH = "app.tcss"
    # Size classes on every screen (a screen may override): -narrow / -wide / -huge by width,
    # -short / -tall by height. At -short the header gives its row to the content.
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide"), (170, "-huge")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (34, "-tall")]
    BINDINGS = [
        Binding("question_mark", "help", "Help", id="help"),
        Binding("slash", "search", "Search", id="search", show=False),
        Binding("ctrl+t", "toggle_theme", "Theme", id="toggle_theme", show=False),
        Binding("ctrl+q", "quit", "Quit", id="quit", priority=True),
    ]

    def __init__(self, db_path: Optional[Path] = None, default_model: Optional[str] = None,
                 settings: Optional[Settings] = None, tour: bool = False) -> None:
        from s3gym_tui.widgets import textual_patches

        textual_patches.apply()  # once per process; another Textual: one line (UnsupportedTextual)
        super().__init__()
        self.start_tour = tour  # open the demo's guided tour over Home (`s3gym demo`)
        from s3gym_tui.textgate import GatedConsole

        # what Textual prints when the app ends on an error (a traceback quoting stored text) is gated too
        self.error_console = GatedConsole(markup=False, highlight=False, stderr=True)
        self.settings = settings or load_settings()
        if default_model:
            self.settings = self.settings.model_copy(update={"default_model": default_model})
        if self.settings.keymap:  # a broken keymap must not leave the app without a way out
            from s3gym_tui.config import ConfigError, config_path
            from s3gym_tui.screens.keymap import binding_ids, keymap_problem

            problem = keymap_problem(self.settings.keymap, binding_ids(type(self)),
                                     source=None if settings else config_path())
            if problem:
                raise ConfigError(problem)
        from s3gym_tui.store import default_db_path

        self.db_path = Path(db_path or self.settings.db or default_db_path())
        self._store = None
        self._watcher = None
        self.store_generation = 0  # bumped whenever any process commits to the store
        self._quit_asked = False
        self.child_runs = None  # run processes started here (screens.run_control.children)
        self._upgrade_notices: list[str] = []  # shown as notifications once the app is up
        self._home_pending = False  # Home is opened once the first frame (the splash) is on the terminal

    # ----- shared services --------------------------------------------------------------
    @property
    def store(self):
        """The UI thread's store connection (thread workers open their own with for_thread())."""
        if self._store is None:
            from s3gym_tui.store import Store

            self._store = Store(self.db_path, notify=self.note_upgrade)
        return self._store

    def note_upgrade(self, line: str) -> None:
        """The one-line notice of a database upgrade (store/upgrade.py): a notification on mount."""
        self._upgrade_notices.append(line)
        if self.is_running:
            self._show_upgrade_notices()

    def _show_upgrade_notices(self) -> None:
        from s3gym_tui.textgate import safe

        while self._upgrade_notices:
            self.notify(safe(self._upgrade_notices.pop(0), one_line=True), title="Database",
                        markup=False, timeout=30)

    def compose(self):
        """The first frame, drawn while Home composes (seconds on a loaded machine): the app's name and
        the database it opens, so the terminal never sits blank."""
        from textual.widgets import Static

        from s3gym_tui.textgate import safe

        yield Static(f"s3gym\n\nopening {safe(self.db_path, one_line=True, max_chars=300)} …", id="splash")

    def on_mount(self) -> None:
        self.screen_change_signal.subscribe(self, self._screen_changed)
        self.theme = "textual-light" if self.settings.theme == "light" else "textual-dark"
        if self.settings.keymap:
            self.set_keymap(self.settings.keymap)
        from s3gym_tui.store import StoreError

        try:
            self.store  # open (and check) the database before any screen reads it
        except StoreError as exc:
            self._show_upgrade_notices()
            self.notify(f"{exc}. Quit with ctrl+q and choose another --db.", title="Database",
                        severity="error", timeout=3600)
            return
        self._show_upgrade_notices()
        from s3gym_tui.store.watch import StoreWatcher

        self._watcher = StoreWatcher(self.db_path)
        self._watcher.changed()  # the starting point
        self.set_interval(STORE_POLL_S, self._poll_store)
        self._home_pending = True
        if self.is_headless:  # nobody sees a splash: Home is there as soon as the app is (tests drive it)
            self._open_home()
        else:
            self.call_after_refresh(self._open_home)  # after the splash is drawn

    def _open_home(self) -> None:
        """Home, the bottom screen of the app (once; a key pressed during the splash opens its screen
        over Home: push_screen comes here first), and the demo's tour over it when asked for."""
        if not self._home_pending:
            return
        self._home_pending = False
        from s3gym_tui.screens.home import HomeScreen
        from s3gym_tui.screens.runtime import tune_gc

        self.push_screen(HomeScreen())
        if self.start_tour:
            self.open_tour()
        self.call_after_refresh(tune_gc)

    def _poll_store(self) -> None:
        """Tell the screen on top when any process (this one included) committed to the store, or
        when a run process this app started ended (its lease, if any, is then gone). Nothing once the
        app is closing: Textual empties the screen stack before it stops the app's timers."""
        if not self.is_running:
            return
        from s3gym_tui.screens.run_control import check_children

        ended = check_children(self)
        if self._watcher is not None and (self._watcher.changed() or ended):
            from s3gym_tui.messages import StoreChanged

            self.store_generation += 1
            self.screen.post_message(StoreChanged(self.store_generation))

    def on_model_picker_settings_requested(self, message) -> None:
        """A model picker's `⚙`, on any screen: the model's settings dialog."""
        from s3gym_tui.screens.dialogs import open_model_settings

        open_model_settings(self, message.model, message.suggested_api_base)

    def on_unmount(self) -> None:
        if self._watcher is not None:
            self._watcher.close()
        if self._store is not None:
            self._store.close()

    def _screen_changed(self, screen) -> None:
        """A screen came to the top (pushed, popped back to, switched to): the size classes of the
        terminal as it is now (it may have been resized while the screen was below others), before
        the screen handles its ScreenResume and lays itself out."""
        from s3gym_tui.screens.sizing import refit

        refit(screen)

    def pop_screen(self):
        """Pop the top screen (dismiss comes here too), then let go of Textual's caches of its widgets."""
        from s3gym_tui.widgets.textual_patches import release_closed_screens

        result = super().pop_screen()
        self.call_after_refresh(release_closed_screens)  # once the screen below is drawn again
        return result

    def push_screen(self, screen, *args, **kwargs):
        """Push a screen with its size classes already set (no restyle of it when it mounts), and
        without the second layout Textual asks for once it has mounted (textual_patches.without_mount_relayout)."""
        from textual.screen import Screen

        from s3gym_tui.screens.sizing import presize

        from s3gym_tui.widgets.textual_patches import without_mount_relayout

        if self._home_pending:  # a key pressed during the splash: its screen goes over Home
            self._open_home()
        if isinstance(screen, Screen):
            presize(screen, self)
        return without_mount_relayout(super().push_screen(screen, *args, **kwargs), screen)

    def notify(self, message: str, *, title: str = "", severity="information", timeout=None, markup: bool = True):
        """Every notification (widgets and screens call this one) passes the gate: it shows errors that
        quote providers and stored text. Plain text: no markup is read from the message."""
        from s3gym_tui.textgate import safe

        return super().notify(safe(message, max_chars=2000, max_lines=12), title=safe(title, one_line=True, max_chars=200),
                              severity=severity, timeout=timeout, markup=False)

    async def open_database(self, path: Path, tour: bool = False) -> bool:
        """Switch the app to another database (Home's demo entry): every screen closes, Home opens on it
        (and the tour). Refused while a run started from this app is running; False when refused."""
        from s3gym_tui.screens.home import HomeScreen
        from s3gym_tui.screens.run_control import children
        from s3gym_tui.store import Store, StoreError
        from s3gym_tui.store.watch import StoreWatcher

        if getattr(self, "child_runs", None) and children(self).alive():
            self.notify("A run started from this app is still running: stop it or wait before switching "
                        "databases.", severity="warning")
            return False
        try:
            store = Store(path, notify=self.note_upgrade)
        except StoreError as exc:
            self.notify(f"Cannot open {path}: {exc}", severity="error")
            return False
        while len(self.screen_stack) > 1:
            await self.pop_screen()
        for old in (self._watcher, self._store):
            if old is not None:
                old.close()
        self.db_path, self._store, self.child_runs = Path(path), store, None
        self._watcher = StoreWatcher(self.db_path)
        self._watcher.changed()
        self.store_generation += 1
        await self.push_screen(HomeScreen())
        if tour:
            self.open_tour()
        return True

    # ----- navigation (lazy imports keep start-up fast) -----------------------------------
    def open_play(self, **options) -> None:
        """A live episode: a new one (game, mode, seed, ...) or a fork (fork_of, fork_step): PlayOptions."""
        from s3gym_tui.engine.play import PlayOptions
        from s3gym_tui.screens.play_live import LivePlayScreen

        self.push_screen(LivePlayScreen(PlayOptions(**options)))

    def open_episode(self, episode_id: str, at_step: Optional[int] = None) -> None:
        """A stored episode, read-only, with fork available (`at_step`: shown at that step)."""
        from s3gym_tui.screens.play import ReplayScreen

        self.push_screen(ReplayScreen(episode_id, at_step=at_step))

    def open_search(self, query: str = "") -> None:
        from s3gym_tui.screens.search import SearchScreen

        self.push_screen(SearchScreen(query))

    def open_protocol(self, run_id: str) -> None:
        from s3gym_tui.screens.protocol import ProtocolScreen

        self.push_screen(ProtocolScreen(run_id))

    def open_summaries(self, run_id: str, select: Optional[str] = None) -> None:
        """A run's summary versions (`select`: a version's id, selected)."""
        from s3gym_tui.screens.summaries import SummariesScreen

        self.push_screen(SummariesScreen(run_id, select=select))

    def open_compare(self, episode_a: str, episode_b: str, at_divergence: bool = False) -> None:
        from s3gym_tui.screens.compare import CompareScreen

        self.push_screen(CompareScreen(episode_a, episode_b, at_divergence))

    def open_credit(self, episode_ids: list[str], at_step: Optional[int] = None) -> None:
        from s3gym_tui.screens.credit import CreditScreen

        self.push_screen(CreditScreen(episode_ids, at_step=at_step))

    def open_pairs(self, winner: str = "all") -> None:
        from s3gym_tui.screens.pairs import PairsScreen

        self.push_screen(PairsScreen(winner=winner))

    def open_report(self, run_ids: list[str], at: Optional[str] = None) -> None:
        """The report of these runs (`at`: a table's name, e.g. "delta", scrolled to and focused)."""
        from s3gym_tui.screens.report import ReportScreen

        self.push_screen(ReportScreen(run_ids, at=at))

    def open_tour(self) -> None:
        """The demo's guided tour (on a demo database)."""
        from s3gym_tui.screens.tour import TourScreen

        self.push_screen(TourScreen())

    def open_sweeps(self, sweep_id: Optional[str] = None) -> None:
        """Stored sweeps and their runs, followed live."""
        from s3gym_tui.screens.sweep import SweepScreen

        self.push_screen(SweepScreen(sweep_id))

    def open_aspire(self, aspire_id: Optional[str] = None) -> None:
        """ASPIRE runs (self-directed improvement from a vague goal): the newest unless named, live."""
        from s3gym_tui.screens.aspire import AspireScreen

        self.push_screen(AspireScreen(aspire_id))

    def open_training(self, run_id: str) -> None:
        """A run's SFT datasets and the checkpoint curves of the trainings made from it."""
        from s3gym_tui.screens.training import TrainingScreen

        self.push_screen(TrainingScreen(run_id))

    # ----- global actions -----------------------------------------------------------------
    def action_search(self) -> None:
        """`/` from any screen (a text box keeps its `/`): Search, or back to its box when it is on top."""
        from s3gym_tui.screens.search import SearchScreen

        if isinstance(self.screen, SearchScreen):
            self.screen.action_focus_input()
            return
        self.open_search()

    def action_help(self) -> None:
        from s3gym_tui.screens.help import HelpScreen

        self.push_screen(HelpScreen())

    async def action_quit(self) -> None:
        """Quit. While a run this app started is running, ask: leave it running (it is its own
        process, followed again when the app opens) or stop it (resumable). A second ctrl+q leaves it."""
        from s3gym_tui.screens.run_control import QuitDialog, children

        running = children(self).alive() if getattr(self, "child_runs", None) else []
        if not running or self._quit_asked:
            self.exit()
            return

        def answer(choice: Optional[str]) -> None:
            self._quit_asked = False
            if choice == "stop":
                for child in children(self).alive():
                    child.stop()
            if choice in ("stop", "leave"):
                self.exit()

        self._quit_asked = True
        self.push_screen(QuitDialog([child.run_id or f"PID {child.pid}" for child in running]), answer)

    def action_toggle_theme(self) -> None:
        self.theme = "textual-light" if self.theme == "textual-dark" else "textual-dark"
