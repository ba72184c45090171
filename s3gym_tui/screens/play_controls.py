"""The live controls of the play screen: model calls in a worker, step, run, stop, restart, take over,
propose-then-wait (accept, edit, veto) and cancel. A mixin of PlayScreen (handlers by naming convention)."""

from __future__ import annotations

from typing import Any, Optional

from textual import work
from textual.widgets import Button, Input
from textual.worker import Worker, WorkerState

from s3gym_tui.messages import EpisodeFinished, ModelFailed, ProposalReady, StepCompleted, StepFailed
from s3gym_tui.screens.dialogs import TextInputDialog
from s3gym_tui.screens.play_support import ensure_litellm
from s3gym_tui.widgets.agent_panel import AgentPanel, StepView
from s3gym_tui.widgets.score_strip import ScoreStrip
from s3gym_tui.widgets.steps_table import StepsTable

CALL_GROUP = "model-call"


class LiveControls:
    """Needs the PlayScreen attributes: session, episode, steps, running, thinking, proposal,
    propose_then_wait, queued, _call_worker, and its _refresh_chrome/_show_* methods."""

    def _start_think(self) -> None:
        if self.thinking or self.proposal is not None or not self._can_act():
            return
        self.thinking = True
        self._call_worker = self._think(self.session, self.propose_then_wait)
        self._refresh_chrome()

    def _continue(self) -> None:
        """The next call of a run or of queued step presses (quietly nothing if that became moot)."""
        if self.session is not None and not self.session.done and not self.thinking and self.proposal is None:
            self._start_think()

    @work(exclusive=True, group=CALL_GROUP, exit_on_error=False)
    async def _think(self, session, wait: bool) -> None:
        """One model call; posts ProposalReady (wait) or commits and posts StepCompleted."""
        from s3gym_tui.engine.llm import ModelUnavailable, one_line

        try:
            await ensure_litellm()
            proposal = await session.propose()
        except ModelUnavailable as exc:
            self.post_message(ModelFailed(str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - never let a model problem crash the app
            self.post_message(ModelFailed(f"{type(exc).__name__}: {one_line(exc)}"))
            return
        if wait:
            self.post_message(ProposalReady(session.episode.id, proposal.action, proposal.parsed.self_score,
                                            proposal.call.reply, proposal=proposal))
            return
        try:
            step = session.commit(proposal)
        except Exception as exc:  # noqa: BLE001
            self.post_message(StepFailed(str(exc)))
            return
        self.post_message(StepCompleted(session.episode, step))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is self._call_worker and event.state in (WorkerState.ERROR, WorkerState.CANCELLED):
            self.thinking = False
            self._refresh_chrome()

    def on_proposal_ready(self, message: ProposalReady) -> None:
        self.thinking = False
        if self.session is None or message.episode_id != self.session.episode.id:
            return
        self.proposal = message.proposal
        proposal = message.proposal
        from s3gym_tui.engine.prompts import messages_json

        self.query_one(AgentPanel).show_view(StepView(
            title=f"proposal for step {len(self.steps)} (not executed)", prompt=messages_json(proposal.messages),
            reply=proposal.call.reply, action=proposal.parsed.action, self_score=proposal.parsed.self_score,
            fault=proposal.parsed.problem, tokens_in=proposal.call.tokens_in, tokens_out=proposal.call.tokens_out,
            latency_ms=proposal.call.latency_ms, cost=proposal.call.cost))
        self._refresh_chrome()

    def on_step_completed(self, message: StepCompleted) -> None:
        self.thinking = False
        if self.session is None or message.episode.id != self.session.episode.id:
            return
        self.episode = self.session.episode
        self.steps.append(message.step)
        self.query_one(StepsTable).append_step(message.step)
        self.query_one(ScoreStrip).show_steps(self.steps)
        agent = self.query_one(AgentPanel)
        agent.show_totals(self.steps)
        agent.show_feedback(self.session.feedback)
        self._show_step(message.step.index)
        self._show_board()
        if self.session.done:
            self.running = False
            self.queued = 0
            self.post_message(EpisodeFinished(self.session.episode))
        elif self.running:
            self.call_after_refresh(self._continue)
        elif self.queued and not self.propose_then_wait:
            self.queued -= 1
            self.call_after_refresh(self._continue)
        self._refresh_chrome()

    def on_episode_finished(self, message: EpisodeFinished) -> None:
        self.episode = message.episode
        score = "–" if message.episode.score is None else f"{message.episode.score:g}"
        self.notify(f"Episode {message.episode.status}: final verifier score {score}",
                    title="Episode over")
        self._show_board()
        self._refresh_chrome()

    def on_model_failed(self, message: ModelFailed) -> None:
        self.thinking = False
        self.queued = 0
        self.running = False
        self.notify(message.error, title="Model call failed (episode intact)", severity="error", timeout=10)
        self._refresh_chrome()

    def on_step_failed(self, message: StepFailed) -> None:
        self.thinking = False
        self.running = False
        self.notify(message.error, title="Step not stored", severity="error", timeout=10)
        self._refresh_chrome()

    # ----- live controls ------------------------------------------------------------------------
    def action_step(self) -> None:
        if self.readonly:
            self.notify("This is a stored episode (read-only): f forks it.", severity="warning")
            return
        if self.proposal is not None:
            self.notify("A proposal is waiting: accept (a), edit (e) or veto (v).", severity="warning")
            return
        if self.thinking:
            self.queued += 1  # taken one after another once the call in flight completes
            return
        self._start_think()

    def action_run_pause(self) -> None:
        if self.running:
            self.running = False
            self.notify("Paused after the current step.")
            self._refresh_chrome()
            return
        if not self._can_act():
            return
        self.running = True
        if not self.thinking and self.proposal is None:
            self._start_think()
        self._refresh_chrome()

    def _cancel_call(self) -> bool:
        if not self.thinking:
            return False
        self.workers.cancel_group(self, CALL_GROUP)
        self.thinking = False
        self.queued = 0
        self.running = False
        self._refresh_chrome()
        return True

    def action_cancel(self) -> None:
        if self._cancel_call():
            self.notify("Model call cancelled: nothing was stored.")

    def action_cancel_or_back(self) -> None:
        takeover = self.query_one("#takeover", Input)
        if self._cancel_call():
            self.notify("Model call cancelled: nothing was stored.")
        elif takeover.display:
            takeover.display = False
            self.query_one(StepsTable).focus()
        else:
            self.app.pop_screen()

    def action_stop(self) -> None:
        if not self._can_act():
            return
        self._cancel_call()
        self.running = False
        self.proposal = None
        try:
            self.episode = self.session.finish("stopped")
        except Exception as exc:  # noqa: BLE001
            self.notify(str(exc), severity="error")
            return
        self.post_message(EpisodeFinished(self.episode))
        self._refresh_chrome()

    def action_restart(self) -> None:
        if self.session is None and self.error is None:
            return
        self._cancel_call()
        if self.session is not None and not self.session.done:
            try:
                self.session.finish("stopped")
            except Exception:  # noqa: BLE001
                pass
        self.running = False
        self.proposal = None
        self.session = None
        self.episode = None
        self.steps = []
        self.error = None
        self.query_one("#takeover", Input).display = False
        self._open_live()
        self._refresh_chrome()
        if self.session is not None:
            self.notify(f"Restarted: new episode {self.session.episode.id}")

    def action_toggle_propose(self) -> None:
        self.propose_then_wait = not self.propose_then_wait
        self.notify("Propose-then-wait " + ("on: the model proposes, you accept, edit or veto."
                                            if self.propose_then_wait else "off: the model acts directly."))
        self._refresh_chrome()

    def action_take_over(self) -> None:
        if not self._can_act():
            return
        self._cancel_call()
        self.running = False
        if self.proposal is not None:
            self.proposal = None  # typing your own action discards the proposal (a veto)
        takeover = self.query_one("#takeover", Input)
        takeover.placeholder = f"Your action ({self.session.game.answer_format()}); enter plays it, esc cancels"
        takeover.value = ""
        takeover.display = True
        takeover.focus()
        self._refresh_chrome()

    def on_input_submitted(self, event: Input.Submitted) -> None:
        if event.input.id != "takeover":
            return
        action = event.value.strip()
        if not action:
            self.notify("Type an action first (esc cancels).", severity="warning")
            return
        event.input.display = False
        self.query_one(StepsTable).focus()
        self._commit(None, action, "human")

    def _commit(self, proposal: Any, action: Optional[str], actor: str) -> None:
        if not self._can_act():
            return
        try:
            step = self.session.commit(proposal, action=action, actor=actor)
        except Exception as exc:  # noqa: BLE001
            self.post_message(StepFailed(str(exc)))
            return
        self.proposal = None
        self.post_message(StepCompleted(self.session.episode, step))

    def action_accept(self) -> None:
        if self.proposal is not None:
            self._commit(self.proposal, None, "model")

    def action_edit(self) -> None:
        proposal = self.proposal
        if proposal is None:
            return

        def edited(value: Optional[str]) -> None:
            if value is None or self.proposal is not proposal:
                return
            value = value.strip()
            if not value:
                self.notify("Empty action: the proposal is still waiting.", severity="warning")
            elif value == proposal.action:
                self._commit(proposal, None, "model")  # unchanged: the model's own action
            else:
                self._commit(proposal, value, "human-edit")

        self.app.push_screen(TextInputDialog(
            "Edit the proposed action", proposal.action, hint=f"Syntax: {self.session.game.answer_format()}. "
            "Stored as a human edit; the model's proposal is kept with the step."), edited)

    def action_veto(self) -> None:
        if self.proposal is None:
            return
        self.proposal = None
        self.running = False
        self._show_step(len(self.steps) - 1)
        self.notify("Proposal vetoed: type an action (t) or ask again (n).")
        self._refresh_chrome()

    def on_button_pressed(self, event: Button.Pressed) -> None:
        action = {"proposal-accept": self.action_accept, "proposal-edit": self.action_edit,
                  "proposal-veto": self.action_veto}.get(event.button.id or "")
        if action is not None:
            action()

