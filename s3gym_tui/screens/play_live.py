"""The live side of the play screen: the episode session, model calls in a worker, step, run, stop,
restart, take over (checked against the game first), propose-then-wait (accept, edit, veto), cancel."""

from __future__ import annotations

from typing import Any, Optional

from textual.worker import Worker, WorkerState

from s3gym_tui.messages import EpisodeFinished, ModelFailed, ProposalReady, StepCompleted, StepFailed
from s3gym_tui.screens.play_support import PlayHost, call_settings, call_so_far, ensure_litellm, typical_step

CALL_GROUP = "model-call"


class LiveDriver:
    """Owns what a live episode needs (session, run/think/proposal state, the worker) and tells its
    screen what to show. The screen routes its actions and messages here."""

    def __init__(self, screen: PlayHost, options: dict) -> None:
        self.screen = screen
        self.options = options
        self.session = None  # engine EpisodeSession
        self.running = False
        self.thinking = False
        self.proposal: Any = None  # pending engine Proposal (propose-then-wait)
        self.propose_then_wait = False
        self.queued = 0  # step presses made while a call was in flight (run one after another)
        self.error: Optional[str] = None
        self._worker: Optional[Worker] = None
        self.step_times: Optional[list[float]] = None  # the model's stored call times (ms) on this game
        self.progress: Any = None  # engine.call_progress.CallProgress of the call under way

    # ----- opening -----------------------------------------------------------------------
    def open(self) -> bool:
        """Start the session (new episode or fork); False with `error` set when it cannot."""
        import s3gym_games as games
        from s3gym_tui.engine.play import fork_session, new_play_session
        from s3gym_tui.engine.visibility import Borrow

        o = self.options
        app = self.screen.app
        store = app.store
        o["model"] = o["model"] or app.settings.default_model
        settings = call_settings(o["model"], app.settings)
        try:
            source_run = store.runs.get_run(o["source_run_id"]) if o["source_run_id"] else None
            if o["fork_of"]:  # what the source saw, unless the person chose other experience
                borrow = None if o["experience"] == "source" else \
                    Borrow(source_run.id if o["experience"] == "run" and source_run else None)
                self.session = fork_session(store, o["fork_of"], int(o["fork_step"] or 0), settings,
                                            o["pathway"], borrow)
            else:
                if not o["game"] or o["seed"] is None:
                    raise ValueError("choose a game and a seed")
                self.session = new_play_session(store, games.canonical(o["game"]), o["mode"], int(o["seed"]),
                                                settings, o["pathway"], source_run)
        except Exception as exc:  # noqa: BLE001 - PlayError, LeakageError, StoreError, GameError
            self.session, self.error = None, str(exc)
            return False
        self.error = None
        self._warn_same_game(store)
        return True

    def _warn_same_game(self, store) -> None:
        """Say so when the chosen experience holds this very game (same game, mode and seed)."""
        from s3gym_tui.engine.visibility import same_game_in_context
        from s3gym_tui.textgate import safe

        episode = self.session.episode
        same = same_game_in_context(store, episode)
        if same:
            self.screen.notify(f"The borrowed experience includes {safe(same[0])}, played on this same seed "
                               f"{episode.seed}: the agent has seen this game to its end. Pick another seed "
                               f"for a fair test.", severity="warning", timeout=10)

    @property
    def done(self) -> bool:
        return self.session is not None and self.session.done

    def can_act(self) -> bool:
        screen = self.screen
        if self.session is None:
            screen.notify(self.error or "No live episode here.", severity="warning")
            return False
        if self.session.done:
            screen.notify(f"The episode is over ({self.session.episode.status}); R restarts.", severity="warning")
            return False
        return True

    # ----- model calls -------------------------------------------------------------------
    def call_detail(self) -> str:
        """What the status bar adds to a call's elapsed time: the prompt read or the tokens so far
        (where the provider says), its retries and why, the model's typical step time."""
        if self.step_times is None and self.session is not None:
            episode = self.session.episode
            try:
                self.step_times = self.screen.app.store.episodes.step_latencies(episode.model, episode.game)
            except Exception:  # noqa: BLE001 - a figure we cannot read is not shown
                self.step_times = []
        episode = self.session.episode if self.session is not None else None
        typical = typical_step(self.step_times or [], episode.game) if episode is not None else ""
        so_far = call_so_far(self.progress)
        return " · ".join(part for part in (so_far, typical, "c or esc cancels; nothing is stored") if part)

    def start_think(self) -> None:
        if self.thinking or self.proposal is not None or not self.can_act():
            return
        self.thinking = True
        self._worker = self.screen.run_worker(self._think(self.session, self.propose_then_wait),
                                              group=CALL_GROUP, exclusive=True, exit_on_error=False)
        self.screen.refresh_chrome()

    def continue_(self) -> None:
        """The next call of a run or of queued step presses (quietly nothing if that became moot)."""
        if self.session is not None and not self.session.done and not self.thinking and self.proposal is None:
            self.start_think()

    async def _think(self, session, wait: bool) -> None:
        """One model call; posts ProposalReady (wait) or commits and posts StepCompleted."""
        from s3gym_tui.engine.llm import ModelUnavailable, one_line

        from s3gym_tui.engine.call_progress import CallProgress

        screen = self.screen
        self.progress = CallProgress()
        try:
            await ensure_litellm()
            proposal = await session.propose(progress=self.progress)  # streamed where the provider can
        except ModelUnavailable as exc:
            screen.post_message(ModelFailed(str(exc)))
            return
        except Exception as exc:  # noqa: BLE001 - never let a model problem crash the app
            screen.post_message(ModelFailed(f"{type(exc).__name__}: {one_line(exc)}"))
            return
        if wait:
            screen.post_message(ProposalReady(session.episode.id, proposal.action, proposal.parsed.self_score,
                                              proposal.call.reply, proposal=proposal))
            return
        try:
            step = session.commit(proposal)
        except Exception as exc:  # noqa: BLE001
            screen.post_message(StepFailed(str(exc)))
            return
        screen.post_message(StepCompleted(session.episode, step))

    def cancel_call(self) -> bool:
        if not self.thinking:
            return False
        self.screen.workers.cancel_group(self.screen, CALL_GROUP)
        self.thinking = False
        self.queued = 0
        self.running = False
        self.screen.refresh_chrome()
        return True

    # ----- messages (routed by the screen) -----------------------------------------------
    def worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.worker is self._worker and event.state in (WorkerState.ERROR, WorkerState.CANCELLED):
            self.thinking = False
            self.screen.refresh_chrome()

    def proposal_ready(self, message: ProposalReady) -> None:
        self.thinking = False
        if self.session is None or message.episode_id != self.session.episode.id:
            return
        self.proposal = message.proposal
        self.screen.show_proposal(message.proposal)

    def step_completed(self, message: StepCompleted) -> None:
        self.thinking = False
        if self.session is None or message.episode.id != self.session.episode.id:
            return
        if self.step_times is not None and message.step.actor == "model" and message.step.latency_ms > 0:
            self.step_times.insert(0, message.step.latency_ms)
        self.screen.add_step(self.session.episode, message.step)
        if self.session.done:
            self.running = False
            self.queued = 0
            self.screen.post_message(EpisodeFinished(self.session.episode))
        elif self.running:
            self.screen.call_after_refresh(self.continue_)
        elif self.queued and not self.propose_then_wait:
            self.queued -= 1
            self.screen.call_after_refresh(self.continue_)
        self.screen.refresh_chrome()

    def model_failed(self, message: ModelFailed) -> None:
        self.thinking = False
        self.queued = 0
        self.running = False
        self.screen.notify(message.error, title="Model call failed (episode intact)", severity="error", timeout=10)
        self.screen.refresh_chrome()

    def step_failed(self, message: StepFailed) -> None:
        self.thinking = False
        self.running = False
        self.screen.notify(message.error, title="Step not stored", severity="error", timeout=10)
        self.screen.refresh_chrome()

    # ----- controls ------------------------------------------------------------------------
    def step(self) -> None:
        if self.proposal is not None:
            self.screen.notify("A proposal is waiting: accept (a), edit (e) or veto (v).", severity="warning")
            return
        if self.thinking:
            self.queued += 1  # taken one after another once the call in flight completes
            return
        self.start_think()

    def run_pause(self) -> None:
        if self.running:
            self.running = False
            self.screen.notify("Paused after the current step.")
            self.screen.refresh_chrome()
            return
        if not self.can_act():
            return
        self.running = True
        if not self.thinking and self.proposal is None:
            self.start_think()
        self.screen.refresh_chrome()

    def stop(self) -> None:
        if not self.can_act():
            return
        self.cancel_call()
        self.running = False
        self.proposal = None
        try:
            episode = self.session.finish("stopped")
        except Exception as exc:  # noqa: BLE001
            self.screen.notify(str(exc), severity="error")
            return
        self.screen.post_message(EpisodeFinished(episode))
        self.screen.refresh_chrome()

    def finish_if_open(self) -> None:
        """An unfinished episode is recorded as stopped (leaving the screen, restarting)."""
        if self.session is not None and not self.session.done:
            try:
                self.session.finish("stopped")
            except Exception:  # noqa: BLE001 - the app may be closing its store
                pass

    def restart(self) -> bool:
        """A new episode with the same options; True when it started."""
        self.cancel_call()
        self.finish_if_open()
        self.running = False
        self.proposal = None
        self.session = None
        return self.open()

    def toggle_propose(self) -> None:
        self.propose_then_wait = not self.propose_then_wait
        self.screen.notify("Propose-then-wait " + ("on: the model proposes, you accept, edit or veto."
                                                   if self.propose_then_wait else "off: the model acts directly."))
        self.screen.refresh_chrome()

    def check(self, action: str) -> tuple[bool, str]:
        """(valid, the game's feedback) for this action in the current state, without taking it."""
        from s3gym_tui.engine.play import preview_action

        result = preview_action(self.session.game, action)
        return result.valid, result.feedback

    def commit(self, proposal: Any, action: Optional[str], actor: str) -> None:
        if not self.can_act():
            return
        try:
            step = self.session.commit(proposal, action=action, actor=actor)
        except Exception as exc:  # noqa: BLE001
            self.screen.post_message(StepFailed(str(exc)))
            return
        self.proposal = None
        self.screen.post_message(StepCompleted(self.session.episode, step))

    def accept(self) -> None:
        if self.proposal is not None:
            self.commit(self.proposal, None, "model")

    def edited(self, proposal: Any, value: Optional[str]) -> None:
        """The person's edit of `proposal` (None: cancelled)."""
        if value is None or self.proposal is not proposal:
            return
        from s3gym_tui.textgate import safe

        value = value.strip()
        if not value:
            self.screen.notify("Empty action: the proposal is still waiting.", severity="warning")
        elif value in (proposal.action, safe(proposal.action, one_line=True).strip()):  # as proposed, or as shown
            self.commit(proposal, None, "model")  # unchanged: the model's own action
        else:
            self.commit(proposal, value, "human-edit")

    def veto(self) -> None:
        if self.proposal is None:
            return
        self.proposal = None
        self.running = False
        self.screen.show_latest()
        self.screen.notify("Proposal vetoed: type an action (t) or ask again (n).")
        self.screen.refresh_chrome()
