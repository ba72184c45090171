"""Play: step a model (or yourself) through one episode, replay a stored one, or fork it."""

from __future__ import annotations

from typing import Any, Optional

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.screen import Screen
from textual.widgets import Footer, Header, Input
from textual.worker import Worker

import games
from s3gym_tui.models import Episode, Step
from s3gym_tui.screens.play_controls import LiveControls
from s3gym_tui.screens.play_replay import ReplayControls
from s3gym_tui.screens.play_support import ReplayBoard, call_settings
from s3gym_tui.widgets.agent_panel import AgentPanel, StepView
from s3gym_tui.widgets.board import BoardPanel
from s3gym_tui.widgets.commands import BindingCommands
from s3gym_tui.widgets.proposal_bar import ProposalBar
from s3gym_tui.widgets.score_strip import ScoreStrip
from s3gym_tui.widgets.status_bar import StatusBar
from s3gym_tui.widgets.steps_table import StepsTable

LIVE_ONLY = {"step", "run_pause", "stop", "restart", "take_over", "toggle_propose"}
REPLAY_ONLY = {"prev_step", "next_step", "first_step", "last_step"}


class PlayScreen(LiveControls, ReplayControls, Screen):
    """Live: a new standalone episode (game/mode/seed) or a fork (fork_of/fork_step), stepped by
    the model or a person. Replay: a stored episode (episode_id), read-only, with fork."""

    COMMANDS = {BindingCommands}
    BINDINGS = [
        Binding("n,space", "step", "Step", id="step"),
        Binding("r", "run_pause", "Run/Pause", id="run_pause"),
        Binding("x", "stop", "Stop", id="stop"),
        Binding("R", "restart", "Restart", id="restart"),
        Binding("t", "take_over", "Take over", id="take_over"),
        Binding("p", "toggle_propose", "Propose/wait", id="propose_then_wait"),
        Binding("a", "accept", "Accept", id="accept", show=False, priority=True),
        Binding("enter", "accept", "Accept", id="accept_enter", show=False, priority=True),
        Binding("e", "edit", "Edit", id="edit", show=False),
        Binding("v", "veto", "Veto", id="veto", show=False),
        Binding("c", "cancel", "Cancel call", id="cancel", show=False),
        Binding("escape", "cancel_or_back", "Back / cancel", id="back"),
        Binding("left", "prev_step", "Prev", id="prev_step", priority=True),
        Binding("right", "next_step", "Next", id="next_step", priority=True),
        Binding("home", "first_step", "First step", id="first_step", show=False, priority=True),
        Binding("end", "last_step", "Last step", id="last_step", show=False, priority=True),
        Binding("f", "fork", "Fork here", id="fork"),
        Binding("C", "compare", "Compare with original", id="compare"),
    ]

    def __init__(self, game: Optional[str] = None, mode: Optional[str] = None, seed: Optional[int] = None,
                 model: Optional[str] = None, pathway: str = "none", source_run_id: Optional[str] = None,
                 episode_id: Optional[str] = None, fork_of: Optional[str] = None,
                 fork_step: Optional[int] = None) -> None:
        super().__init__()
        self.options = {"game": game, "mode": mode or "explore", "seed": seed, "model": model,
                        "pathway": pathway or "none", "source_run_id": source_run_id,
                        "fork_of": fork_of, "fork_step": fork_step}
        self.episode_id = episode_id
        self.readonly = episode_id is not None and fork_of is None
        self.session = None  # EpisodeSession in live mode
        self.episode: Optional[Episode] = None
        self.steps: list[Step] = []
        self.original: Optional[list[Step]] = None  # a fork's source steps
        self.position = 0  # replay: the step shown (board = state the agent saw before it)
        self.running = False
        self.thinking = False
        self.proposal: Any = None  # pending engine Proposal (propose-then-wait)
        self.propose_then_wait = False
        self.error: Optional[str] = None
        self._call_worker: Optional[Worker] = None
        self._replay: Optional[ReplayBoard] = None
        self.queued = 0  # step presses made while a call was in flight (run one after another)
        self._bindings_for: Optional[tuple] = None

    # ----- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header(icon="●")
        with Horizontal(id="play-body"):
            with Vertical(id="play-left"):
                yield BoardPanel(id="board", classes="panel")
                yield StepsTable(id="steps", classes="panel")
                yield ScoreStrip(id="strip", classes="panel")
            yield AgentPanel(id="agent", classes="panel")
        yield ProposalBar(id="proposal")
        yield Input(placeholder="Your action", id="takeover")
        yield StatusBar(id="status-row")
        yield Footer()

    def on_mount(self) -> None:
        self.propose_then_wait = bool(self.app.settings.propose_then_wait)
        if self.readonly:
            self._open_stored(self.episode_id)
        else:
            self._open_live()
        self.query_one(StepsTable).focus()
        self._bindings_for = self._binding_state()  # focusing refreshes the footer once already
        self._refresh_chrome()

    def on_resize(self, event) -> None:
        self.set_class(event.size.height < 34, "-short")

    # ----- opening ------------------------------------------------------------------------------
    def _open_live(self) -> None:
        from s3gym_tui.engine.play import fork_session, new_play_session

        o = self.options
        store = self.app.store
        model = o["model"] or self.app.settings.default_model
        o["model"] = model
        try:
            source_run = store.get_run(o["source_run_id"]) if o["source_run_id"] else None
            if o["fork_of"]:
                session = fork_session(store, o["fork_of"], int(o["fork_step"] or 0), call_settings(model),
                                       o["pathway"], source_run)
            else:
                if not o["game"] or o["seed"] is None:
                    raise ValueError("choose a game and a seed")
                session = new_play_session(store, games.canonical(o["game"]), o["mode"], int(o["seed"]),
                                           call_settings(model), o["pathway"], source_run)
        except Exception as exc:  # noqa: BLE001 - PlayError, LeakageError, StoreError, GameError
            self.error = str(exc)
            self.query_one(BoardPanel).show_message(f"Cannot start the episode:\n{exc}", "Error")
            self.notify(str(exc), title="Cannot start the episode", severity="error")
            return
        self.session = session
        self.episode = session.episode
        self.steps = list(session.steps)
        if self.episode.fork_of:
            self.original = store.steps(self.episode.fork_of, include_prompt=False)
        self._show_all()

    def _open_stored(self, episode_id: str) -> None:
        store = self.app.store
        try:
            self.episode = store.get_episode(episode_id)
            self.steps = store.steps(episode_id, include_prompt=False)
            if self.episode.fork_of:
                self.original = store.steps(self.episode.fork_of, include_prompt=False)
            games.game_class(self.episode.game)
        except Exception as exc:  # noqa: BLE001
            self.error = str(exc)
            self.query_one(BoardPanel).show_message(f"Cannot open the episode:\n{exc}", "Error")
            self.notify(str(exc), title="Cannot open the episode", severity="error")
            return
        self.position = 0
        self._replay = ReplayBoard(self.episode, self.steps)
        self._show_all()

    # ----- rendering ----------------------------------------------------------------------------
    def _summary_label(self) -> str:
        if self.episode is None or not self.episode.summary_id:
            return ""
        try:
            summary = self.app.store.get_summary(self.episode.summary_id)
        except Exception:  # noqa: BLE001
            return f"summary {self.episode.summary_id}"
        pinned = ", pinned" if summary.pinned else ""
        return f"summary v{summary.version} by {summary.author}{pinned}"

    def _show_all(self) -> None:
        table = self.query_one(StepsTable)
        table.set_steps(self.steps, self.original)
        agent = self.query_one(AgentPanel)
        agent.show_context(self.episode, self._summary_label())
        agent.show_totals(self.steps)
        self.query_one(ScoreStrip).show_steps(self.steps)
        if self.readonly:
            self._goto(self.position)
        else:
            self._show_board()
            self._show_step(len(self.steps) - 1)
            agent.show_feedback(self.session.feedback if self.session else "")
        self._refresh_chrome()

    def _show_board(self) -> None:
        if self.session is None:
            return
        game = self.session.game
        done = self.session.done
        ep = self.episode
        subtitle = f"{ep.mode} · seed {ep.seed} · step {game.steps}/{game.max_steps}"
        if done:
            subtitle += f" · final score {game.score():g}"
        self.query_one(BoardPanel).show_game(game, subtitle)

    def _goto(self, position: int) -> None:
        """Replay: show the board the agent saw before step `position` (or the final board)."""
        if self.episode is None or self._replay is None:
            return
        n = len(self.steps)
        self.position = max(0, min(position, n))
        try:
            game = self._replay.at(self.position)
        except Exception as exc:  # noqa: BLE001
            self.query_one(BoardPanel).show_message(f"Cannot replay this episode: {exc}", "Error")
            return
        self.query_one(BoardPanel).show_game(game, self._replay.subtitle(game, self.position))
        shown = min(self.position, n - 1)
        if n:
            self.query_one(StepsTable).select_index(shown)
        self._show_step(shown)
        feedback = self.steps[self.position - 1].feedback if self.position > 0 else ""
        self.query_one(AgentPanel).show_feedback(feedback)
        self._refresh_chrome()

    def _show_step(self, index: int) -> None:
        agent = self.query_one(AgentPanel)
        if not 0 <= index < len(self.steps):
            agent.show_view(None)
            return
        step = self.steps[index]
        store = self.app.store
        try:
            prompt = store.expand_prompt(step.prompt) if step.prompt else store.step_prompt(step.episode_id, index)
        except Exception as exc:  # noqa: BLE001
            prompt = f"(cannot read the prompt: {exc})"
        agent.show_view(StepView.of_step(step, prompt))

    def _refresh_chrome(self) -> None:
        """Status bar, proposal bar, footer: each touched only when it changes (a footer rebuild
        or a layout change costs far more than the step itself)."""
        bar = self.query_one(StatusBar)
        proposal = self.query_one(ProposalBar)
        if self.episode is None:
            bar.set_text(self.error or "")
            bar.set_thinking(False)
            proposal.show_proposal(None)
            self._refresh_bindings_if_changed()
            return
        ep = self.episode
        max_steps = self.session.game.max_steps if self.session else "?"
        parts = [ep.id, f"{ep.game} {ep.mode} seed {ep.seed}", f"{len(self.steps)} step(s)"
                 + (f" of at most {max_steps}" if self.session else "")]
        status_word = ep.status
        if ep.score is not None and ep.status != "running":
            status_word += f" · final verifier score {ep.score:g}"
        parts.append(status_word)
        if self.readonly:
            parts.append("replay (read-only): ←/→ move, f forks")
        else:
            parts.append("propose-then-wait ON" if self.propose_then_wait else "propose-then-wait off")
            if self.running:
                parts.append("RUNNING")
        bar.set_text(" · ".join(parts))
        bar.set_thinking(self.thinking, f"{ep.model} is thinking… (c or esc cancels; nothing is stored)")
        proposal.show_proposal(self.proposal)
        self._refresh_bindings_if_changed()

    def _binding_state(self) -> tuple:
        """What the footer depends on. A waiting proposal is not part of it: accept, edit and veto
        are shown on the proposal bar, so a proposal never costs a footer rebuild."""
        return (self.readonly, self.session is not None and self.session.done,
                self.episode is not None and self.episode.fork_of is not None, bool(self.steps),
                self.episode is None)

    def _refresh_bindings_if_changed(self) -> None:
        state = self._binding_state()
        if state != self._bindings_for:
            self._bindings_for = state
            self.refresh_bindings()

    # ----- binding availability ---------------------------------------------------------------
    def _input_focused(self) -> bool:
        return isinstance(self.focused, Input)

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in LIVE_ONLY and self.readonly:
            return False
        if action in REPLAY_ONLY:
            return self.readonly and not self._input_focused()
        if action in ("accept", "edit", "veto"):
            return self.proposal is not None and not self._input_focused()
        if action == "cancel":
            return not self.readonly  # always available (not in the footer): no footer rebuild per call
        if action == "compare":
            return self.episode is not None and self.episode.fork_of is not None
        if action == "fork":
            return self.episode is not None and (self.readonly or bool(self.steps))
        if action in ("step", "run_pause", "take_over") and self.session is not None and self.session.done:
            return None  # shown disabled: the episode is over
        return True

    def _can_act(self) -> bool:
        if self.session is None:
            self.notify(self.error or "No live episode here.", severity="warning")
            return False
        if self.session.done:
            self.notify(f"The episode is over ({self.session.episode.status}); R restarts.", severity="warning")
            return False
        return True

    # ----- leaving --------------------------------------------------------------------------------
    def on_unmount(self) -> None:
        """An unfinished live episode is recorded as stopped when its screen closes."""
        if self.session is not None and not self.session.done:
            try:
                self.session.finish("stopped")
            except Exception:  # noqa: BLE001 - the app may be closing its store
                pass
