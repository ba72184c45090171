"""The protocol runner: exploration episodes, frozen experience states, concurrent checkpoint evals."""

from __future__ import annotations

import asyncio
from typing import Optional

import s3gym_games as games
from s3gym_tui.engine.events import (CheckpointScored, EpisodeStarted, EventSink, RunFinished, SummaryWritten,
                                     ignore)
from s3gym_tui.engine.experience import ExperienceState, HeldOutViolation
from s3gym_tui.engine.lease import LeaseKeeper
from s3gym_tui.engine.pathways import HISTORY, pathway
from s3gym_tui.engine.limits import BudgetSpent
from s3gym_tui.engine.llm import CallSettings, ModelUnavailable, complete
from s3gym_games.prompt import build_summary_messages, parse_summary
from s3gym_tui.engine.session import EpisodeSession
from s3gym_tui.engine.visibility import STATE, Vantage, context_fields, visible_history
from s3gym_tui.models import (Checkpoint, Episode, Run, RunConfig, Summary, eval_episode_id,
                              explore_episode_id, summary_in_use)
from s3gym_tui.store.errors import StoreError


def call_settings(config: RunConfig, backoff_base_s: float = 0.5) -> CallSettings:
    return CallSettings(model=config.model, api_base=config.api_base, api_bases=config.api_bases,
                        temperature=config.temperature,
                        max_tokens=config.max_tokens, seed=config.decoding_seed, timeout_s=config.timeout_s,
                        max_retries=config.max_retries, backoff_base_s=backoff_base_s,
                        decoding=config.decoding, model_args=tuple(config.model_args.items()),
                        context_tokens=config.context_tokens, server_kind=config.server_kind)


def _bounded(section: str) -> str:
    """A model-written summary section within the store's per-section limit (it goes into every
    later prompt), with a visible mark where it was cut."""
    from s3gym_tui.store.summaries import MAX_EDIT_SECTION_CHARS

    if len(section) <= MAX_EDIT_SECTION_CHARS:
        return section
    mark = f"\n[cut: {len(section) - MAX_EDIT_SECTION_CHARS + 40:,} more characters]"
    return section[:MAX_EDIT_SECTION_CHARS - 40] + mark


def _current_as_of(versions: list[Summary], version: int) -> Optional[Summary]:
    """The version the agent used when `version` was the newest (models.summary_in_use)."""
    return summary_in_use(versions, upto=version)


class ProtocolRunner:
    """Runs (or resumes) one run: explore in order, evaluate each checkpoint concurrently."""

    def __init__(self, store, run: Run, on_event: EventSink = ignore, backoff_base_s: float = 0.5) -> None:
        self.store = store
        self.run = run
        self.config = run.config
        self.on_event = on_event
        self.settings = call_settings(self.config, backoff_base_s)
        self.summary_author = f"model:{self.config.model}"
        self.stop_reason: Optional[str] = None  # set by stop(): a requested stop, not an error
        self._task: Optional[asyncio.Task] = None
        self._lease_lost = False

    # ----- experience -----------------------------------------------------------------
    def _finished_explore(self, x: int) -> list[tuple[Episode, list]]:
        """What state x may see (engine.visibility): exploration episodes 0..x-1 of this run, finished
        ones, with their steps."""
        return visible_history(self.store, Vantage.state(self.run.id, x))

    async def experience_state(self, x: int) -> ExperienceState:
        """The agent's experience after x exploration episodes (what eval at x and episode x see)."""
        return await pathway(self.config.pathway).experience(self, x)

    async def summary_for(self, x: int) -> Optional[Summary]:
        """The summary state x uses: the pinned version as is, else the one the model writes for x
        from the version current when x began (written once; read back on resume).

        State x begins in one store transaction (Summaries.begin_state): a person's edit, veto or pin
        committed before it is seen by x, one committed after it first by x + 1."""
        base, used = self.store.summaries.begin_state(self.run.id, x)
        if used is not None or x == 0 or (base is not None and base.pinned):
            return used if used is not None else base
        state_key = explore_episode_id(self.run.id, x)
        versions = self.store.summaries.list(self.run.id)
        keyed = [s for s in versions if s.for_episode_id == state_key and s.author.startswith("model")]
        if keyed:  # written by a run from before states were recorded
            return _current_as_of(versions, keyed[-1].version)
        # the summariser reads the exploration as the history pathway would show it at x
        window = HISTORY.seen(x, self.config.model, self.config, lambda: self._finished_explore(x),
                              lambda: None).history
        game = games.make(self.config.game, "explore")
        messages = build_summary_messages(game, base.as_tips() if base else None, window.text)
        context = {"task": "summary", "game": self.config.game, "mode": "explore", "seed": -1, "actions": []}
        result = await complete(self.settings, messages, context)
        retain, avoid, nxt = (_bounded(part) for part in parse_summary(result.reply))
        fields = dict(source_episode_ids=window.episode_ids, author=self.summary_author,
                      parent_version=base.version if base else None, for_state_x=x,
                      tokens_in=result.tokens_in, tokens_out=result.tokens_out, cost=result.cost)
        if x < self.config.explore_episodes and self.store.episodes.find_episode(state_key) is None:
            # written at step 0 of exploration episode x: the episode is stored with it (one
            # transaction; summaries.for_episode_id is a foreign key to it)
            episode = self._episode("explore", x, self.config.explore_seed(x), None,
                                    ExperienceState(x, "summary"), state_key)
            started, summary = self.store.episodes.add_episode_with_summary(episode, retain, avoid, nxt, **fields)
            self.on_event(EpisodeStarted(started))
        else:  # the last checkpoint's state (no exploration episode follows), or x already started
            producer = state_key if x < self.config.explore_episodes else None
            summary = self.store.summaries.add_summary(self.run.id, retain, avoid, nxt, game=self.config.game,
                                                       for_episode_id=producer, **fields)
        self.on_event(SummaryWritten(summary))
        return summary

    # ----- episodes ---------------------------------------------------------------------
    def _episode(self, phase: str, index: int, seed: int, checkpoint: Optional[int],
                 state: ExperienceState, episode_id: str) -> Episode:
        vantage = Vantage.state(self.run.id, state.x, episode_id)  # checked: it sees nothing else
        return Episode(
            id=episode_id, run_id=self.run.id, game=self.config.game, mode=phase, phase=phase, seed=seed,
            index=index, checkpoint=checkpoint, model=self.config.model, pathway=self.config.pathway,
            **context_fields(self.store, vantage, state, STATE))

    async def play(self, episode: Episode, state: ExperienceState) -> Episode:
        existing = self.store.episodes.find_episode(episode.id)
        if existing is not None and existing.status == "finished":
            return existing
        if existing is not None:  # resume with the experience recorded when it started
            state = await self._recorded_state(existing, state)
        session = EpisodeSession(self.store, existing or episode, self.settings, state, self.on_event,
                                 self.config.oracle_feedback, self.config.step_cap)
        if session.done and session.episode.status == "running":
            return session.finish("finished")
        return await session.play()

    async def _recorded_state(self, episode: Episode, fallback: ExperienceState) -> ExperienceState:
        if episode.summary_id:
            for summary in self.store.summaries.list(self.run.id):
                if summary.id == episode.summary_id:
                    return ExperienceState(fallback.x, fallback.pathway, fallback.history, summary)
        return fallback

    async def evaluate(self, x: int, state: ExperienceState) -> Checkpoint:
        tasks = []
        for j in range(self.config.eval_episodes):
            episode = self._episode("eval", j, self.config.eval_seed(j), x, state,
                                    eval_episode_id(self.run.id, x, j))
            tasks.append(self.play(episode, state))
        finished = await asyncio.gather(*tasks)
        checkpoint = Checkpoint(run_id=self.run.id, x=x, episode_ids=tuple(e.id for e in finished),
                                scores=tuple(float(e.score or 0.0) for e in finished))
        self.store.checkpoints.add_checkpoint(checkpoint)
        self.on_event(CheckpointScored(checkpoint))
        return checkpoint

    def stop(self, reason: str = "stopped") -> None:
        """Ask the run to stop now (from the event loop's thread): the model call in flight is
        cancelled, nothing half-done is stored, the run is left 'stopped' with `reason` and
        stays resumable. run_protocol then returns normally. The first reason given is kept."""
        if self.stop_reason is None:
            self.stop_reason = reason
        if self._task is not None and not self._task.done():
            self._task.cancel()

    async def run_protocol(self, command: str = "") -> Run:
        """Run or resume the whole protocol as the run's one driver. Returns the run with its final
        status. Raises RunBusy (before anything changes) if another live process drives it."""
        lease = self.store.leases.acquire_lease(self.run.id, command or "s3gym")
        loop = asyncio.get_running_loop()
        self._task = asyncio.current_task()
        self._lease_lost = False

        def lost() -> None:  # from the keeper's thread
            self._lease_lost = True
            loop.call_soon_threadsafe(self.stop, "another process took over the run")

        keeper = LeaseKeeper(self.store, lease, lost).start()
        try:
            return await self._drive()
        finally:
            keeper.stop()
            self._task = None
            if not self._lease_lost:
                try:
                    self.store.leases.release_lease(lease)
                except StoreError:
                    pass  # the lease lapses by itself (its process is gone soon)

    def _set_status(self, status: str, reason: str = "") -> None:
        if self._lease_lost:
            return  # the run has a new driver: its status is not ours to write
        self.store.runs.set_run_status(self.run.id, status, reason)

    async def _drive(self) -> Run:
        self._set_status("running")
        done_checkpoints = {c.x for c in self.store.checkpoints.list(self.run.id)}
        evals: list[asyncio.Task] = []
        error: Optional[str] = None
        reason = ""
        try:
            xs = set(self.config.checkpoints())
            for i in range(self.config.explore_episodes + 1):
                state: Optional[ExperienceState] = None
                if i in xs and i not in done_checkpoints:
                    state = await self.experience_state(i)
                    evals.append(asyncio.create_task(self.evaluate(i, state)))
                if i == self.config.explore_episodes:
                    break
                if state is None:
                    state = await self.experience_state(i)
                episode = self._episode("explore", i, self.config.explore_seed(i), None, state,
                                        explore_episode_id(self.run.id, i))
                await self.play(episode, state)
            await asyncio.gather(*evals)
            status = "finished"
        except (ModelUnavailable, HeldOutViolation) as exc:
            error, status, reason = str(exc), "stopped", str(exc)
            if isinstance(exc, BudgetSpent):  # the calls in flight are paid for: let them finish and
                await asyncio.gather(*evals, return_exceptions=True)  # be stored (none starts after)
        except asyncio.CancelledError:
            for task in evals:
                task.cancel()
            await asyncio.gather(*evals, return_exceptions=True)
            requested = self.stop_reason is not None
            self._set_status("stopped", self.stop_reason or "cancelled")
            if not requested:
                raise
            self.run = self.store.runs.get_run(self.run.id)
            self.on_event(RunFinished(self.run, None))
            return self.run
        except StoreError as exc:  # disk full, a lock held too long: what was stored is whole (each
            self._record_failure(evals, f"store: {exc}", "stopped")  # step commits alone), so the run
            raise  # stops resumable, with the reason; the caller says how to continue
        except Exception as exc:
            self._record_failure(evals, f"{type(exc).__name__}: {exc}")
            raise
        finally:
            for task in evals:
                if not task.done():
                    task.cancel()
        if error is not None:
            await asyncio.gather(*evals, return_exceptions=True)
        self._set_status(status, reason)
        self.run = self.store.runs.get_run(self.run.id)
        self.on_event(RunFinished(self.run, error))
        return self.run

    def _record_failure(self, evals: list[asyncio.Task], reason: str, status: str = "failed") -> None:
        for task in evals:
            task.cancel()
        try:
            self._set_status(status, reason)
        except StoreError:
            pass  # e.g. the disk is still full: the lapsed lease shows the run as interrupted
