"""Play: what a replay and a live episode share (PlayScreen), and the replay of a stored episode."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Optional

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Input

import s3gym_games as games
from s3gym_tui.models import Episode, Step
from s3gym_tui.screens.play_layout import STEPS_MIN_WIDTH, BoardPlacement, BoardRoom, place_board
from s3gym_tui.screens.play_replay import ForkControls
from s3gym_tui.widgets.agent_panel import AgentPanel
from s3gym_tui.widgets.board import PANEL_CHROME, BoardPanel
from s3gym_tui.widgets.commands import BindingCommands
from s3gym_tui.widgets.episode_view import EpisodeView
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.proposal_bar import ProposalBar
from s3gym_tui.widgets.status_bar import StatusBar
from s3gym_tui.widgets.steps_table import StepsTable
from s3gym_tui.widgets.title_bar import TitleBar

LIVE_ONLY = {"step", "run_pause", "stop", "restart", "take_over", "toggle_propose", "cancel"}
LAYOUT_ACTIONS = ("toggle_board", "zoom_board", "zoom_agent")  # keys that change the layout: always in the footer
MOVE_ACTIONS = ("prev_step", "next_step", "first_step", "last_step", "older_tick", "newer_tick")


class PlayScreen(Screen):
    """One episode in an EpisodeView, moved through step by step, forked (f), compared with its
    original (C), marked (m). ReplayScreen shows a stored one; play_live.LivePlayScreen steps a new
    one or a fork. Every key is bound here (one footer, one help page); each screen says which it
    offers (check_action)."""
    AUTO_FOCUS = "#steps"  # focused as the screen mounts (focusing later restyles and repaints)
    ALLOW_IN_MAXIMIZED_VIEW = "KeyHints, #bottom-row, TakeOverBox"  # a zoomed panel keeps the footer
    KEY_HINT_LINES = 2  # at 80 columns the layout keys and the play keys take two footer lines
    HINTS_FIRST = ("accept", "edit", "veto", "step", "run_pause") + LAYOUT_ACTIONS  # a/e/v: while a proposal waits

    COMMANDS = {BindingCommands}
    BINDINGS = [
        Binding("n,space", "step", "Step", id="step"),
        Binding("r", "run_pause", "Run/Pause", id="run_pause"),
        Binding("x", "stop", "Stop", id="stop"),
        Binding("R", "restart", "Restart", id="restart"),
        Binding("t", "take_over", "Take over", id="take_over"),
        Binding("p", "toggle_propose", "Propose/wait", id="propose_then_wait"),
        Binding("a", "accept", "Accept", id="accept", priority=True),
        Binding("enter", "accept", "Accept", id="accept_enter", show=False, priority=True),
        Binding("e", "edit", "Edit", id="edit"),
        Binding("v", "veto", "Veto", id="veto"),
        Binding("c", "cancel", "Cancel call", id="cancel", show=False),
        Binding("escape", "cancel_or_back", "Back", id="back"),
        Binding("left", "prev_step", "Prev", id="prev_step", priority=True),
        Binding("right", "next_step", "Next", id="next_step", priority=True),
        Binding("home", "first_step", "Start", id="first_step", show=False, priority=True),
        Binding("end", "last_step", "Newest step", id="last_step", show=False, priority=True),
        Binding("left_square_bracket", "older_tick", "Older board", id="older_tick", show=False),
        Binding("right_square_bracket", "newer_tick", "Newer board", id="newer_tick", show=False),
        Binding("b", "toggle_board", "Board", id="toggle_board"),
        Binding("z", "zoom_board", "Zoom", id="zoom_board"),
        Binding("i", "zoom_agent", "Agent", id="zoom_agent"),
        Binding("f", "fork", "Fork here", id="fork"),
        Binding("C", "compare", "Compare with original", id="compare"),
        Binding("m", "annotate", "Mark step", id="annotate"),
        Binding("w", "credit", "Credit per action", id="credit", show=False),  # in help and the palette
    ]

    readonly = True  # a stored episode: nothing is stepped
    proposal: Any = None  # live: the engine Proposal waiting for accept, edit or veto
    thinking = False  # live: a model call is under way
    running = False  # live: the model steps on its own
    propose_then_wait = False
    done = False  # live: the episode is over (nothing more to step)
    session: Any = None  # live: the engine EpisodeSession
    call_detail: Optional[Callable[[], str]] = None  # live: what the status line adds to a call's elapsed time

    def __init__(self) -> None:
        super().__init__()
        self.view = EpisodeView(id="play-body")
        self.forks = ForkControls(self)
        self.error: Optional[str] = None  # why the episode could not be opened
        self._bindings_for: Optional[tuple] = None
        self._placement: Optional[BoardPlacement] = None
        self._column = 0  # wide: the board column's width (it only grows while an episode is shown)
        self._columns: Optional[str] = None  # the grid columns set on the body
        self._beside_for: Optional[tuple] = None  # (width, height, game) the narrow-and-short placement is for
        self._beside_placement: Optional[BoardPlacement] = None

    # ----- what the tests and the parts read (the view holds the episode) ---------------------------
    @property
    def episode(self) -> Optional[Episode]:
        return self.view.episode

    @property
    def steps(self) -> list[Step]:
        return self.view.steps

    @property
    def original(self) -> Optional[list[Step]]:
        return self.view.original

    @property
    def position(self) -> int:
        return self.view.position

    @property
    def following(self) -> bool:
        return self.view.following

    # ----- composing and opening -------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield self.view
        yield from self.extra_widgets()
        with Horizontal(id="bottom-row"):  # one row: the status line, or the proposal waiting
            yield ProposalBar(id="proposal")
            yield StatusBar(id="status-row")
        yield KeyHints()

    def extra_widgets(self) -> Iterable[Widget]:
        """Widgets between the episode and the status line (live: the take-over box)."""
        return ()

    def on_mount(self) -> None:
        self.open_episode()
        self.query_one(StepsTable).focus()
        self._bindings_for = self._binding_state()
        self.refresh_chrome()

    def open_episode(self) -> None:
        """Show the screen's episode (or why it cannot)."""
        raise NotImplementedError

    def show_episode(self, episode: Episode, steps: list[Step], position: Optional[int], empty_hint: str,
                     newest: Any = None) -> None:
        """Show `episode` at `position` (None: the newest step, followed); a fork beside its original."""
        original = self.app.store.episodes.steps(episode.fork_of, include_prompt=False) if episode.fork_of else None
        self.view.show_episode(episode, steps, original, position=position, empty_hint=empty_hint,
                               summary_label=self._summary_label(episode), context_label=self.context_label(episode),
                               newest=newest)
        self._moved()
        if self._place_board():
            self.view.refit_subtitle()

    def show_error(self, title: str, error: Optional[str]) -> None:
        self.view.show_error(f"{title}:\n{error}")
        self.notify(str(error), title=title, severity="error")

    # ----- layout: the stylesheet's size classes and place_board ----------------------------------
    def on_resize(self) -> None:
        self._place_board()
        self.view.refit_subtitle()

    def _board_room(self, board: BoardPanel) -> BoardRoom:
        width, height = self.app.size
        narrow, short = self.has_class("-narrow"), self.has_class("-short")
        shown = bool(board.display) and board.game is not None
        if not narrow:
            return BoardRoom(width, height, narrow, short, shown, natural=board.natural_width(self.app.console))
        if not (short and shown):
            return BoardRoom(width, height, narrow, short, shown)
        narrowest = board.min_width(self.app.console)
        if not narrowest or narrowest + STEPS_MIN_WIDTH > width:  # too wide to go beside the steps: nothing to measure
            return BoardRoom(width, height, narrow, short, shown, narrowest=narrowest)
        return BoardRoom(width, height, narrow, short, shown, narrowest=narrowest,
                         stacked_lines=board.measure_lines(width - PANEL_CHROME),
                         beside_lines=board.measure_lines(narrowest - PANEL_CHROME),
                         scrollbar=board.styles.scrollbar_size_vertical)

    def _place_board(self, grow_only: bool = False) -> bool:
        """Place the board (place_board) and apply what changed. Wide, while an episode is shown, the
        board's column only grows (a longer header line), so it does not jitter; narrow and short, the
        placement is decided once per game and size, so stepping never flips it. True when the
        board's width or side changed."""
        board = self.query_one(BoardPanel)
        width, height = self.app.size
        narrow_and_short = self.has_class("-narrow") and self.has_class("-short")
        if narrow_and_short and board.display and board.game is not None:
            key = (width, height, type(board.game).__name__)
            if key != self._beside_for:
                self._beside_for, self._beside_placement = key, place_board(self._board_room(board))
            placement = self._beside_placement
        else:
            placement = place_board(self._board_room(board))
        wide = not self.has_class("-narrow")
        if grow_only and wide and placement.outer_width <= self._column:
            return False
        previous, self._placement = self._placement, placement
        self._column = placement.outer_width if wide else 0
        if board.expected_width != placement.draw_width:
            board.expected_width = placement.draw_width  # drawn at this width before the first layout
        inline = board.styles.inline.max_height
        if (None if inline is None else int(inline.value)) != placement.max_height:
            board.styles.max_height = placement.max_height
        if placement.beside != self.has_class("-beside"):
            self.set_class(placement.beside, "-beside")
        if placement.columns != self._columns:
            self._columns = placement.columns
            self.view.styles.grid_columns = placement.columns
        self.view.board_width = placement.outer_width
        return previous is None or (previous.outer_width, previous.beside) != (placement.outer_width, placement.beside)

    # ----- moving through the episode ----------------------------------------------------------------
    def move_to(self, position: int, from_cursor: bool = False) -> None:
        """Show the episode after `position` steps (the board, that step's prompt, reply, feedback)."""
        self.view.show_position(position, from_cursor)
        self._moved()

    def _moved(self) -> None:
        """After the view moved: a board with a longer line widens its column; the status line."""
        if self.view.shown and self._place_board(grow_only=True):
            self.view.refit_subtitle()
        self.refresh_chrome()

    def action_prev_step(self) -> None:
        self.move_to(self.position - 1)

    def action_next_step(self) -> None:
        self.move_to(self.position + 1)

    def action_first_step(self) -> None:
        self.move_to(0)

    def action_last_step(self) -> None:
        self.move_to(len(self.steps))

    def on_steps_table_cursor_moved(self, message: StepsTable.CursorMoved) -> None:
        if self.proposal is None:
            self.move_to(message.row, from_cursor=True)

    def action_older_tick(self) -> None:
        self.query_one(BoardPanel).move_focus(1)

    def action_newer_tick(self) -> None:
        self.query_one(BoardPanel).move_focus(-1)

    def action_toggle_board(self) -> None:
        """Hide the board to give its rows to the steps and the agent (small terminals), or show it."""
        board = self.query_one(BoardPanel)
        if self.maximized is not None:
            self.minimize()
        board.display = not board.display
        self.set_class(not board.display, "-board-off")
        self._beside_for = None
        self._place_board()
        if board.display:
            self.move_to(self.position)

    def action_zoom_board(self) -> None:
        self._zoom(self.query_one(BoardPanel))

    def action_zoom_agent(self) -> None:
        """The agent panel over the whole screen (the footer and the status stay), or back."""
        self._zoom(self.query_one(AgentPanel))

    def _zoom(self, widget) -> None:
        if self.maximized is widget:
            self.minimize()
        else:
            if not widget.display and isinstance(widget, BoardPanel):
                self.action_toggle_board()
            self.maximize(widget, container=False)

    def action_cancel_or_back(self) -> None:
        if self.maximized is not None:
            self.minimize()
        else:
            self.app.pop_screen()

    # ----- labels, marks, fork, compare, credit ----------------------------------------------------
    def _summary_label(self, episode: Episode) -> str:
        if not episode.summary_id:
            return ""
        try:
            summary = self.app.store.summaries.get_summary(episode.summary_id)
        except Exception:  # noqa: BLE001
            return f"summary {episode.summary_id}"
        pinned = ", pinned" if summary.pinned else ""
        return f"summary v{summary.version} by {summary.author}{pinned}"

    def context_label(self, episode: Optional[Episode]) -> str:
        """A fork's context in words: as its source, or the experience a person chose instead."""
        if episode is None or not episode.fork_of:
            return ""
        from s3gym_tui.engine.visibility import context_note

        try:
            return context_note(self.app.store, episode)  # plain: the panel and notify gate it
        except Exception as exc:  # noqa: BLE001 - a damaged row must not stop the replay
            return f"unknown ({exc})"

    def action_annotate(self) -> None:
        """Mark the step in view (a label, a note, the action it should have taken)."""
        from s3gym_tui.screens.annotate_dialog import annotate

        if self.episode is None or self.position == 0:
            self.notify("Move to a step (→) to mark it.")
            return
        index = self.steps[self.position - 1].index

        def done() -> None:
            self.view.forget_marks()
            self.move_to(self.position)

        annotate(self, kind="step", title=f"Mark step {index} of {self.episode.id}", episode_id=self.episode.id,
                 step_index=index, done=done)

    def action_fork(self) -> None:
        self.forks.fork()

    def action_compare(self) -> None:
        self.forks.compare()

    def action_credit(self) -> None:
        """The episode's credit per action (screens/credit.py), at the step in view."""
        if self.episode is None:
            return
        at = self.steps[self.position - 1].index if self.position else None
        self.app.open_credit([self.episode.id], at_step=at)

    # ----- the status line, the proposal bar, the keys ------------------------------------------------
    def status_notes(self) -> list[str]:
        """What the status line says after the episode's figures."""
        return ["replay: ←/→ move · f forks here"]

    def step_limit(self) -> str:
        """' of at most N' after the step count, where the screen knows the cap."""
        return ""

    def refresh_chrome(self) -> None:
        """Status bar, proposal bar, key hints: each touched only when it changes (a layout change
        costs far more than the step itself)."""
        bar = self.query_one(StatusBar)
        proposal = self.query_one(ProposalBar)
        if self.episode is None:
            bar.set_text(self.error or "")
            bar.set_thinking(False)
            proposal.show_proposal(None)
            self._refresh_bindings_if_changed()
            return
        ep = self.episode
        n = len(self.steps)
        parts = [ep.id, f"{ep.game} {ep.mode} seed {ep.seed}", f"{n} step{'s' if n != 1 else ''}" + self.step_limit()]
        status_word = ep.status
        if ep.score is not None and ep.status != "running":
            status_word += f" · final verifier score {ep.score:g}"
        parts.append(status_word)
        bar.set_text(" · ".join(parts + self.status_notes()))
        bar.set_thinking(self.thinking, f"{ep.model} is thinking…", self.call_detail)
        if proposal.show_proposal(self.proposal):
            bar.display = self.proposal is None
        self._refresh_bindings_if_changed()

    def _binding_state(self) -> tuple:
        """What the key hints depend on (a waiting proposal: accept, edit and veto are in the footer
        too, as well as on the proposal bar)."""
        return (self.readonly, self.done, self.proposal is not None,
                self.episode is not None and self.episode.fork_of is not None, bool(self.steps),
                self.episode is None)

    def _refresh_bindings_if_changed(self) -> None:
        state = self._binding_state()
        if state != self._bindings_for:
            self._bindings_for = state
            self.refresh_bindings()

    def _input_focused(self) -> bool:
        return isinstance(self.focused, Input)

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in MOVE_ACTIONS:
            return not self._input_focused()
        if action in LAYOUT_ACTIONS:  # typed into the take-over field: shown dimmed there, not hidden
            return None if self._input_focused() else True
        if action in ("accept", "edit", "veto"):
            return self.proposal is not None and not self._input_focused()
        if action == "compare":
            return self.episode is not None and self.episode.fork_of is not None
        if action == "credit":
            return self.episode is not None
        if action == "fork":
            return self.episode is not None and (self.readonly or bool(self.steps))
        return True


class ReplayScreen(PlayScreen):
    """A stored episode, read-only: moved through, forked (f) at the step in view, compared (C)."""

    def __init__(self, episode_id: str, at_step: Optional[int] = None) -> None:
        super().__init__()
        self.episode_id = episode_id
        self.at_step = at_step  # open showing this step (a search result)

    def open_episode(self) -> None:
        store = self.app.store
        try:
            episode = store.episodes.get_episode(self.episode_id)
            steps = store.episodes.steps(self.episode_id, include_prompt=False)
            games.game_class(episode.game)
        except Exception as exc:  # noqa: BLE001
            self.error = str(exc)
            self.show_error("Cannot open the episode", exc)
            return
        position = 0 if self.at_step is None else max(0, min(self.at_step + 1, len(steps)))
        self.show_episode(episode, steps, position, "Start of the episode: the board before step 0 (→ shows step 0).")

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in LIVE_ONLY:
            return False
        return super().check_action(action, parameters)
