"""A live episode as a state machine (idle, thinking, proposal, running, over) that emits engine events."""

from __future__ import annotations

import asyncio
import gc
import importlib
import sys
from dataclasses import dataclass
from typing import Any, Callable, Coroutine, Literal, Optional, Protocol

from s3gym_tui.engine.events import (CallFailed, Event, EventSink, LiveChanged, LiveState, ProposalMade, StepRefused,
                                     ignore)
from s3gym_tui.engine.session import EpisodeSession, Proposal

_heap_frozen = False


class Cancellable(Protocol):
    """What launching a call gives back (a Textual Worker, an asyncio Task)."""

    def cancel(self) -> Any: ...


Launch = Callable[[Coroutine[Any, Any, None]], Cancellable]
RefusalKind = Literal["over", "waiting", "no_proposal", "stale", "empty", "not_running", "no_call", "error"]


@dataclass(frozen=True)
class Refused:
    """Why a command was not carried out (nothing changed)."""

    kind: RefusalKind
    reason: str


async def ensure_litellm() -> None:
    """Import litellm (seconds, the first time) off the event loop, then freeze the long-lived heap:
    litellm's huge object graph would otherwise make every full GC pass take ~0.4 s (a visible stall
    every few steps)."""
    global _heap_frozen
    if "litellm" not in sys.modules:
        await asyncio.to_thread(importlib.import_module, "litellm")
    if not _heap_frozen:
        _heap_frozen = True
        gc.freeze()


class LiveEpisode:
    """One live episode's controls: step, run, pause, stop, accept, edit, veto, take over (then act),
    cancel, propose-then-wait. Each command either acts or returns a Refused (and changes nothing).

    Model calls run through `launch` (a coroutine in, something with cancel() out); one at a time.
    Everything that happens is an event on `on_event`: the session's own (StepStarted, StepDone,
    EpisodeDone) and LiveChanged, ProposalMade, CallFailed, StepRefused. What the model sees is the
    session's (EpisodeSession: its experience and its steps' feedback, never a verifier reward)."""

    def __init__(self, session: EpisodeSession, launch: Launch, on_event: EventSink = ignore,
                 wait: bool = False) -> None:
        self.session = session
        self.launch = launch
        self.on_event = on_event
        session.on_event = on_event  # one stream: the session's events and the machine's
        self.wait = wait  # propose-then-wait: a proposal waits for accept, edit or veto
        self.running = False  # the model steps on its own until paused, stopped or the end
        self.proposal: Optional[Proposal] = None
        self.queued = 0  # step presses made while a call was under way (taken one after another)
        self.progress: Any = None  # engine.call_progress.CallProgress of the latest call
        self._call: Optional[Cancellable] = None
        self._calls = 0  # calls started or dropped: a late result of a dropped call is ignored

    # ----- state ------------------------------------------------------------------------------
    @property
    def episode_id(self) -> str:
        return self.session.episode.id

    @property
    def thinking(self) -> bool:
        """A model call is under way."""
        return self._call is not None

    @property
    def done(self) -> bool:
        return self.session.done

    @property
    def state(self) -> LiveState:
        if self.session.done:
            return "over"
        if self.proposal is not None:
            return "proposal"
        if self.running:
            return "running"
        return "thinking" if self.thinking else "idle"

    def _emit(self, event: Event) -> None:
        self.on_event(event)

    def _changed(self) -> None:
        self._emit(LiveChanged(self.episode_id, self.state))

    def _over(self) -> Optional[Refused]:
        if self.session.done:
            return Refused("over", f"The episode is over ({self.session.episode.status})")
        return None

    # ----- commands -----------------------------------------------------------------------------
    def step(self) -> Optional[Refused]:
        """One model step (queued after the call under way, if any)."""
        if refused := self._over():
            return refused
        if self.proposal is not None:
            return Refused("waiting", "A proposal is waiting")
        if self.thinking:
            self.queued += 1
        else:
            self._start()
        self._changed()
        return None

    def run(self) -> Optional[Refused]:
        """The model steps on its own (after the proposal waiting, if any, is accepted)."""
        if refused := self._over():
            return refused
        self.running = True
        if not self.thinking and self.proposal is None:
            self._start()
        self._changed()
        return None

    def pause(self) -> Optional[Refused]:
        """No further step once the call under way is done."""
        if not self.running:
            return Refused("not_running", "Not running")
        self.running = False
        self._changed()
        return None

    def stop(self) -> Optional[Refused]:
        """End the episode now, from any state: the call under way is dropped, the proposal discarded,
        the episode stored as stopped (EpisodeDone)."""
        if refused := self._over():
            return refused
        self._drop_call()
        self.running, self.proposal, self.queued = False, None, 0
        try:
            self.session.finish("stopped")
        except Exception as exc:  # noqa: BLE001 - the store refused: the episode stays open
            self._changed()
            return Refused("error", str(exc))
        self._changed()
        return None

    def cancel(self) -> Optional[Refused]:
        """Drop the call under way (nothing is stored) and stop running."""
        if not self.thinking:
            return Refused("no_call", "No model call is under way")
        self._drop_call()
        self.running, self.queued = False, 0
        self._changed()
        return None

    def set_wait(self, wait: bool) -> None:
        """Propose-then-wait on or off (from the next call)."""
        self.wait = wait
        self._changed()

    def accept(self) -> Optional[Refused]:
        """The proposal waiting is executed as the model's action."""
        if refused := self._over() or self._no_proposal():
            return refused
        self._commit(self.proposal, None, "model")
        return None

    def edit(self, value: str, of: Optional[Proposal] = None) -> Optional[Refused]:
        """A person's edit of the proposal waiting (`of`: the proposal the person edited). Unchanged
        (as proposed, or as shown): the model's own action; else stored as a human edit."""
        from s3gym_tui.textgate import safe

        if refused := self._over() or self._no_proposal():
            return refused
        proposal = self.proposal
        if of is not None and of is not proposal:
            return Refused("stale", "That proposal is no longer waiting")
        value = value.strip()
        if not value:
            return Refused("empty", "Empty action: the proposal is still waiting")
        if value in (proposal.action, safe(proposal.action, one_line=True).strip()):
            self._commit(proposal, None, "model")
        else:
            self._commit(proposal, value, "human-edit")
        return None

    def veto(self) -> Optional[Refused]:
        """Discard the proposal waiting and stop running."""
        if refused := self._no_proposal():
            return refused
        self.proposal, self.running = None, False
        self._changed()
        return None

    def take_over(self) -> Optional[Refused]:
        """A person acts next: the call under way is dropped, the proposal discarded (a veto)."""
        if refused := self._over():
            return refused
        self._drop_call()
        self.running, self.proposal, self.queued = False, None, 0
        self._changed()
        return None

    def act(self, action: str) -> Optional[Refused]:
        """A person's own action (typed after taking over)."""
        if refused := self._over():
            return refused
        self._drop_call()
        self.proposal = None
        self._commit(None, action, "human")
        return None

    def check(self, action: str) -> tuple[bool, str]:
        """(valid, the game's feedback) for this action in the current state, without taking it."""
        from s3gym_tui.engine.play import preview_action

        result = preview_action(self.session.game, action)
        return result.valid, result.feedback

    def close(self) -> None:
        """Leaving: the call is dropped and an unfinished episode is stored as stopped."""
        self._drop_call()
        self.running, self.proposal, self.queued = False, None, 0
        if not self.session.done:
            try:
                self.session.finish("stopped")
            except Exception:  # noqa: BLE001 - the app may be closing its store
                pass

    # ----- calls and commits ----------------------------------------------------------------------
    def _no_proposal(self) -> Optional[Refused]:
        return Refused("no_proposal", "No proposal is waiting") if self.proposal is None else None

    def _start(self) -> None:
        from s3gym_tui.engine.call_progress import CallProgress

        self._calls += 1
        self.progress = CallProgress()
        self._call = self.launch(self._think(self._calls, self.wait))

    def _drop_call(self) -> None:
        if self._call is not None:
            self._calls += 1  # its result, if it still comes, is ignored
            call, self._call = self._call, None
            call.cancel()

    async def _think(self, number: int, wait: bool) -> None:
        """One model call; then the proposal waits (`wait`) or is executed."""
        from s3gym_tui.engine.llm import ModelUnavailable, one_line

        error = None
        try:
            await ensure_litellm()
            proposal = await self.session.propose(progress=self.progress)  # streamed where the provider can
        except ModelUnavailable as exc:
            error = str(exc)
        except Exception as exc:  # noqa: BLE001 - never let a model problem end the episode
            error = f"{type(exc).__name__}: {one_line(exc)}"
        if number != self._calls:  # dropped meanwhile (cancel, stop, take over)
            return
        self._call = None
        if error is not None:
            self.running, self.queued = False, 0
            self._emit(CallFailed(self.episode_id, error))
            self._changed()
        elif wait:
            self.proposal = proposal
            self._emit(ProposalMade(self.episode_id, proposal))
            self._changed()
        else:
            self._commit(proposal, None, "model")

    def _commit(self, proposal: Optional[Proposal], action: Optional[str], actor: str) -> None:
        """Execute and store one step (the session emits StepDone, and EpisodeDone at the end), then
        the next call of a run or of the queued step presses."""
        try:
            self.session.commit(proposal, action=action, actor=actor)
        except Exception as exc:  # noqa: BLE001 - not stored, so not taken
            self.running = False
            self._emit(StepRefused(self.episode_id, str(exc)))
            self._changed()
            return
        self.proposal = None
        if self.session.done:
            self.running, self.queued = False, 0
        elif self.running:
            self._start()
        elif self.queued and not self.wait:
            self.queued -= 1
            self._start()
        self._changed()
