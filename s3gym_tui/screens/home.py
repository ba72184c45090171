"""Home: start a hand-driven episode or a protocol run, and open recent runs."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Button, DataTable, Footer, Header, Input, Label, OptionList, Select, Static
from textual.widgets.option_list import Option

import games
from s3gym_tui.models import EVAL_SEED_BASE, EXPLORE_SEED_BASE, phase_of_seed
from s3gym_tui.screens.dialogs import PATHWAY_CHOICES, ConfirmDialog, EpisodePickerDialog
from s3gym_tui.screens.live import LiveScreenMixin
from s3gym_tui.widgets.commands import BindingCommands
from s3gym_tui.widgets.model_picker import ModelPicker

DEFAULT_SEED = {"explore": EXPLORE_SEED_BASE, "eval": EVAL_SEED_BASE}
RECENT_RUNS = 200
HOME_HINT = ("Play: a standalone episode you step by hand (n step, r run, t take over, p propose-then-wait); "
             "history/summary borrow the chosen run's experience, read-only.\n"
             "Start protocol run: explore episodes with checkpoints of eval episodes (paper defaults: 30 "
             "episodes, eval every 3, 3 eval seeds), watched live on the protocol screen.")


def game_options() -> list[Option]:
    """All seven games with their one-line description (a game that fails to load is listed, disabled)."""
    options = []
    for name in games.names():
        try:
            cls = games.game_class(name)
            text = Text.assemble((cls.title, "bold"), " — ", cls.description)
            options.append(Option(text, id=name))
        except Exception as exc:  # noqa: BLE001 - a broken game must not hide the others
            options.append(Option(Text.assemble((name, "bold"), f" — not available ({exc})"),
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


class HomeScreen(LiveScreenMixin, Screen):
    """Pick game, mode, seed, model, pathway (and a run to draw experience from); play or start a run."""

    def __init__(self) -> None:
        super().__init__()
        self._shown_runs: Optional[list] = None
        self._select_runs: Optional[list] = None

    COMMANDS = {BindingCommands}
    BINDINGS = [
        Binding("f5", "play", "Play", id="play"),
        Binding("f6", "start_run", "Start run", id="start_run"),
        Binding("o", "open_protocol", "Protocol view", id="open_protocol"),
        Binding("s", "open_summaries", "Summaries", id="open_summaries"),
        Binding("g", "open_report", "Report", id="open_report"),
        Binding("e", "open_episodes", "Episodes", id="open_episodes"),
        Binding("c", "open_pairs", "Compare pairs", id="open_pairs"),
        Binding("f8", "refresh_runs", "Refresh runs", id="refresh_runs", show=False),
        Binding("delete", "delete_run", "Delete run", id="delete_run", show=False),
    ]

    def compose(self) -> ComposeResult:
        yield Header(icon="●")
        with Horizontal(id="new-session", classes="panel"):
            yield OptionList(*game_options(), id="game-list")
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
                yield Static(HOME_HINT, id="home-hint", classes="muted")
        with Horizontal(id="runs-panel", classes="panel"):
            yield DataTable(id="runs", cursor_type="row", zebra_stripes=True)
            yield Static("", id="run-details")
        yield Footer()

    def on_mount(self) -> None:
        self.query_one("#new-session").border_title = "New session"
        panel = self.query_one("#runs-panel")
        panel.border_title = "Recent runs"
        panel.border_subtitle = "o protocol · s summaries · g report · e episodes · c pairs · del delete"
        table = self.query_one("#runs", DataTable)
        for label, key in (("id", "id"), ("game", "game"), ("model", "model"), ("pathway", "pathway"),
                           ("status", "status"), ("created", "created")):
            table.add_column(label, key=key)
        game_list = self.query_one("#game-list", OptionList)
        first = next((i for i, o in enumerate(game_list.options) if not o.disabled), 0)
        game_list.highlighted = first
        self.refresh_runs()
        game_list.focus()

    def on_resize(self, event) -> None:
        self.set_class(event.size.height < 34, "-short")
        self.set_class(event.size.width < 110, "-narrow")

    def on_screen_resume(self) -> None:
        if self.is_mounted:
            self.refresh_from_store()

    def refresh_from_store(self) -> None:
        """Follow the store: the runs list, and the highlighted run's details (any process's
        changes, within about a second)."""
        self.refresh_runs()
        self.show_run_details(self._selected_run_id())

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
        target.update(message)

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

    @on(OptionList.OptionSelected, "#game-list")
    def _game_chosen(self, _event: OptionList.OptionSelected) -> None:
        self.action_play()

    def _fill_runs_select(self, all_runs: Optional[list] = None) -> None:
        select = self.query_one("#source-run", Select)
        game = self.game
        if all_runs is None:
            all_runs = self._list_runs() if game else []
        runs = [r for r in all_runs if r.config.game == game]
        listed = [(r.id, r.status) for r in runs]
        previous = select.value
        if listed != self._select_runs:  # rebuild the options only when the runs changed
            self._select_runs = listed
            select.set_options([(f"{r.id} · {r.config.pathway} · {r.status}", r.id) for r in runs])
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
        model = self.query_one("#model", ModelPicker).model
        if not model:
            self.say("Choose a built-in model or type a litellm model string.", error=True)
            return None
        return {"game": game, "model": model, "pathway": self.pathway, "source_run_id": self.source_run_id}

    def action_play(self) -> None:
        choices = self._choices()
        if choices is None:
            return
        seed, problem = parse_seed(self.query_one("#seed", Input).value, self.mode)
        if seed is None:
            self.say(problem, error=True)
            self.notify(problem, severity="error", title="Invalid seed")
            return
        self.say("")
        self.app.open_play(mode=self.mode, seed=seed, **choices)

    def action_start_run(self) -> None:
        choices = self._choices()
        if choices is None:
            return
        from s3gym_tui.engine.preflight import ModelRefused, check_model
        from s3gym_tui.models import RunConfig

        try:
            check_model(choices["model"], choices["game"])
        except ModelRefused as exc:
            self.say(f"{exc}.", error=True)
            return
        try:
            run = self.app.store.create_run(RunConfig(model=choices["model"], game=choices["game"],
                                                      pathway=choices["pathway"]))
        except Exception as exc:  # noqa: BLE001 - a store refusal is a message, not a crash
            self.say(f"Cannot create the run: {exc}", error=True)
            return
        self.say(f"Created run {run.id}.")
        self.refresh_runs()
        self._navigate(self.app.open_protocol, run.id)

    def _selected_run_id(self) -> Optional[str]:
        table = self.query_one("#runs", DataTable)
        if table.row_count == 0:
            return None
        row_key, _ = table.coordinate_to_cell_key((table.cursor_row, 0))
        return row_key.value

    def action_delete_run(self) -> None:
        """Remove the highlighted run (and what was made from it), after a confirmation."""
        run_id = self._selected_run_id()
        if run_id is None:
            return
        try:
            plan = self.app.store.removal_plan([run_id])
        except Exception as exc:  # noqa: BLE001 - a driven run, a dataset of another run: say why
            self.notify(f"Cannot delete {run_id}: {exc}", severity="error")
            return

        def confirmed(yes: Optional[bool]) -> None:
            if not yes:
                return
            try:
                done = self.app.store.remove_runs([run_id])
            except Exception as exc:  # noqa: BLE001
                self.notify(f"Cannot delete {run_id}: {exc}", severity="error")
                return
            self.say(f"Deleted {run_id}: {done.describe()}. `s3gym vacuum` returns the space.")
            self.refresh_from_store()

        self.app.push_screen(ConfirmDialog(f"Delete run {run_id}?\nThis removes {plan.describe()}.",
                                           yes="Delete", no="Keep"), confirmed)

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in ("open_protocol", "open_summaries", "open_report", "open_episodes",
                      "delete_run"):
            return self.is_mounted and self.query_one("#runs", DataTable).row_count > 0
        return True

    def _navigate(self, method, *args) -> None:
        try:
            method(*args)
        except ImportError as exc:
            self.notify(f"That screen is not available yet ({exc}).", severity="warning")

    def action_open_protocol(self) -> None:
        if (run_id := self._selected_run_id()) is not None:
            self._navigate(self.app.open_protocol, run_id)

    def action_open_summaries(self) -> None:
        if (run_id := self._selected_run_id()) is not None:
            self._navigate(self.app.open_summaries, run_id)

    def action_open_report(self) -> None:
        if (run_id := self._selected_run_id()) is not None:
            self._navigate(self.app.open_report, [run_id])

    def action_open_pairs(self) -> None:
        self._navigate(self.app.open_pairs)

    def action_open_episodes(self) -> None:
        run_id = self._selected_run_id()
        if run_id is None:
            return
        labels = []
        for ep in self.app.store.episodes(run_id):
            where = f"checkpoint {ep.checkpoint}" if ep.phase == "eval" else f"explore #{ep.index}"
            score = "–" if ep.score is None else f"{ep.score:g}"
            labels.append((ep.id, f"{where} · seed {ep.seed} · {ep.n_steps} steps · score {score} · {ep.status}"))

        def chosen(episode_id: Optional[str]) -> None:
            if episode_id:
                self.app.open_episode(episode_id)

        self.app.push_screen(EpisodePickerDialog(f"Episodes of {run_id}", labels), chosen)

    @on(DataTable.RowHighlighted, "#runs")
    def _run_highlighted(self, event: DataTable.RowHighlighted) -> None:
        self.show_run_details(event.row_key.value if event.row_key is not None else None)

    def show_run_details(self, run_id: Optional[str]) -> None:
        """The highlighted run's settings and what the store holds for it (read, never computed)."""
        target = self.query_one("#run-details", Static)
        if run_id is None:
            target.update("")
            return
        try:
            with self.app.store.snapshot() as store:
                run = store.get_run(run_id)
                episodes = store.episodes(run_id)
                checkpoints = store.checkpoints(run_id)
                summaries = store.summaries(run_id) if run.config.pathway == "summary" else []
                current = store.current_summary(run_id) if summaries else None
                lease = store.lease(run_id)
        except Exception as exc:  # noqa: BLE001
            target.update(f"Cannot read run {run_id}: {exc}")
            return
        c = run.config
        explore = sum(1 for e in episodes if e.phase == "explore")
        text = Text()
        from s3gym_tui.store.leases import shown_status

        text.append(f"{run.id}\n", style="bold")
        text.append(f"{shown_status(run.status, lease)} · created "
                    f"{run.created_at[:16].replace('T', ' ')}\n")
        if lease is not None and lease.alive():
            text.append(f"driven by {lease.describe()}\n", style="yellow")
        elif run.status_reason:
            text.append(f"{run.status_reason}\n", style="italic")
        text.append(f"{c.model} · {c.game} · pathway {c.pathway}\n")
        text.append(f"explore {explore}/{c.explore_episodes} · eval {c.eval_episodes} per checkpoint\n")
        text.append(f"seeds explore {c.explore_seed_base}.. · eval {c.eval_seed_base}..\n")
        text.append(f"history budget {c.history_budget:,} · step cap {c.step_cap}\n")
        if c.oracle_feedback:
            text.append("oracle feedback ablation (rewards shown)\n", style="bold")
        if checkpoints:
            text.append("\ncheckpoint means\n", style="bold")
            for cp in checkpoints:
                text.append(f"  x={cp.x:<3} {cp.mean:g}\n")
        if summaries:
            text.append(f"\nsummaries: {len(summaries)} version(s)\n", style="bold")
            if current is not None:
                pinned = " (pinned)" if current.pinned else ""
                text.append(f"  in use: v{current.version} by {current.author}{pinned}\n")
        if run.note:
            text.append(f"\n{run.note}\n", style="italic")
        target.update(text)

    @on(DataTable.RowSelected, "#runs")
    def _run_chosen(self, _event: DataTable.RowSelected) -> None:
        self.action_open_protocol()

    def action_refresh_runs(self) -> None:
        self.refresh_runs()

    def _list_runs(self) -> list:
        """The recent runs; a damaged row is reported once and skipped, the others still listed."""
        damaged: list[tuple[str, str]] = []
        try:
            runs = self.app.store.list_runs(limit=RECENT_RUNS, damaged=damaged)
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

    def refresh_runs(self) -> None:
        """Reload the recent runs; the table is rebuilt only when they changed (returning to Home
        after every screen must stay cheap)."""
        table = self.query_one("#runs", DataTable)
        runs = self._list_runs()
        from s3gym_tui.store.leases import shown_status

        try:
            leases = self.app.store.live_leases()
        except Exception:  # noqa: BLE001 - the status column is still right without drivers
            leases = {}
        statuses = {r.id: shown_status(r.status, leases.get(r.id)) for r in runs}
        shown = [(r.id, statuses[r.id]) for r in runs]
        if shown != self._shown_runs:
            self._shown_runs = shown
            selected = self._selected_run_id()
            table.clear()
            for run in runs:
                table.add_row(run.id, run.config.game, run.config.model, run.config.pathway,
                              statuses[run.id], run.created_at[:16].replace("T", " "), key=run.id)
            if selected is not None and any(r.id == selected for r in runs):
                table.move_cursor(row=table.get_row_index(selected))
            self.query_one("#runs-panel").border_title = f"Recent runs ({len(runs)})"
        self._fill_runs_select(runs)
