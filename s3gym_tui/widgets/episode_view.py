"""One episode at one position: the board, the agent panel, the steps and the score strip (replay and live)."""

from __future__ import annotations

from typing import Any, Callable, Optional

from textual.app import ComposeResult
from textual.containers import Horizontal

from s3gym_tui.engine.replay import ReplayBoard
from s3gym_tui.models import Episode, Step
from s3gym_tui.widgets.agent_panel import AgentPanel, StepView
from s3gym_tui.widgets.board import BoardPanel
from s3gym_tui.widgets.score_strip import ScoreStrip
from s3gym_tui.widgets.steps_table import StepsTable
from s3gym_tui.widgets.verdicts import range_note

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


class EpisodeView(Horizontal):
    """The view is one position in the episode: row 0 of the steps table is the start, row i + 1 is
    step i, and the board, the feedback, the prompt and the reply shown are that step's own (the
    board as it was after the step). A view that `follows` (live) tracks the newest step until it is
    moved to an older one. The screen lays it out (grid columns, the board's width: `board_width`)."""

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self.episode: Optional[Episode] = None
        self.steps: list[Step] = []
        self.original: Optional[list[Step]] = None  # a fork's source steps
        self.position = 0  # steps applied to the board in view (0 = the start)
        self.follows = False  # live: the view tracks the newest step while it is there
        self.board_width = 0  # the board panel's outer width as the screen lays it out
        self._boards: Optional[ReplayBoard] = None
        self._newest: Optional[Callable[[], Any]] = None  # live: the game at the newest step, if in step with it
        self._marks_of: Optional[tuple[str, dict]] = None

    def compose(self) -> ComposeResult:
        yield BoardPanel(id="board", classes="panel")
        yield AgentPanel(id="agent", classes="panel")
        yield StepsTable(id="steps", classes="panel")
        yield ScoreStrip(id="strip", classes="panel")

    # ----- state -----------------------------------------------------------------------------------
    @property
    def following(self) -> bool:
        return self.follows and self.position == len(self.steps)

    @property
    def shown(self) -> bool:
        return self.episode is not None and self._boards is not None

    def show_error(self, message: str) -> None:
        self.query_one(BoardPanel).show_message(message, "Error")

    # ----- showing -----------------------------------------------------------------------------------
    def show_episode(self, episode: Episode, steps: list[Step], original: Optional[list[Step]], *,
                     position: Optional[int] = None, empty_hint: str = "", summary_label: str = "",
                     context_label: str = "", newest: Optional[Callable[[], Any]] = None) -> None:
        """Show `episode` (its steps; a fork's `original` steps beside them) at `position` (None: the
        newest step, and the view follows it). `newest()`: the live game at the newest step, or None."""
        self.episode, self.steps, self.original = episode, steps, original
        self.follows, self._newest = position is None, newest
        self._boards = ReplayBoard(episode, steps)
        self.query_one(StepsTable).set_steps(steps, original, episode.game, episode.mode)
        agent = self.query_one(AgentPanel)
        agent.empty_hint = empty_hint
        agent.show_context(episode, summary_label, context_label)
        agent.show_totals(steps)
        self.query_one(ScoreStrip).show_steps(steps, episode.game, episode.mode)
        self._show_contract_warning()
        self.show_position(len(steps) if position is None else position)

    def clear(self) -> None:
        """No episode (a live one that could not start again)."""
        self.episode, self.steps, self.position, self._boards = None, [], 0, None

    def set_episode(self, episode: Episode) -> None:
        """The episode's record changed (finished, stopped)."""
        self.episode = episode

    def board_at(self, position: int) -> Any:
        newest = self._newest() if self._newest is not None and position == len(self.steps) else None
        return newest if newest is not None else self._boards.at(position)

    def show_position(self, position: int, from_cursor: bool = False) -> None:
        """Show the board after `position` steps, and that step's feedback, prompt and reply."""
        if not self.shown:
            return
        self.position = max(0, min(position, len(self.steps)))
        board = self.query_one(BoardPanel)
        try:
            game = self.board_at(self.position)
        except Exception as exc:  # noqa: BLE001
            board.show_message(f"Cannot replay this episode: {exc}", "Error")
            return
        board.show_game(game, self.subtitle(game))
        if not from_cursor:
            self.query_one(StepsTable).move_cursor(self.position)
        agent = self.query_one(AgentPanel)
        if self.position == 0:
            agent.show_view(None)
            agent.show_feedback("", "the start")
        else:
            step = self.steps[self.position - 1]
            self._show_step(step)
            marks = self.marks.get(step.index, [])
            labels = f" · {', '.join(dict.fromkeys(a.label for a in marks))}" if marks else ""
            agent.show_feedback(step.feedback, f"step {step.index}{labels}")

    def add_step(self, episode: Episode, step: Step) -> None:
        """A step was stored: append it, follow it if the view follows, update the figures."""
        follow = self.following
        self.episode = episode
        self.steps.append(step)
        self.query_one(StepsTable).append_step(step, follow=follow)
        self.query_one(ScoreStrip).show_steps(self.steps, episode.game, episode.mode)
        self.query_one(AgentPanel).show_totals(self.steps)
        self._show_contract_warning()
        if follow:
            self.show_position(len(self.steps))

    def show_proposal(self, proposal: Any) -> None:
        """The model's proposal for the next step (not executed), at the newest position."""
        from s3gym_games.prompt import messages_json

        if not self.following:
            self.show_position(len(self.steps))
        episode = self.episode
        self.query_one(AgentPanel).show_view(StepView(
            title=f"proposal for step {len(self.steps)} (not executed)", prompt=messages_json(proposal.messages),
            reply=proposal.call.reply, action=proposal.parsed.action, self_score=proposal.parsed.self_score,
            fault=proposal.parsed.problem, tokens_in=proposal.call.tokens_in, tokens_out=proposal.call.tokens_out,
            latency_ms=proposal.call.latency_ms, cost=proposal.call.cost, tokens_cached=proposal.call.tokens_cached,
            range_note=range_note(episode.game, episode.mode, proposal.parsed.self_score)))

    # ----- the board's subtitle ------------------------------------------------------------------------
    def subtitle(self, game: Any) -> str:
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
                            (self.board_width or self.app.size.width) - BORDER_TEXT_CHROME)

    def refit_subtitle(self) -> None:
        """The board's subtitle again for the board's width now (after a resize or a wider board)."""
        board = self.query_one(BoardPanel)
        if not self.shown or board.game is None:
            return
        try:
            game = self.board_at(self.position)
        except Exception:  # noqa: BLE001 - show_position says why
            return
        board.set_subtitle(self.subtitle(game))

    # ----- the step in view ------------------------------------------------------------------------
    @property
    def marks(self) -> dict:
        """The episode's step annotations by index (read once per episode; forget_marks reads them again)."""
        if self.episode is None:
            return {}
        if self._marks_of is None or self._marks_of[0] != self.episode.id:
            try:
                marks = self.app.store.annotations.annotations_of_steps(self.episode.id)
            except Exception:  # noqa: BLE001 - annotations never stop a replay
                marks = {}
            self._marks_of = (self.episode.id, marks)
        return self._marks_of[1]

    def forget_marks(self) -> None:
        self._marks_of = None

    def _show_step(self, step: Step) -> None:
        store = self.app.store
        try:
            prompt = store.prompts.prompt_of(step)
        except Exception as exc:  # noqa: BLE001
            prompt = f"(cannot read the prompt: {exc})"
        episode = self.episode
        self.query_one(AgentPanel).show_view(StepView.of_step(step, prompt, episode.game, episode.mode))

    def _show_contract_warning(self) -> None:
        from s3gym_tui.engine.contract import contract_warning

        model = self.episode.model if self.episode else ""
        self.query_one(AgentPanel).show_warning(contract_warning(model, self.steps))
