"""Home: start a hand-driven episode or a protocol run, and open recent runs."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

import s3gym_games as games
from s3gym_tui.models import EVAL_SEED_BASE, EXPLORE_SEED_BASE, phase_of_seed
from s3gym_tui.screens.dialogs import PATHWAY_CHOICES, ConfirmDialog, EpisodePickerDialog
from s3gym_tui.screens.home_runs import RunsPanel, store_token
from s3gym_tui.screens.live import LiveScreenMixin
from s3gym_tui.widgets.commands import BindingCommands
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.model_picker import ModelPicker, ModelsFound
from s3gym_tui.widgets.table import DataTable
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.textgate import safe, safe_text
from s3gym_tui.widgets.thread_work import thread_work

DEFAULT_SEED = {"explore": EXPLORE_SEED_BASE, "eval": EVAL_SEED_BASE}
RECENT_RUNS = 200
RESCAN_EVERY_S = 2.0  # the model picker looks for local servers again when opened, at most this often
HOME_HINT = ("Play (enter or f5): a standalone episode you step by hand (n step, r run, t take over, p "
             "propose-then-wait); history/summary borrow the chosen run's experience, read-only.\n"
             "Start protocol run (f6): set the run up (episodes, checkpoints, budgets) and see its cost "
             "first, then watch it live on the protocol screen.")


def game_options(short: bool = False) -> list[Option]:
    """All seven games with their one-line description (just the title when `short`, for narrow
    terminals); a game that fails to load is listed, disabled."""
    options = []
    for name in games.names():
        try:
            cls = games.game_class(name)
            text = Text(cls.title, style="bold") if short else \
                Text.assemble((cls.title, "bold"), " — ", cls.description)
            options.append(Option(text, id=name))
        except Exception as exc:  # noqa: BLE001 - a broken game must not hide the others
            options.append(Option(Text.assemble((name, "bold"), f" — not available ({safe(exc, one_line=True)})"),
                                  id=name, disabled=True))
    return options


def parse_seed(text: str, mode: str) -> tuple[Optional[int], str]:
    """(seed, "") or (None, a one-line reason). Seeds keep their phase (the store refuses mixing)."""
    try:
        seed = int(text.strip())
    except ValueError:
        return None, f"Seed must be a whole number (got {text.strip()!r})."
    if seed < 0:
        return None, "Seed must be 0 or more."
    if phase_of_seed(seed) != mode:
        if mode == "eval":
            return None, (f"Seed {seed} is an exploration seed: eval episodes use evaluation seeds "
                          f">= {EVAL_SEED_BASE:,} (the store refuses eval episodes on exploration seeds).")
        return None, (f"Seed {seed} is an evaluation seed: explore episodes use seeds below "
                      f"{EVAL_SEED_BASE:,} (evaluation seeds are held out).")
    return seed, ""


class GameList(OptionList):
    """The games. A click (or the arrow keys) chooses a game; enter or a double click plays it."""

    async def _on_click(self, event: events.Click) -> None:
        # Textual calls the _on_click of every class in the MRO unless the default is prevented:
        # OptionList's own would play the game on a single click.
        event.prevent_default()
        clicked = event.style.meta.get("option")
        if clicked is not None and not self._options[clicked].disabled:
            self.highlighted = clicked
            self.focus()
            if event.chain >= 2:  # a double click plays, as enter does
                self.action_select()


class HomeScreen(LiveScreenMixin, Screen):
    """Pick game, mode, seed, model, pathway (and a run to draw experience from); play or start a run."""

    COMMANDS = {BindingCommands}
    BINDINGS = [
        Binding("f5", "play", "Play", id="play"),
        Binding("f6", "start_run", "Start run", id="start_run"),
        Binding("d", "demo", "Demo tour", id="demo_tour"),
        Binding("o", "open_protocol", "Protocol view", id="open_protocol"),
        Binding("m", "open_summaries", "Summaries", id="open_summaries"),
        Binding("s", "stop_run", "Stop run", id="stop_run", show=False),  # named in the runs panel
        Binding("r", "resume_run", "Resume run", id="resume_run", show=False),
        Binding("g", "open_report", "Report", id="open_report"),
        Binding("e", "open_episodes", "Episodes", id="open_episodes"),
        Binding("c", "open_pairs", "Compare pairs", id="open_pairs"),
        Binding("w", "open_sweeps", "Sweeps", id="open_sweeps", show=False),
        Binding("a", "open_aspire", "ASPIRE", id="open_aspire", show=False),
        Binding("t", "open_training", "Training", id="open_training", show=False),
        Binding("delete", "delete_run", "Delete run", id="delete_run", show=False),
        Binding("f8", "refresh_runs", "Refresh runs", id="refresh_runs", show=False),
    ]

    def __init__(self) -> None:
        super().__init__()
        self._select_runs: Optional[list] = None
        self._token: Optional[tuple] = None
        self._runs: list = []

    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="new-session", classes="panel"):
            yield GameList(*game_options(), id="game-list")
            with Vertical(id="session-fields"):
                with Horizontal(classes="field-row"):
                    yield Label("Mode", classes="field-label")
                    yield Select([("explore", "explore"), ("eval", "eval")], value="explore",
                                 allow_blank=False, id="mode")
                    yield Label("Seed", classes="field-label")
                    yield Input(str(DEFAULT_SEED["explore"]), id="seed", type="integer")
                with Horizontal(classes="field-row"):
                    yield Label("Model", classes="field-label")
                    yield ModelPicker(self.app.settings.default_model, id="model")
                with Horizontal(classes="field-row"):
                    yield Label("Path", classes="field-label")
                    yield Select(PATHWAY_CHOICES, value="none", allow_blank=False, id="pathway")
                    yield Select([], prompt="experience from run…", id="source-run", disabled=True)
                with Horizontal(classes="field-row buttons"):
                    yield Button("Play", variant="primary", id="play")
                    yield Button("Start protocol run", variant="success", id="start-run")
                yield Static("", id="home-message")
                yield Static("", id="game-about", classes="muted")
                yield Static(HOME_HINT, id="home-hint", classes="muted")
        yield RunsPanel(id="runs-panel", classes="panel")
        yield KeyHints()

    def on_mount(self) -> None:
        self.query_one("#new-session").border_title = "New session"
        self.query_one("#new-session").border_subtitle = self._demo_line()
        game_list = self.query_one("#game-list", OptionList)
        game_list.highlighted = next((i for i, o in enumerate(game_list.options) if not o.disabled), 0)
        self.refresh_from_store()
        game_list.focus()
        if getattr(self.app, "found_models", None) is None:
            self.app.found_models = []
            self._discover(keyed=False)  # local servers now; keyed providers when the picker is used

    def _demo_line(self) -> str:
        """The newcomer's line (the panel's subtitle): d and what it does here."""
        from s3gym_tui.engine.demo import read_mark

        try:
            mark = read_mark(self.app.store.conn)
        except Exception:  # noqa: BLE001 - a broken store: the line stays the newcomer's
            mark = None
        if mark is not None and mark.status == "ready":
            return "This is the demo database · d: its guided tour"
        return "New here? d: the 10-minute demo, a guided tour"

    def action_demo(self) -> None:
        """The demo: its guided tour here, or the demo database opened (built first if need be)."""
        from s3gym_tui.screens.demo import open_demo

        open_demo(self.app)

    def on_resize(self) -> None:
        self.fit_to_size()

    def fit_to_size(self) -> None:
        """Narrow terminals list the games by title only (the descriptions took all the rows); the
        others one line a game (the highlighted one's description whole under the form) unless the
        terminal is wide enough for all of them."""
        short = self.app.size.width < 100
        if short != getattr(self, "_short_games", False):
            self._short_games = short
            game_list = self.query_one("#game-list", OptionList)
            highlighted = game_list.highlighted
            game_list.set_options(game_options(short=short))
            game_list.highlighted = highlighted
        self.query_one(ModelPicker).fit(self.app.size.width)

    def on_screen_resume(self) -> None:
        """Back on Home: re-read at once if the store changed (a cheap check when it did not), focus
        a list (hotkeys pressed next must not land in the input that was focused when the person
        left: its Play started from the model input, say), and fit the terminal as it is now."""
        if self.is_mounted:
            self.refresh_from_store()
            if not isinstance(self.focused, (OptionList, DataTable)):
                self.query_one("#game-list", OptionList).focus()
            self.fit_to_size()  # the terminal may have been resized while Home was below others

    # ----- models found on this machine (off the UI thread) ---------------------------------
    @thread_work(group="discover-models")
    def _discover(self, keyed: bool) -> None:
        """Model servers (the usual local ports and those named in the config; quick, no litellm),
        or with `keyed` the providers whose API keys are set (litellm's model lists: a few seconds
        the first time, so only once the picker is used)."""
        from s3gym_tui.engine.discovery import keyed_models, scan

        silent = None if keyed else []
        try:
            if keyed:
                found = keyed_models()
            else:
                scanned = scan(self.app.settings.servers)
                found, silent = scanned.found, scanned.silent
        except Exception:  # noqa: BLE001 - discovery is a convenience, never an error
            found = []
        self.post_message(ModelsFound(found, silent))

    @on(ModelPicker.Opened)
    def _picker_opened(self, _event) -> None:
        """Look again for local servers (one started since is found) and, once, keyed providers."""
        import time

        from s3gym_tui.engine.discovery import any_key_set

        now = time.monotonic()
        if now - getattr(self, "_scanned_at", -1e9) >= RESCAN_EVERY_S:
            self._scanned_at = now
            self._discover(keyed=False)
        if not getattr(self.app, "keyed_discovery", False) and any_key_set():
            self.app.keyed_discovery = True
            self._discover(keyed=True)

    @on(ModelPicker.Described)
    def _model_described(self, event: ModelPicker.Described) -> None:
        if not self.query_one("#home-message", Static).has_class("error"):
            self.say(f"Model: {event.model}")

    def on_models_found(self, message: ModelsFound) -> None:
        if message.silent is not None:  # servers that listed no models: each new set said once
            said = tuple(s.said() for s in message.silent)
            if said and said != getattr(self.app, "silent_servers", ()):
                self.notify(safe("; ".join(said), max_chars=600), title="Model servers not answering",
                            severity="warning", timeout=8)
            self.app.silent_servers = said
        known = {f.model for f in self.app.found_models}
        self.app.found_models = self.app.found_models + [f for f in message.models if f.model not in known]
        if message.models:
            self.query_one(ModelPicker).add_found(self.app.found_models)

    # ----- reading the form -----------------------------------------------------------------
    @property
    def game(self) -> Optional[str]:
        game_list = self.query_one("#game-list", OptionList)
        if game_list.highlighted is None:
            return None
        option = game_list.get_option_at_index(game_list.highlighted)
        return None if option.disabled else option.id

    @property
    def mode(self) -> str:
        return str(self.query_one("#mode", Select).value)

    @property
    def pathway(self) -> str:
        return str(self.query_one("#pathway", Select).value)

    @property
    def source_run_id(self) -> Optional[str]:
        value = self.query_one("#source-run", Select).value
        return None if value is Select.NULL or self.pathway == "none" else str(value)

    def say(self, message: str, error: bool = False) -> None:
        target = self.query_one("#home-message", Static)
        target.set_class(error, "error")
        target.update(safe_text(message, max_chars=2000))  # messages quote models, runs and errors

    def model_problem(self) -> Optional[str]:
        """Why the chosen model cannot play the chosen game (None when it can). Quick checks only
        (built-in models); the full preflight runs when a session or a run starts."""
        from s3gym_tui.engine.preflight import model_game_problem

        model, game = self.query_one(ModelPicker).model, self.game
        return model_game_problem(model, game) if model and game else None

    def preflight(self, model: str, game: str, api_base: Optional[str] = None) -> bool:
        """The engine's preflight (unknown provider, missing key, ...); False with the reason said."""
        from s3gym_tui.engine.preflight import ModelRefused, check_model

        try:
            check_model(model, game, api_base)
        except ModelRefused as exc:
            self.say(f"✗ {exc}.", error=True)
            return False
        return True

    def _check_compatibility(self) -> None:
        problem = self.model_problem()
        if problem:
            self.say(f"✗ {problem}.", error=True)
        elif self.query_one("#home-message", Static).has_class("error"):
            self.say("")

    # ----- form reactions -------------------------------------------------------------------
    @on(Select.Changed, "#mode")
    def _mode_changed(self, event: Select.Changed) -> None:
        seed_input = self.query_one("#seed", Input)
        current = seed_input.value.strip()
        if current in ("", *(str(v) for v in DEFAULT_SEED.values())) or not current.lstrip("-").isdigit():
            seed_input.value = str(DEFAULT_SEED[str(event.value)])
        self.say("")

    @on(Select.Changed, "#pathway")
    def _pathway_changed(self, _event: Select.Changed) -> None:
        self._fill_runs_select()

    @on(OptionList.OptionHighlighted, "#game-list")
    def _game_changed(self, _event: OptionList.OptionHighlighted) -> None:
        self._fill_runs_select()
        self._check_compatibility()
        self._show_about()

    def _show_about(self) -> None:
        """The highlighted game's description whole (the list cuts it to one line below -huge)."""
        game = self.game
        text = Text()
        if game is not None:
            try:
                cls = games.game_class(game)
                text = Text.assemble((cls.title, "bold"), ": ", cls.description)
            except Exception:  # noqa: BLE001 - the list already says it is not available
                pass
        self.query_one("#game-about", Static).update(text)

    @on(OptionList.OptionSelected, "#game-list")
    def _game_chosen(self, _event: OptionList.OptionSelected) -> None:
        self.action_play()  # enter on a game (a click only chooses it)

    @on(ModelPicker.Changed)
    def _model_changed(self, _event: ModelPicker.Changed) -> None:
        self._check_compatibility()

    def _fill_runs_select(self) -> None:
        select = self.query_one("#source-run", Select)
        game = self.game
        runs = [r for r in self._runs if r.config.game == game]
        listed = [(r.id, r.status) for r in runs]
        previous = select.value
        if listed != self._select_runs:  # rebuild the options only when the runs changed
            self._select_runs = listed
            select.set_options([(safe_text(f"{r.id} · {r.config.pathway} · {r.status}", one_line=True), r.id)
                                for r in runs])
        ids = {r.id for r in runs}
        preferred = next((r.id for r in runs if r.config.pathway == self.pathway), None)
        if previous in ids:
            if select.value != previous:
                select.value = previous
        elif preferred is not None:
            select.value = preferred
        select.disabled = self.pathway == "none" or not runs

    @on(Button.Pressed, "#play")
    def _play_pressed(self) -> None:
        self.action_play()

    @on(Button.Pressed, "#start-run")
    def _start_pressed(self) -> None:
        self.action_start_run()

    # ----- actions ----------------------------------------------------------------------------
    def _choices(self) -> Optional[dict]:
        game = self.game
        if game is None:
            self.say("Choose a game first.", error=True)
            return None
        model = self.query_one(ModelPicker).model
        if not model:
            self.say("Choose a built-in model or type a litellm model string.", error=True)
            return None
        problem = self.model_problem()
        if problem:
            self.say(f"✗ {problem}.", error=True)
            return None
        return {"game": game, "model": model, "pathway": self.pathway, "source_run_id": self.source_run_id}

    def action_play(self) -> None:
        choices = self._choices()
        if choices is None:
            return
        seed, problem = parse_seed(self.query_one("#seed", Input).value, self.mode)
        if seed is None:
            self.say(problem, error=True)
            return
        self.say("")
        self.app.open_play(mode=self.mode, seed=seed, **choices)

    def action_start_run(self) -> None:
        """The run dialog first (settings and their cost); the run is created only on Start."""
        choices = self._choices()
        if choices is None:
            return
        if choices["pathway"] == "trained":
            self.say("The trained pathway starts from a run's Training screen.", error=True)
            return
        from s3gym_tui.screens.run_dialog import RunDialog

        def chosen(config) -> None:
            if config is None or not self.preflight(config.model, config.game, config.api_base):
                return
            from s3gym_tui.screens.run_control import start_new_run

            child = start_new_run(self.app, config)  # `s3gym run …`, its own process
            if child is not None:
                self.say(f"Starting the run as its own process (PID {child.pid}); log: {child.log}")
                self._open_when_started(child)

        self.app.push_screen(RunDialog(choices["model"], choices["game"], choices["pathway"],
                                       self.app.settings.model_settings(choices["model"])), chosen)

    def _open_when_started(self, child) -> None:
        """Open the new run's Protocol screen once its process has stored it (or say why it did not)."""

        def look() -> None:
            run_id = child.find_run_id(self.app.store)
            if run_id is not None:
                timer.stop()
                self.say(f"Started run {run_id} (PID {child.pid}; log: {child.log}).")
                self.refresh_from_store(force=True)
                if self.app.screen is self:
                    self.app.open_protocol(run_id)
            elif not child.alive:
                timer.stop()
                self.say(f"✗ The run did not start: {child.log_tail()}", error=True)

        timer = self.set_interval(0.1, look)

    def action_stop_run(self) -> None:
        """Stop the highlighted run (whichever process drives it), as Ctrl-C does: resumable."""
        if (run_id := self._selected_run_id()) is not None:
            from s3gym_tui.screens.run_control import stop_run

            stop_run(self.app, run_id)

    def action_resume_run(self) -> None:
        """Resume the highlighted run after a dialog with what is left of it."""
        if (run_id := self._selected_run_id()) is not None:
            from s3gym_tui.screens.run_control import offer_resume

            offer_resume(self.app, run_id)

    def _selected_run_id(self) -> Optional[str]:
        return self.query_one(RunsPanel).selected_run_id

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in ("open_protocol", "open_summaries", "open_report", "open_episodes", "delete_run",
                      "open_training", "stop_run", "resume_run"):
            return self.is_mounted and bool(self._runs)
        return True

    def action_delete_run(self) -> None:
        """Remove the highlighted run (and what was made from it), after a confirmation."""
        run_id = self._selected_run_id()
        if run_id is None:
            return
        try:
            plan = self.app.store.hygiene.removal_plan([run_id])
        except Exception as exc:  # noqa: BLE001 - a driven run, a dataset of another run: say why
            self.notify(f"Cannot delete {run_id}: {exc}", severity="error")
            return

        def confirmed(yes: Optional[bool]) -> None:
            if not yes:
                return
            try:
                done = self.app.store.hygiene.remove_runs([run_id])
            except Exception as exc:  # noqa: BLE001
                self.notify(f"Cannot delete {run_id}: {exc}", severity="error")
                return
            self.say(f"Deleted {run_id}: {done.describe()}. `s3gym vacuum` returns the space.")
            self.refresh_from_store()

        self.app.push_screen(ConfirmDialog(f"Delete run {run_id}?\nThis removes {plan.describe()}.",
                                           yes="Delete", no="Keep"), confirmed)

    def action_open_protocol(self) -> None:
        if (run_id := self._selected_run_id()) is not None:
            self.app.open_protocol(run_id)

    def action_open_summaries(self) -> None:
        if (run_id := self._selected_run_id()) is not None:
            self.app.open_summaries(run_id)

    def action_open_report(self) -> None:
        if (run_id := self._selected_run_id()) is not None:
            self.app.open_report([run_id])

    def action_open_training(self) -> None:
        """The highlighted run's SFT datasets and trainings (or, for a trained run, its own curve)."""
        if (run_id := self._selected_run_id()) is not None:
            self.app.open_training(run_id)

    def action_open_pairs(self) -> None:
        self.app.open_pairs()

    def action_open_sweeps(self) -> None:
        """The sweeps (grid runs of `s3gym sweep`), live; the highlighted run's sweep first."""
        run_id = self._selected_run_id()
        sweep_id = None
        if run_id is not None:
            try:
                sweep_id = self.app.store.runs.get_run(run_id).sweep_id
            except Exception:  # noqa: BLE001 - the list still opens
                sweep_id = None
        self.app.open_sweeps(sweep_id)

    def action_open_aspire(self) -> None:
        """ASPIRE runs: an agent improving itself from a vague goal, judged on hidden games."""
        self.app.open_aspire()

    def action_open_episodes(self) -> None:
        run_id = self._selected_run_id()
        if run_id is None:
            return
        labels = []
        for ep in self.app.store.episodes.list(run_id):
            where = f"checkpoint {ep.checkpoint}" if ep.phase == "eval" else f"explore #{ep.index}"
            score = "—" if ep.score is None else f"{ep.score:g}"
            labels.append((ep.id, f"{where} · seed {ep.seed} · {ep.n_steps} steps · score {score} · {ep.status}"))

        def chosen(episode_id: Optional[str]) -> None:
            if episode_id:
                self.app.open_episode(episode_id)

        self.app.push_screen(EpisodePickerDialog(f"Episodes of {run_id}", labels), chosen)

    @on(DataTable.RowSelected, "#runs")
    def _run_chosen(self, _event: DataTable.RowSelected) -> None:
        self.action_open_protocol()

    def action_refresh_runs(self) -> None:
        self.refresh_from_store(force=True)

    def refresh_from_store(self, force: bool = False) -> None:
        """Follow the store: the recent runs and the highlighted run's details (idempotent, keeps
        the selection). Nothing is read when the store has not changed since the last call (a
        cheap check), so returning to Home after any screen costs almost nothing; a driver's
        heartbeat (lease) changes the store too, so "driven by" stays current."""
        store = self.app.store
        token = store_token(store)
        if not force and token is not None and token == self._token:
            return
        runs = self._list_runs()
        self._token = store_token(store)
        self._runs = runs
        self.query_one(RunsPanel).show_runs(runs)
        self._fill_runs_select()

    def _list_runs(self) -> list:
        """The recent runs; a damaged row is reported once and skipped, the others still listed."""
        damaged: list[tuple[str, str]] = []
        try:
            runs = self.app.store.runs.list_runs(limit=RECENT_RUNS, damaged=damaged)
        except Exception as exc:  # noqa: BLE001 - e.g. a corrupt database: say so, keep the app
            self.notify(f"Cannot list runs: {exc}", severity="error")
            return []
        told = getattr(self, "_damaged_told", set())
        for run_id, reason in damaged:
            if run_id not in told:
                self.notify(reason, title="A damaged run is not listed", severity="warning", timeout=15)
                told.add(run_id)
        self._damaged_told = told
        return runs
