"""One episode driven step by step: propose (model call), then commit (game step + stored step)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Optional

import s3gym_games as games
from s3gym_games import Game
from s3gym_tui.engine.events import EpisodeDone, EpisodeStarted, EventSink, StepDone, StepStarted, ignore
from s3gym_tui.engine.experience import ExperienceState, turns_from_steps
from s3gym_tui.engine.llm import CallResult, CallSettings, complete
from s3gym_games.reply import MAX_ACTION_CHARS, NO_ANSWER, ParsedReply, parse_reply
from s3gym_tui.engine.prompt_cache import needs_marker
from s3gym_games.prompt import build_messages, messages_json
from s3gym_tui.secrets import redact_values
from s3gym_tui.models import Actor, Episode, Step, utcnow

# What is stored and sent back to the model is bounded: a 1 MB action would be repeated in every
# later prompt of the episode, a 20 MB reply stored verbatim. A cut is recorded as a fault; the
# game sees exactly the (cut) action that is stored, so the verifier's replay stays exact
# (MAX_ACTION_CHARS, s3gym_games.reply).
MAX_REPLY_CHARS = 100_000


def cut_text(text: str, limit: int, what: str) -> tuple[str, str | None]:
    """`text` kept to `limit` characters (its start and its end, the middle marked as cut), and the
    fault that says so (None when it fits)."""
    if len(text) <= limit:
        return text, None
    half = limit // 2
    cut = len(text) - 2 * half
    return (text[:half] + f"\n[... {cut:,} characters cut ...]\n" + text[-half:],
            f"{what} cut to {limit:,} characters (was {len(text):,})")


def _cut_reply(reply: str) -> tuple[str, str | None]:
    return cut_text(reply, MAX_REPLY_CHARS, "reply")


@dataclass(frozen=True)
class Proposal:
    """The model's proposed next action, before it is executed."""

    messages: list
    call: CallResult
    parsed: ParsedReply

    @property
    def action(self) -> str:
        return self.parsed.action if self.parsed.action is not None else NO_ANSWER


def _storable(text: str) -> str:
    """The text with anything UTF-8 cannot encode (lone surrogates) replaced by '?'."""
    return str(text).encode("utf-8", errors="replace").decode("utf-8")


class EpisodeSession:
    """Owns the game of one episode and its stored record. Restartable from the store."""

    def __init__(self, store, episode: Episode, settings: CallSettings, experience: ExperienceState,
                 on_event: EventSink = ignore, oracle: bool = False, step_cap: int = 64) -> None:
        self.store = store
        self.settings = settings
        self.experience = experience
        self._hint_json: Optional[tuple[str, str]] = None  # (hint, as it appears in the prompt's JSON)
        self.on_event = on_event
        self.oracle = oracle
        self.step_cap = step_cap  # the run's cap; the game's own (smaller) cap applies too
        self.game: Game = games.make(episode.game, episode.mode)
        self.game.reset(episode.seed)
        existing = store.episodes.find_episode(episode.id)
        if existing is None:
            store.episodes.add_episode(episode)
            existing = episode
            on_event(EpisodeStarted(existing))
        self.episode = existing
        self.steps: list[Step] = list(store.episodes.steps(existing.id))
        self._replay(reset=False)

    def _replay(self, reset: bool = True) -> None:
        """Rebuild the exact game state after the stored steps."""
        if reset:
            self.game.reset(self.episode.seed)
        self.feedback = ""
        for step in self.steps:
            result = self.game.step(step.action)
            self.feedback = result.feedback

    # ----- state ------------------------------------------------------------------------
    @property
    def done(self) -> bool:
        return self.game.done or self.episode.status != "running" or len(self.steps) >= self.step_cap

    def messages(self, split: bool = False) -> list[dict]:
        """The prompt of the next step (`split`: in cacheable pieces, see prompts.user_parts)."""
        return build_messages(self.game, self.experience.hint_text(),
                              turns_from_steps(self.steps, self.oracle), self.feedback, split=split)

    def context(self) -> dict:
        return {"task": "act", "game": self.episode.game, "mode": self.episode.mode,
                "seed": self.episode.seed, "actions": [s.action for s in self.steps],
                "grammar": self.game.action_grammar()}

    # ----- acting -----------------------------------------------------------------------
    async def propose(self, on_tokens=None, progress=None) -> Proposal:
        """Ask the model for its next action (may raise ModelUnavailable). `on_tokens(n)`: the tokens
        of the reply so far, where the provider streams; `progress`: an engine.call_progress.CallProgress
        told what the call does and its retries (engine.llm.complete)."""
        self.on_event(StepStarted(self.episode.id, len(self.steps)))
        messages = self.messages()
        extra = {k: v for k, v in (("on_tokens", on_tokens), ("progress", progress)) if v is not None}
        # a provider that caches only marked prefixes gets the same text in pieces it can mark
        sent = self.messages(split=True) if needs_marker(self.settings.model) else messages
        call = await complete(self.settings, sent, self.context(), **extra)
        return Proposal(messages, call, parse_reply(call.reply))

    def commit(self, proposal: Optional[Proposal], action: Optional[str] = None, actor: Actor = "model",
               self_score: Optional[float] = None) -> Step:
        """Execute an action and store the step in one transaction.

        With a proposal and no action: the model's action. With an action: a human's (actor
        'human' when typed from scratch, 'human-edit' when it replaces a proposal)."""
        if self.done:
            raise RuntimeError("the episode is over")
        observation = self.game.observation()
        if action is None:
            if proposal is None:
                raise ValueError("commit needs a proposal or an action")
            action = proposal.action
            score = proposal.parsed.self_score
        else:
            score = self_score if self_score is not None else (proposal.parsed.self_score if proposal else None)
        action = _storable(action)  # the game sees exactly the action that is stored
        prompt, shared = self._prompt(proposal.messages) if proposal else ("", None)
        call = proposal.call if proposal else None
        faults = list(call.faults) if call else []
        if len(action) > MAX_ACTION_CHARS:
            faults.append(f"action cut to {MAX_ACTION_CHARS:,} characters (was {len(action):,})")
            action = action[:MAX_ACTION_CHARS]
        result = self.game.step(action)
        if proposal and proposal.parsed.problem:
            faults.append(proposal.parsed.problem)
        reply, reply_cut = _cut_reply(call.reply if call else "")
        if reply_cut:
            faults.append(reply_cut)
        step = Step(
            episode_id=self.episode.id, index=len(self.steps), observation=observation,
            prompt=prompt,
            reply=reply, action=action, self_score=score,
            reward=result.reward, feedback=result.feedback, valid=result.valid,
            terminated=result.terminated,
            truncated=result.truncated or (not result.terminated and len(self.steps) + 1 >= self.step_cap),
            actor=actor,
            proposed_action=(proposal.parsed.action[:MAX_ACTION_CHARS]
                             if proposal and actor != "model" and proposal.parsed.action else None),
            fault="; ".join(faults) or None,
            tokens_in=call.tokens_in if call else 0, tokens_out=call.tokens_out if call else 0,
            latency_ms=call.latency_ms if call else 0.0, cost=call.cost if call else None,
            tokens_cached=call.tokens_cached if call else None,
            tokens_cache_write=call.tokens_cache_write if call else None,
        )
        repair = None
        if call is not None and call.original_reply is not None and actor == "model":
            repair = (_cut_reply(call.original_reply)[0], reply)  # the model's own reply, and the repaired one
        try:
            step = self.store.episodes.add_step(step, repair=repair, shared=shared)
        except BaseException:
            self._replay()  # not stored, so not taken: the game returns to the stored state
            raise
        self.steps.append(step)
        self.feedback = result.feedback
        self.episode = self.episode.model_copy(update={"n_steps": len(self.steps)})
        self.on_event(StepDone(self.episode, step))
        if self.game.done or len(self.steps) >= self.step_cap:
            self.finish("finished")
        return step

    def _prompt(self, messages: list) -> tuple[str, Optional[str]]:
        """(the prompt as sent, its Hint Messages block as it appears in it): the store keeps the
        prompt as copies of an earlier one of this episode plus new text, the block once for every
        prompt that repeats it (store/stored_prompt.py). Secrets never land in the store."""
        return redact_values(messages_json(messages)), self._hint_as_sent(self.experience.hint_text())

    def _hint_as_sent(self, hint: Optional[str]) -> Optional[str]:
        """The Hint Messages block as it appears in the prompt's JSON (secrets redacted), encoded once
        per hint: it is the same at every step of the episode (a History window can be 400,000 chars)."""
        if not hint:
            return None
        cached = self._hint_json
        if cached is None or (cached[0] is not hint and cached[0] != hint):
            cached = self._hint_json = (hint, redact_values(json.dumps(hint, ensure_ascii=False)[1:-1]))
        return cached[1]

    def finish(self, status: str = "finished") -> Episode:
        score = self.game.score()
        self.store.episodes.finish_episode(self.episode.id, score, status)
        self.episode = self.episode.model_copy(update={"status": status, "score": score,
                                                       "finished_at": utcnow(),
                                                       "n_steps": len(self.steps)})
        self.on_event(EpisodeDone(self.episode))
        return self.episode

    async def play(self) -> Episode:
        """Run the model to the end of the episode."""
        while not self.done:
            self.commit(await self.propose())
        return self.episode
