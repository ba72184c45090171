"""Play: step a model (or yourself) through one episode, replay a stored one, or fork it."""

from __future__ import annotations

from typing import Any, Optional

from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.screen import Screen
from textual.widgets import Input
from textual.worker import Worker

import s3gym_games as games
from s3gym_tui.messages import EpisodeFinished, ModelFailed, ProposalReady, StepCompleted, StepFailed
from s3gym_tui.models import Episode, Step
from s3gym_tui.screens.dialogs import TextInputDialog
from s3gym_tui.screens.play_live import LiveDriver
from s3gym_tui.screens.play_replay import ForkControls
from s3gym_tui.screens.play_support import ReplayBoard
from s3gym_tui.widgets.agent_panel import AgentPanel, StepView
from s3gym_tui.widgets.board import PANEL_CHROME, BoardPanel

STEPS_MIN_WIDTH = 36  # compact, board beside: what the steps table keeps (#, s, r, mark, an action)
STEPS_MIN_ROWS = 5  # compact, board on top: the steps table's border, header and two rows
BOARD_CHROME_ROWS = 2  # the board panel's border
from s3gym_tui.widgets.commands import BindingCommands
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.proposal_bar import ProposalBar
from s3gym_tui.widgets.score_strip import ScoreStrip
from s3gym_tui.widgets.status_bar import StatusBar
from s3gym_tui.widgets.steps_table import StepsTable
from s3gym_tui.widgets.verdicts import range_note
from s3gym_tui.widgets.take_over import TakeOverBox
from s3gym_tui.widgets.title_bar import TitleBar

LIVE_ONLY = {"step", "run_pause", "stop", "restart", "take_over", "toggle_propose"}
AGENT_MIN_WIDTH = 44  # the agent panel keeps at least this much beside the board
LAYOUT_ACTIONS = ("toggle_board", "zoom_board", "zoom_agent")  # keys that change the layout: always in the footer
MOVE_ACTIONS = ("prev_step", "next_step", "first_step", "last_step", "older_tick", "newer_tick")
BORDER_TEXT_CHROME = 6  # a border's corners, lines and spaces around its title or subtitle


def fit_subtitle(figures: list[tuple[int, str]], action: str, width: int) -> str:
    """`figures` (weight, text: 0 is kept longest), joined by ' · ', the last one followed by
    `: action`, in `width` cells. The action is cut first (to no less than a few characters), then
    left out, then the figures of least weight are left out whole: a figure is never cut."""
    kept = list(figures)

    def joined(action: str = "") -> str:
        return " · ".join([text for _, text in kept]) + (f": {action}" if action else "")

    if len(joined(action)) <= width:
        return joined(action)
    room = width - len(joined()) - 2
    if action and room >= 6:
        return joined(action[:room - 1] + "…")
    while len(kept) > 1 and len(joined()) > width:
        kept.remove(max(kept, key=lambda figure: figure[0]))
    return joined()


class PlayScreen(Screen):
    """Live: a new standalone episode (game/mode/seed) or a fork (fork_of/fork_step), stepped by
    the model or a person. Replay: a stored episode (episode_id), read-only, with fork.

    Whatever the mode, the view is one position in the episode: row 0 of the steps table is the
    start, row i + 1 is step i, and the board, the feedback, the prompt and the reply shown are
    that step's own (the board as it was after the step). Live, the view follows the newest step
    until the person moves it to an older one."""
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

    def __init__(self, game: Optional[str] = None, mode: Optional[str] = None, seed: Optional[int] = None,
                 model: Optional[str] = None, pathway: str = "none", source_run_id: Optional[str] = None,
                 episode_id: Optional[str] = None, fork_of: Optional[str] = None,
                 fork_step: Optional[int] = None, experience: Optional[str] = None,
                 at_step: Optional[int] = None) -> None:
        super().__init__()
        self.at_step = at_step  # replay: open showing this step (a search result)
        # experience (forks): "source" (what the source saw; the default), "none", or "run" (source_run_id's)
        self.options = {"game": game, "mode": mode or "explore", "seed": seed, "model": model,
                        "pathway": pathway or "none", "source_run_id": source_run_id,
                        "fork_of": fork_of, "fork_step": fork_step,
                        "experience": experience or ("run" if source_run_id else "source")}
        self.episode_id = episode_id
        self.readonly = episode_id is not None and fork_of is None
        self.live: Optional[LiveDriver] = None if self.readonly else LiveDriver(self, self.options)
        self.forks = ForkControls(self)
        self.episode: Optional[Episode] = None
        self.steps: list[Step] = []
        self.original: Optional[list[Step]] = None  # a fork's source steps
        self.position = 0  # steps applied to the board in view (0 = the start)
        self.following = True  # live: the view tracks the newest step
        self._boards: Optional[ReplayBoard] = None
        self._replay_error: Optional[str] = None
        self._bindings_for: Optional[tuple] = None
        self._board_columns = 0  # the board column's width (wide layout)
        self._compact_for: Optional[tuple] = None  # (width, height, game) the compact layout was chosen for
        self._compact_beside = 0  # compact: the board's column width beside the steps (0: on top)
        self._compact_columns: Optional[str] = None  # the grid columns set for it

    # ----- what the tests and the other modules read ----------------------------------------
    @property
    def session(self):
        return self.live.session if self.live else None

    @property
    def error(self) -> Optional[str]:
        return self.live.error if self.live else self._replay_error

    @property
    def proposal(self) -> Any:
        return self.live.proposal if self.live else None

    @property
    def thinking(self) -> bool:
        return bool(self.live and self.live.thinking)

    @property
    def running(self) -> bool:
        return bool(self.live and self.live.running)

    @property
    def propose_then_wait(self) -> bool:
        return bool(self.live and self.live.propose_then_wait)

    # ----- layout -------------------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="play-body"):
            yield BoardPanel(id="board", classes="panel")
            yield AgentPanel(id="agent", classes="panel")
            yield StepsTable(id="steps", classes="panel")
            yield ScoreStrip(id="strip", classes="panel")
        if self.live is not None:  # a replay has nothing to take over (and mounts faster without it)
            yield TakeOverBox(id="takeover-box")
        with Horizontal(id="bottom-row"):  # one row: the status line, or the proposal waiting
            yield ProposalBar(id="proposal")
            yield StatusBar(id="status-row")
        yield KeyHints()

    def on_mount(self) -> None:
        if self.live is not None:
            self.live.propose_then_wait = bool(self.app.settings.propose_then_wait)
            if self.live.open():
                self._take_session()
            else:
                self._show_error("Cannot start the episode", self.live.error)
        else:
            self._open_stored(self.episode_id)
        self.query_one(StepsTable).focus()
        self._bindings_for = self._binding_state()
        self.refresh_chrome()

    def on_resize(self) -> None:
        self._fit_board()
        self._refit_subtitle()

    def _fit_board(self, grow_only: bool = False) -> bool:
        """Give the board the width it needs (up to what leaves the agent panel usable). While an
        episode is shown the column only grows (a longer header line), so it does not jitter.
        Narrow and short (80x24): see _fit_compact. True when the board's column changed."""
        total, height = self.app.size
        board = self.query_one(BoardPanel)
        if total < 100:  # -narrow: the board spans the width, the CSS lays out the panels
            if self._board_columns:  # a wide layout's columns would squeeze the steps table
                self._board_columns = 0
                self._compact_columns = None
                self.query_one("#play-body").styles.grid_columns = None
            beside = self._compact_beside
            self._fit_compact(board, total, height)
            return beside != self._compact_beside
        self._set_compact(False, 0)
        natural = board.natural_width(self.app.console)
        left = max(40, int(total * 0.38), min(natural, total - AGENT_MIN_WIDTH, int(total * 0.72)))
        if grow_only and left <= self._board_columns:
            return False
        if left != self._board_columns:
            self._board_columns = left
            board.expected_width = left - PANEL_CHROME  # drawn at this width before the first layout
            self.query_one("#play-body").styles.grid_columns = f"{left} 1fr"
            return True
        return False

    def _fit_compact(self, board: BoardPanel, width: int, height: int) -> None:
        """Below 100 columns and 34 rows (80x24) the board and the steps share the screen and the
        agent panel is one key away (i). The board goes on top when that shows more of it, else
        beside the steps at its narrowest (chess: the large board, a 15x15 grid, is taller than the
        room above a steps table). Decided once per game and size, so stepping never flips it."""
        full = width - PANEL_CHROME
        compact = height < 34
        if not compact or not board.display or board.game is None:
            board.expected_width = full
            self._set_compact(compact, 0)
            return
        key = (width, height, type(board.game).__name__)
        if key != self._compact_for:
            self._compact_for = key
            body = height - 3  # the status line and two footer lines
            narrowest = board.min_width(self.app.console)
            beside = 0
            if narrowest and narrowest + STEPS_MIN_WIDTH <= width:
                room = body - BOARD_CHROME_ROWS
                stacked_lines = board.measure_lines(full)
                beside_lines = board.measure_lines(narrowest - PANEL_CHROME)
                shown_stacked = min(stacked_lines, room - STEPS_MIN_ROWS) / max(1, stacked_lines)
                shown_beside = min(beside_lines, room) / max(1, beside_lines)
                if shown_beside > shown_stacked:  # (plus its scrollbar when it scrolls)
                    bar = board.styles.scrollbar_size_vertical if beside_lines > room else 0
                    beside = narrowest + bar
            self._compact_beside = beside
        beside = self._compact_beside
        board.expected_width = (beside - PANEL_CHROME) if beside else full
        self._set_compact(True, beside)

    def _set_compact(self, compact: bool, beside: int) -> None:
        body = self.query_one("#play-body")
        columns = f"{beside} 1fr" if compact and beside else None
        board = self.query_one(BoardPanel)
        cap = max(3, self.app.size.height - 3 - STEPS_MIN_ROWS) if compact and not beside else None
        inline = board.styles.inline.max_height
        if (None if inline is None else int(inline.value)) != cap:
            board.styles.max_height = cap
        if compact != self.has_class("-compact") or bool(beside) != self.has_class("-beside"):
            self.set_class(compact, "-compact")
            self.set_class(bool(compact and beside), "-beside")
        if columns != self._compact_columns and not self._board_columns:
            self._compact_columns = columns
            body.styles.grid_columns = columns

    # ----- opening ------------------------------------------------------------------------------
    def _show_error(self, title: str, error: Optional[str]) -> None:
        self.query_one(BoardPanel).show_message(f"{title}:\n{error}", "Error")
        self.notify(str(error), title=title, severity="error")

    def _take_session(self) -> None:
        """Show the live session's episode (after opening or restarting)."""
        session = self.live.session
        self.episode = session.episode
        self.steps = list(session.steps)
        self.original = None
        if self.episode.fork_of:
            self.original = self.app.store.episodes.steps(self.episode.fork_of, include_prompt=False)
        self._boards = ReplayBoard(self.episode, self.steps)
        self.following = True
        self._show_all()
        if self.episode.fork_of:
            self.notify(f"Context: {self._context_label()}", title="Fork")

    def _open_stored(self, episode_id: str) -> None:
        store = self.app.store
        try:
            self.episode = store.episodes.get_episode(episode_id)
            self.steps = store.episodes.steps(episode_id, include_prompt=False)
            if self.episode.fork_of:
                self.original = store.episodes.steps(self.episode.fork_of, include_prompt=False)
            games.game_class(self.episode.game)
        except Exception as exc:  # noqa: BLE001
            self._replay_error = str(exc)
            self._show_error("Cannot open the episode", exc)
            return
        self._boards = ReplayBoard(self.episode, self.steps)
        self.following = False
        self.position = 0 if self.at_step is None else max(0, min(self.at_step + 1, len(self.steps)))
        self._show_all()

    # ----- rendering ----------------------------------------------------------------------------
    def _summary_label(self) -> str:
        if self.episode is None or not self.episode.summary_id:
            return ""
        try:
            summary = self.app.store.summaries.get_summary(self.episode.summary_id)
        except Exception:  # noqa: BLE001
            return f"summary {self.episode.summary_id}"
        pinned = ", pinned" if summary.pinned else ""
        return f"summary v{summary.version} by {summary.author}{pinned}"

    def _context_label(self) -> str:
        """A fork's context in words: as its source, or the experience a person chose instead."""
        if self.episode is None or not self.episode.fork_of:
            return ""
        from s3gym_tui.engine.visibility import context_note

        try:
            return context_note(self.app.store, self.episode)  # plain: the panel and notify gate it
        except Exception as exc:  # noqa: BLE001 - a damaged row must not stop the replay
            return f"unknown ({exc})"

    @property
    def _marks(self) -> dict:
        """The episode's step annotations by index (read once per episode; `m` refreshes them)."""
        if self.episode is None:
            return {}
        cached = self.__dict__.get("_marks_of")
        if cached is None or cached[0] != self.episode.id:
            try:
                marks = self.app.store.annotations.annotations_of_steps(self.episode.id)
            except Exception:  # noqa: BLE001 - annotations never stop a replay
                marks = {}
            cached = self.__dict__["_marks_of"] = (self.episode.id, marks)
        return cached[1]

    def action_annotate(self) -> None:
        """Mark the step in view (a label, a note, the action it should have taken)."""
        from s3gym_tui.screens.annotate_dialog import annotate

        if self.episode is None or self.position == 0:
            self.notify("Move to a step (→) to mark it.")
            return
        index = self.steps[self.position - 1].index

        def done() -> None:
            self.__dict__.pop("_marks_of", None)
            self.show_position(self.position)

        annotate(self, kind="step", title=f"Mark step {index} of {self.episode.id}", episode_id=self.episode.id,
                 step_index=index, done=done)

    def _show_all(self) -> None:
        self.query_one(StepsTable).set_steps(self.steps, self.original, self.episode.game, self.episode.mode)
        agent = self.query_one(AgentPanel)
        agent.empty_hint = ("Start of the episode: the board before step 0 (→ shows step 0)." if self.readonly
                            else "No step yet: press n to step, t to type an action.")
        agent.show_context(self.episode, self._summary_label(), self._context_label())
        agent.show_totals(self.steps)
        self.query_one(ScoreStrip).show_steps(self.steps, self.episode.game, self.episode.mode)
        self._show_contract_warning()
        self.show_position(len(self.steps) if self.following else self.position)
        self._fit_board()

    def _board_at(self, position: int):
        if self.live is not None and self.live.session is not None and position == len(self.steps):
            return self.live.session.game
        return self._boards.at(position)

    def show_position(self, position: int, from_cursor: bool = False) -> None:
        """Show the board after `position` steps, and that step's feedback, prompt and reply."""
        if self.episode is None or self._boards is None:
            return
        n = len(self.steps)
        self.position = max(0, min(position, n))
        if self.live is not None:
            self.following = self.position == n
        board = self.query_one(BoardPanel)
        try:
            game = self._board_at(self.position)
        except Exception as exc:  # noqa: BLE001
            board.show_message(f"Cannot replay this episode: {exc}", "Error")
            return
        board.show_game(game, self._subtitle(game))
        if self._fit_board(grow_only=True):
            self._refit_subtitle()
        if not from_cursor:
            self.query_one(StepsTable).move_cursor(self.position)
        agent = self.query_one(AgentPanel)
        if self.position == 0:
            agent.show_view(None)
            agent.show_feedback("", "the start")
        else:
            step = self.steps[self.position - 1]
            self._show_step(step)
            marks = self._marks.get(step.index, [])
            labels = f" · {', '.join(dict.fromkeys(a.label for a in marks))}" if marks else ""
            agent.show_feedback(step.feedback, f"step {step.index}{labels}")
        self.refresh_chrome()

    def _subtitle(self, game: Any) -> str:
        """Where the board is, in the width of its border: every figure whole (the action gives way
        first, then the figures of least weight are left out whole)."""
        ep = self.episode
        figures = [(4, ep.mode), (3, f"seed {ep.seed}"), (0, f"step {game.steps}/{game.max_steps}")]
        if self.position == len(self.steps) and (game.done or (ep.status != "running" and self.steps)):
            figures.append((1, f"final score {game.score():g}"))
        action = ""
        if self.position == 0:
            figures.append((2, "start"))
        else:
            figures.append((2, f"after step {self.position - 1}"))
            action = " ".join(self.steps[self.position - 1].action.split())
        return fit_subtitle(figures, action[:24] + ("…" if len(action) > 24 else ""),
                            self._board_outer_width() - BORDER_TEXT_CHROME)

    def _board_outer_width(self) -> int:
        """The board panel's width as the layout gives it (wide: its column, compact: beside the steps)."""
        if self._board_columns:
            return self._board_columns
        return self._compact_beside if self.has_class("-beside") else self.app.size.width

    def _refit_subtitle(self) -> None:
        """The board's subtitle again for the board's width now (after a resize or a wider board)."""
        if self.episode is None or self._boards is None or self.query_one(BoardPanel).game is None:
            return
        try:
            game = self._board_at(self.position)
        except Exception:  # noqa: BLE001 - show_position says why
            return
        self.query_one(BoardPanel).set_subtitle(self._subtitle(game))

    def _show_step(self, step: Step) -> None:
        store = self.app.store
        try:
            prompt = (store.prompts.expand_prompt(step.prompt) if step.prompt
                      else store.prompts.step_prompt(step.episode_id, step.index))
        except Exception as exc:  # noqa: BLE001
            prompt = f"(cannot read the prompt: {exc})"
        episode = self.episode
        self.query_one(AgentPanel).show_view(StepView.of_step(step, prompt, episode.game, episode.mode))

    def _show_contract_warning(self) -> None:
        from s3gym_tui.engine.contract import contract_warning

        model = self.episode.model if self.episode else ""
        self.query_one(AgentPanel).show_warning(contract_warning(model, self.steps))

    # ----- what the live driver calls --------------------------------------------------------
    def add_step(self, episode: Episode, step: Step) -> None:
        """A step was stored: append it, follow it if the view follows, update the figures."""
        self.episode = episode
        self.steps.append(step)
        follow = self.following
        self.query_one(StepsTable).append_step(step, follow=follow)
        self.query_one(ScoreStrip).show_steps(self.steps, self.episode.game, self.episode.mode)
        agent = self.query_one(AgentPanel)
        agent.show_totals(self.steps)
        self._show_contract_warning()
        if follow:
            self.show_position(len(self.steps))

    def show_proposal(self, proposal: Any) -> None:
        from s3gym_games.prompt import messages_json

        if not self.following:
            self.show_position(len(self.steps))
        self.query_one(AgentPanel).show_view(StepView(
            title=f"proposal for step {len(self.steps)} (not executed)", prompt=messages_json(proposal.messages),
            reply=proposal.call.reply, action=proposal.parsed.action, self_score=proposal.parsed.self_score,
            fault=proposal.parsed.problem, tokens_in=proposal.call.tokens_in, tokens_out=proposal.call.tokens_out,
            latency_ms=proposal.call.latency_ms, cost=proposal.call.cost, tokens_cached=proposal.call.tokens_cached,
            range_note=range_note(self.episode.game, self.episode.mode, proposal.parsed.self_score)))
        self.refresh_chrome()

    def show_latest(self) -> None:
        self.show_position(len(self.steps))

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
        session = self.session
        parts = [ep.id, f"{ep.game} {ep.mode} seed {ep.seed}",
                 f"{n} step{'s' if n != 1 else ''}" + (f" of at most {session.game.max_steps}" if session else "")]
        status_word = ep.status
        if ep.score is not None and ep.status != "running":
            status_word += f" · final verifier score {ep.score:g}"
        parts.append(status_word)
        if self.readonly:
            parts.append("replay: ←/→ move · f forks here")
        else:
            parts.append("propose-then-wait ON" if self.propose_then_wait else "propose-then-wait off")
            if self.running:
                parts.append("RUNNING")
            if not self.following:
                parts.append(f"viewing step {self.position - 1}" if self.position else "viewing the start")
        bar.set_text(" · ".join(parts))
        bar.set_thinking(self.thinking, f"{ep.model} is thinking…", self.live.call_detail if self.live else None)
        if proposal.show_proposal(self.proposal):
            bar.display = self.proposal is None
        self._refresh_bindings_if_changed()

    def _binding_state(self) -> tuple:
        """What the key hints depend on (a waiting proposal: accept, edit and veto are in the footer
        too, as well as on the proposal bar)."""
        return (self.readonly, self.session is not None and self.session.done, self.proposal is not None,
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
        if action in MOVE_ACTIONS:
            return not self._input_focused()
        if action in LAYOUT_ACTIONS:  # typed into the take-over field: shown dimmed there, not hidden
            return None if self._input_focused() else True
        if action in ("accept", "edit", "veto"):
            return self.proposal is not None and not self._input_focused()
        if action == "cancel":
            return not self.readonly  # always available (not shown): no repaint per call
        if action == "compare":
            return self.episode is not None and self.episode.fork_of is not None
        if action == "credit":
            return self.episode is not None
        if action == "fork":
            return self.episode is not None and (self.readonly or bool(self.steps))
        if action in ("step", "run_pause", "take_over") and self.session is not None and self.session.done:
            return None  # shown disabled: the episode is over
        return True

    # ----- moving through the episode -----------------------------------------------------------
    def action_prev_step(self) -> None:
        self.show_position(self.position - 1)

    def action_next_step(self) -> None:
        self.show_position(self.position + 1)

    def action_first_step(self) -> None:
        self.show_position(0)

    def action_last_step(self) -> None:
        self.show_position(len(self.steps))

    def on_steps_table_cursor_moved(self, message: StepsTable.CursorMoved) -> None:
        if self.proposal is None:
            self.show_position(message.row, from_cursor=True)

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
        self._compact_for = None
        self._fit_board()
        if board.display:
            self.show_position(self.position)

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

    # ----- live controls (the driver does the work) -------------------------------------------
    def _live(self) -> Optional[LiveDriver]:
        if self.live is None:
            self.notify("This is a stored episode (read-only): f forks it.", severity="warning")
        return self.live

    def action_step(self) -> None:
        if (live := self._live()) is not None:
            live.step()

    def action_run_pause(self) -> None:
        if (live := self._live()) is not None:
            live.run_pause()

    def action_stop(self) -> None:
        if (live := self._live()) is not None:
            live.stop()

    def action_toggle_propose(self) -> None:
        if (live := self._live()) is not None:
            live.toggle_propose()

    def action_cancel(self) -> None:
        if self.live is not None and self.live.cancel_call():
            self.notify("Model call cancelled: nothing was stored.")

    def action_cancel_or_back(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self.live is not None and self.live.cancel_call():
            self.notify("Model call cancelled: nothing was stored.")
        elif self.live is not None and self.query_one(TakeOverBox).is_open:
            self._close_takeover()
        else:
            self.app.pop_screen()

    def action_restart(self) -> None:
        live = self._live()
        if live is None:
            return
        self._close_takeover()
        started = live.restart()
        self.episode, self.steps, self.position = None, [], 0
        if started:
            self._take_session()
            self.notify(f"Restarted: new episode {live.session.episode.id}")
        else:
            self._show_error("Cannot start the episode", live.error)
        self.refresh_chrome()

    def action_accept(self) -> None:
        if self.live is not None:
            self.live.accept()

    def action_veto(self) -> None:
        if self.live is not None:
            self.live.veto()

    def action_edit(self) -> None:
        live = self.live
        if live is None or live.proposal is None:
            return
        proposal = live.proposal
        self.app.push_screen(TextInputDialog(
            "Edit the proposed action", proposal.action, hint=f"Syntax: {live.session.game.answer_format()}. "
            "Stored as a human edit; the model's proposal is kept with the step.", check=live.check),
            lambda value: live.edited(proposal, value))

    def on_proposal_bar_chosen(self, message: ProposalBar.Chosen) -> None:
        {"accept": self.action_accept, "edit": self.action_edit, "veto": self.action_veto}[message.choice]()

    # ----- take over: a person types the action (widgets.take_over checks it first) -------------
    def action_take_over(self) -> None:
        live = self._live()
        if live is None or not live.can_act():
            return
        live.cancel_call()
        live.running = False
        live.proposal = None  # typing your own action discards the proposal (a veto)
        self.query_one(TakeOverBox).open(live.session.game.answer_format(), live.check)
        if not self.following:
            self.show_latest()
        self.refresh_chrome()

    def _close_takeover(self) -> None:
        self.query_one(TakeOverBox).close()
        self.query_one(StepsTable).focus()

    def on_take_over_box_submitted(self, message: TakeOverBox.Submitted) -> None:
        if self.live is None or not self.live.can_act():
            return
        self._close_takeover()
        self.live.commit(None, message.action, "human")

    # ----- messages from the worker (routed to the driver) -------------------------------------
    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if self.live is not None:
            self.live.worker_state_changed(event)

    def on_proposal_ready(self, message: ProposalReady) -> None:
        if self.live is not None:
            self.live.proposal_ready(message)

    def on_step_completed(self, message: StepCompleted) -> None:
        if self.live is not None:
            self.live.step_completed(message)

    def on_model_failed(self, message: ModelFailed) -> None:
        if self.live is not None:
            self.live.model_failed(message)

    def on_step_failed(self, message: StepFailed) -> None:
        if self.live is not None:
            self.live.step_failed(message)

    def on_episode_finished(self, message: EpisodeFinished) -> None:
        self.episode = message.episode
        score = "—" if message.episode.score is None else f"{message.episode.score:g}"
        self.notify(f"Episode {message.episode.status}: final verifier score {score}", title="Episode over")
        if self.following:
            self.show_position(len(self.steps))
        self.refresh_chrome()

    # ----- fork and compare -------------------------------------------------------------------
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

    # ----- leaving --------------------------------------------------------------------------------
    def on_unmount(self) -> None:
        """An unfinished live episode is recorded as stopped when its screen closes."""
        if self.live is not None:
            self.live.finish_if_open()
