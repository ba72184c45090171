"""Live play: a new episode or a fork, stepped by the model (engine.live.LiveEpisode) or a person."""

from __future__ import annotations

from typing import Any, Iterable, Optional

from textual.widget import Widget

from s3gym_tui.engine.events import (CallFailed, EpisodeDone, LiveChanged, ProposalMade, StepDone, StepRefused)
from s3gym_tui.engine.live import LiveEpisode, Refused
from s3gym_tui.engine.play import PlayOptions, open_live_session
from s3gym_tui.messages import LiveEvent
from s3gym_tui.screens.dialogs import TextInputDialog
from s3gym_tui.screens.play import PlayScreen
from s3gym_tui.screens.play_support import call_settings, call_so_far, typical_step
from s3gym_tui.widgets.proposal_bar import ProposalBar
from s3gym_tui.widgets.steps_table import StepsTable
from s3gym_tui.widgets.take_over import TakeOverBox

CALL_GROUP = "model-call"
REFUSAL_HINTS = {"over": "; R restarts.", "waiting": ": accept (a), edit (e) or veto (v)."}


class LivePlayScreen(PlayScreen):
    """A live episode: `options` say which (a new one: game, mode, seed; or a fork). The engine's
    LiveEpisode does the stepping; its events come back here as LiveEvent messages and are shown."""

    readonly = False

    def __init__(self, options: PlayOptions) -> None:
        super().__init__()
        self.options = options
        self.live: Optional[LiveEpisode] = None  # None when the episode could not start
        self._wait = False  # propose-then-wait, as the person last chose (kept across restarts)
        self.step_times: Optional[list[float]] = None  # the model's stored call times (ms) on this game

    # ----- what the tests and the chrome read -----------------------------------------------------
    @property
    def session(self):
        return self.live.session if self.live else None

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
    def done(self) -> bool:
        return bool(self.live and self.live.done)

    @property
    def propose_then_wait(self) -> bool:
        return self._wait

    def extra_widgets(self) -> Iterable[Widget]:
        yield TakeOverBox(id="takeover-box")

    # ----- opening ----------------------------------------------------------------------------------
    def open_episode(self) -> None:
        self._wait = bool(self.app.settings.propose_then_wait)
        if self._start():
            self._show_session()
        else:
            self.show_error("Cannot start the episode", self.error)

    def _start(self) -> bool:
        """Open the session `options` ask for; False with `error` set when it cannot."""
        app = self.app
        self.options = self.options.model_copy(update={"model": self.options.model or app.settings.default_model})
        try:
            session = open_live_session(app.store, self.options, call_settings(self.options.model, app.settings))
        except Exception as exc:  # noqa: BLE001 - PlayError, LeakageError, StoreError, GameError
            self.live, self.error = None, str(exc)
            return False
        self.error = None
        self.live = LiveEpisode(session, self._launch, self._post, wait=self._wait)
        self._warn_same_game()
        return True

    def _launch(self, work) -> Any:
        return self.run_worker(work, group=CALL_GROUP, exit_on_error=False)

    def _post(self, event) -> None:
        self.post_message(LiveEvent(event))

    def _show_session(self) -> None:
        """Show the live session's episode (after opening or restarting), following its newest step."""
        session = self.live.session
        self.show_episode(session.episode, list(session.steps), None,
                          "No step yet: press n to step, t to type an action.",
                          newest=lambda: session.game if len(session.steps) == len(self.steps) else None)
        if session.episode.fork_of:
            self.notify(f"Context: {self.context_label(session.episode)}", title="Fork")

    def _warn_same_game(self) -> None:
        """Say so when the chosen experience holds this very game (same game, mode and seed)."""
        from s3gym_tui.engine.visibility import same_game_in_context
        from s3gym_tui.textgate import safe

        episode = self.live.session.episode
        same = same_game_in_context(self.app.store, episode)
        if same:
            self.notify(f"The borrowed experience includes {safe(same[0])}, played on this same seed "
                        f"{episode.seed}: the agent has seen this game to its end. Pick another seed "
                        f"for a fair test.", severity="warning", timeout=10)

    # ----- the chrome -------------------------------------------------------------------------------
    def step_limit(self) -> str:
        return f" of at most {self.live.session.game.max_steps}" if self.live else ""

    def status_notes(self) -> list[str]:
        notes = ["propose-then-wait ON" if self._wait else "propose-then-wait off"]
        if self.running:
            notes.append("RUNNING")
        if not self.following:
            notes.append(f"viewing step {self.position - 1}" if self.position else "viewing the start")
        return notes

    def call_detail(self) -> str:
        """What the status bar adds to a call's elapsed time: the prompt read or the tokens so far
        (where the provider says), its retries and why, the model's typical step time."""
        episode = self.live.session.episode if self.live else None
        if self.step_times is None and episode is not None:
            try:
                self.step_times = self.app.store.episodes.step_latencies(episode.model, episode.game)
            except Exception:  # noqa: BLE001 - a figure we cannot read is not shown
                self.step_times = []
        typical = typical_step(self.step_times or [], episode.game) if episode is not None else ""
        so_far = call_so_far(self.live.progress if self.live else None)
        return " · ".join(part for part in (so_far, typical, "c or esc cancels; nothing is stored") if part)

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action in ("step", "run_pause", "take_over") and self.done:
            return None  # shown disabled: the episode is over
        return super().check_action(action, parameters)

    # ----- the live episode's events ---------------------------------------------------------------
    def on_live_event(self, message: LiveEvent) -> None:
        event = message.event
        episode = getattr(event, "episode", None)
        if self.live is None or (episode.id if episode is not None else event.episode_id) != self.live.episode_id:
            return  # an event of an episode no longer shown (restarted)
        if isinstance(event, StepDone):
            self._step_done(event)
        elif isinstance(event, EpisodeDone):
            self._episode_done(event)
        elif isinstance(event, ProposalMade):
            self.view.show_proposal(event.proposal)
            self._moved()
        elif isinstance(event, CallFailed):
            self.notify(event.error, title="Model call failed (episode intact)", severity="error", timeout=10)
            self.refresh_chrome()
        elif isinstance(event, StepRefused):
            self.notify(event.error, title="Step not stored", severity="error", timeout=10)
            self.refresh_chrome()
        elif isinstance(event, LiveChanged):
            self.refresh_chrome()

    def _step_done(self, event: StepDone) -> None:
        step = event.step
        if self.step_times is not None and step.actor == "model" and step.latency_ms > 0:
            self.step_times.insert(0, step.latency_ms)
        follow = self.following
        self.view.add_step(event.episode, step)
        if follow:
            self._moved()
        else:
            self.refresh_chrome()

    def _episode_done(self, event: EpisodeDone) -> None:
        episode = event.episode
        self.view.set_episode(episode)
        score = "—" if episode.score is None else f"{episode.score:g}"
        self.notify(f"Episode {episode.status}: final verifier score {score}", title="Episode over")
        if self.following:
            self.move_to(len(self.steps))
        else:
            self.refresh_chrome()

    # ----- commands (the engine's LiveEpisode carries them out or says why not) ----------------------
    def _machine(self) -> Optional[LiveEpisode]:
        if self.live is None:
            self.notify(self.error or "No live episode here.", severity="warning")
        return self.live

    def _told(self, refused: Optional[Refused]) -> bool:
        """True when the command was carried out; else the person is told why not."""
        if refused is None:
            return True
        if refused.kind == "error":
            self.notify(refused.reason, severity="error")
        else:
            self.notify(refused.reason + REFUSAL_HINTS.get(refused.kind, "."), severity="warning")
        return False

    def action_step(self) -> None:
        if live := self._machine():
            self._told(live.step())

    def action_run_pause(self) -> None:
        if not (live := self._machine()):
            return
        if live.running:
            if self._told(live.pause()):
                self.notify("Paused after the current step.")
        else:
            self._told(live.run())

    def action_stop(self) -> None:
        if live := self._machine():
            self._told(live.stop())

    def action_toggle_propose(self) -> None:
        self._wait = not self._wait
        if self.live is not None:
            self.live.set_wait(self._wait)
        self.notify("Propose-then-wait " + ("on: the model proposes, you accept, edit or veto."
                                            if self._wait else "off: the model acts directly."))
        self.refresh_chrome()

    def _cancel_call(self) -> bool:
        if self.live is not None and self.live.thinking and self.live.cancel() is None:
            self.notify("Model call cancelled: nothing was stored.")
            return True
        return False

    def action_cancel(self) -> None:
        self._cancel_call()

    def action_cancel_or_back(self) -> None:
        if self.maximized is not None:
            self.minimize()
        elif self._cancel_call():
            pass
        elif self.query_one(TakeOverBox).is_open:
            self._close_takeover()
        else:
            self.app.pop_screen()

    def action_restart(self) -> None:
        """A new episode with the same options (the current one, unfinished, is stored as stopped)."""
        self._close_takeover()
        if self.live is not None:
            self.live.close()
        self.view.clear()
        if self._start():
            self._show_session()
            self.notify(f"Restarted: new episode {self.live.episode_id}")
        else:
            self.show_error("Cannot start the episode", self.error)
        self.refresh_chrome()

    def action_accept(self) -> None:
        if self.live is not None:
            self._told(self.live.accept())

    def action_veto(self) -> None:
        if self.live is not None and self._told(self.live.veto()):
            self.move_to(len(self.steps))
            self.notify("Proposal vetoed: type an action (t) or ask again (n).")

    def action_edit(self) -> None:
        live = self.live
        if live is None or live.proposal is None:
            return
        proposal = live.proposal

        def edited(value: Optional[str]) -> None:
            if value is not None:
                self._told(live.edit(value, of=proposal))

        self.app.push_screen(TextInputDialog(
            "Edit the proposed action", proposal.action, hint=f"Syntax: {live.session.game.answer_format()}. "
            "Stored as a human edit; the model's proposal is kept with the step.", check=live.check), edited)

    def on_proposal_bar_chosen(self, message: ProposalBar.Chosen) -> None:
        {"accept": self.action_accept, "edit": self.action_edit, "veto": self.action_veto}[message.choice]()

    # ----- take over: a person types the action (widgets.take_over checks it first) ------------------
    def action_take_over(self) -> None:
        if not (live := self._machine()) or not self._told(live.take_over()):
            return
        self.query_one(TakeOverBox).open(live.session.game.answer_format(), live.check)
        if not self.following:
            self.move_to(len(self.steps))

    def _close_takeover(self) -> None:
        self.query_one(TakeOverBox).close()
        self.query_one(StepsTable).focus()

    def on_take_over_box_submitted(self, message: TakeOverBox.Submitted) -> None:
        if not (live := self._machine()):
            return
        self._close_takeover()
        self._told(live.act(message.action))

    # ----- leaving ---------------------------------------------------------------------------------
    def on_unmount(self) -> None:
        """An unfinished live episode is recorded as stopped when its screen closes."""
        if self.live is not None:
            self.live.close()
