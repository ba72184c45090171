"""`scripted/<game>`: the game's reference policy behind litellm, plus a deterministic three-part summary."""

from __future__ import annotations

import re
import threading
from collections import Counter, OrderedDict
from typing import Any

from litellm import CustomLLM
from litellm.types.utils import ModelResponse

import s3gym_games as games
from s3gym_tui.providers._common import (bad_request, build_response, estimate_tokens, prompt_text,
                                         require_context)

PROVIDER = "scripted"
# a history step as the engine serialises it: `LLM: Answer: <action>, Score: <self-score>`
_HISTORY_STEP = re.compile(r"^\s*LLM:\s*Answer:\s*(?P<action>.*?),\s*Score:\s*(?P<score>[-+]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][-+]?\d+)?)\s*$",
                           re.MULTILINE)


def resolve_game(model: str, ctx: dict, provider: str) -> str:
    """The canonical game of `<provider>/<game>`; the context's game, if given, must agree."""
    try:
        game = games.canonical(model)
    except games.GameError as exc:
        raise bad_request(str(exc), f"{provider}/{model}", provider) from None
    if ctx.get("game") and games.canonical(str(ctx["game"])) != game:
        raise bad_request(f"{provider}/{model} was called with the context of game {ctx['game']!r}",
                          f"{provider}/{model}", provider)
    return game


class _Chain:
    """One episode as the cache follows it: the policy that played it, the actions so far, the game
    stepped through them (not replayed from the seed at every request) and the move made there."""

    __slots__ = ("policy", "actions", "env", "move")

    def __init__(self, policy: Any, actions: tuple[str, ...], env: games.Game, move: games.Move) -> None:
        self.policy, self.actions, self.env, self.move = policy, actions, env, move


class _Seed:
    """The episodes of one (provider, game, mode, seed): the chains followed, and every move made."""

    __slots__ = ("chains", "moves")

    def __init__(self) -> None:
        self.chains: list[_Chain] = []
        self.moves: dict[tuple[str, ...], games.Move] = {}  # actions -> the move made after them


class _PolicyCache:
    """Reference policies may keep state between moves (nullify caches its plan), so a fresh policy per
    request could leave the trajectory `games.play` produces. One policy instance is kept per episode
    (provider, game, mode, seed), with the game in the state the request's actions led to, and reused
    while the requests walk forward through that episode (the game takes the new actions, not the
    whole episode again); a request that does not extend the last one (a fork, a new episode) gets a
    fresh policy and game.

    A policy that did not see every earlier state of the request (a fresh one after a restart or on
    a fork, or one that missed steps a human took) is first walked through the views it missed, so
    the move is a function of the request alone: a run killed and resumed mid-episode, in another
    process, continues exactly as it would have. So a request answered before (a retry, or another
    run of a sweep on the same seed catching up) gets the move made then, without a walk."""

    def __init__(self, size: int = 256, per_key: int = 16, moves_per_key: int = 1024) -> None:
        self.size = size
        self.per_key = per_key  # episodes on the same (game, mode, seed) played at once (a sweep's runs)
        self.moves_per_key = moves_per_key
        self.entries: "OrderedDict[tuple, _Seed]" = OrderedDict()
        self.lock = threading.Lock()

    def move(self, key: tuple, game: str, mode: str, seed: int, actions: tuple[str, ...]) -> games.Move:
        """The move after `actions` in the episode (game, mode, seed): END once the episode is over.
        Several episodes on one seed (the runs of a sweep, checkpoints evaluated at once) each keep
        their own policy: a request extends the longest one it continues."""
        with self.lock:
            known = self.entries.pop(key, None) or _Seed()
            self.entries[key] = known
            made = known.moves.get(actions)
            if made is not None:
                return made
            chains = known.chains
            prefixes = [c for c in chains if actions[: len(c.actions)] == c.actions]
            if prefixes:
                chain = max(prefixes, key=lambda c: len(c.actions))
                chains.remove(chain)  # its policy and game move on to this request
                policy, env, walked, seen = chain.policy, chain.env, len(chain.actions), len(chain.actions) + 1
            else:
                policy, env, walked, seen = games.reference_policy(game), games.make(game, mode), 0, 0
                env.reset(seed)
            for i in range(walked, len(actions)):
                if env.done:
                    break
                if i >= seen:  # a state this policy has not seen (a step it did not make)
                    policy.act(env.view())
                env.step(actions[i])
            if env.done:
                return games.Move("END", 0.0)
            move = policy.act(env.view())
            chains.append(_Chain(policy, actions, env, move))
            del chains[: max(0, len(chains) - self.per_key)]
            known.moves[actions] = move
            if len(known.moves) > self.moves_per_key:
                del known.moves[next(iter(known.moves))]  # the oldest
            while len(self.entries) > self.size:
                self.entries.popitem(last=False)
            return move


_POLICIES = _PolicyCache()


def reference_move(game: str, ctx: dict, provider: str = PROVIDER) -> games.Move:
    """The reference policy's move in the state reached from (game, mode, seed) by the actions."""
    try:
        return _POLICIES.move((provider, game, ctx["mode"], ctx["seed"]), game, ctx["mode"], ctx["seed"],
                              tuple(ctx["actions"]))
    except ImportError as exc:
        raise bad_request(f"game {game!r} is not available: {exc}", f"{provider}/{game}", provider) from None
    except games.GameError as exc:
        raise bad_request(str(exc), f"{provider}/{game}", provider) from None


def act_reply(move: games.Move) -> str:
    return f"Reference policy move.\nAnswer: {move.action}, Score: {move.expected_reward:g}"


def _times(k: int) -> str:
    return f"{k} time" if k == 1 else f"{k} times"


def _quote(actions: list[str]) -> str:
    return ", ".join(f"'{a}'" for a in actions)


def summary_reply(text: str, actions: list[str]) -> str:
    """A deterministic summary from the history in the prompt (self-scores only) and the last actions."""
    steps = [(m.group("action").strip(), float(m.group("score"))) for m in _HISTORY_STEP.finditer(text)]
    good = Counter(a for a, s in steps if s > 0)
    bad = Counter(a for a, s in steps if s <= 0)
    n = len(steps)
    if good:
        top, k = good.most_common(1)[0]
        retain = (f"{sum(good.values())} of {n} past steps earned a positive self-score; "
                  f"the most reliable action was '{top}' ({_times(k)}).")
    else:
        retain = f"None of the {n} past steps earned a positive self-score yet; keep to legal, simple moves."
    if bad:
        worst, k = bad.most_common(1)[0]
        avoid = (f"{sum(bad.values())} of {n} past steps scored zero or less; "
                 f"'{worst}' was the most frequent of them ({_times(k)}).")
    else:
        avoid = "No past step scored zero or less; do not change what works without a reason."
    last = actions[-3:] or [a for a, _ in steps[-3:]]
    start = f"open with '{good.most_common(1)[0][0]}'" if good else "try the most cautious legal action first"
    recent = f"the last actions were {_quote(last)}" if last else "no actions have been taken yet"
    directions = f"{start.capitalize()}; {recent}; state an honest expected reward with every move."
    return (f"Strategies to retain: {retain}\nMistakes to avoid: {avoid}\n"
            f"Directions for the next episode: {directions}")


def pi_reply(trajectories: list) -> str:
    """A deterministic PI analyzer (engine/credit_pi.py's line format) from the successful trajectories
    of the context (a list of [[step index, action], ...]): the opening move they share and the orders
    of moves they followed, most frequent first, each citing where it happened."""
    openings: "OrderedDict[str, list[str]]" = OrderedDict()
    pairs: "OrderedDict[tuple[str, str], list[str]]" = OrderedDict()
    for t, steps in enumerate(trajectories, 1):
        steps = [(int(i), str(a).strip()) for i, a in steps]
        if steps:
            openings.setdefault(steps[0][1], []).append(f"T{t}#{steps[0][0]}")
        for (_, prev), (i, cur) in zip(steps, steps[1:]):
            pairs.setdefault((prev, cur), []).append(f"T{t}#{i}")
    lines = [f"ITEM: open with '{a}' | WHEN: before the first move | CUES: start | EVIDENCE: {', '.join(ev[:3])}"
             for a, ev in sorted(openings.items(), key=lambda kv: -len(kv[1]))[:1]]
    for (prev, cur), ev in sorted(pairs.items(), key=lambda kv: -len(kv[1]))[:5]:
        lines.append(f"ITEM: after '{prev}', play '{cur}' | WHEN: the previous move was '{prev}' | "
                     f"CUES: last:{prev} | EVIDENCE: {', '.join(ev[:3])}")
    return "\n".join(lines)


def scripted_content(model: str, messages: list, ctx: dict, provider: str = PROVIDER) -> tuple[str, str]:
    """(reply text, game) for one scripted request."""
    game = resolve_game(model, ctx, provider)
    if ctx["task"] == "pi":
        return pi_reply(list(ctx.get("trajectories") or [])), game
    if ctx["task"] == "summary":
        return summary_reply(prompt_text(messages), ctx["actions"]), game
    return act_reply(reference_move(game, ctx, provider)), game


class ScriptedLLM(CustomLLM):
    """litellm custom provider `scripted`: model `scripted/<game>` plays the game's reference policy."""

    provider = PROVIDER

    def _respond(self, model: str, messages: list, model_response: ModelResponse | None,
                 optional_params: dict | None, kwargs: dict[str, Any]) -> ModelResponse:
        ctx = require_context(optional_params, kwargs, model, self.provider)
        content, game = scripted_content(model, messages, ctx, self.provider)
        return build_response(model_response, f"{self.provider}/{game}", content,
                              prompt_tokens=estimate_tokens(prompt_text(messages)),
                              completion_tokens=estimate_tokens(content),
                              extra={"task": ctx["task"]})

    def completion(self, model: str, messages: list, *args: Any, model_response: ModelResponse | None = None,
                   optional_params: dict | None = None, **kwargs: Any) -> ModelResponse:
        return self._respond(model, messages, model_response, optional_params, kwargs)

    async def acompletion(self, model: str, messages: list, *args: Any, model_response: ModelResponse | None = None,
                          optional_params: dict | None = None, **kwargs: Any) -> ModelResponse:
        return self._respond(model, messages, model_response, optional_params, kwargs)
