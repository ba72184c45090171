"""Compute and store one episode's credit per action (TASPO): its sibling group and outcome advantage,
PI from the successful siblings (the analyzer asked once per group and setting, its prompt and raw reply
stored), alignment with the target's pre-action history, shifts from a scorer, weights.

Used by `s3gym credit` and the credit view (purpose `view`) and by `s3gym train --method taspo`
(purpose `training`: exploration episodes only, the store refuses anything else)."""

from __future__ import annotations

import asyncio
import json
import sys
from dataclasses import dataclass
from typing import TYPE_CHECKING, Callable, Optional, Sequence

from s3gym_tui.engine import credit_pi as pi
from s3gym_tui.engine.credit_math import (CREDIT_MODES, DEFAULT_EPS_W, DEFAULT_KAPPA, DEFAULT_TAU, action_shifts,
                                          group_advantages, taspo_weights, token_weights)
from s3gym_tui.engine.credit_types import EpisodeCredit, PiItem, episode_credit
from s3gym_tui.engine.credit_score import (DEFAULT_OPEN_SCORER, CannotScore, Scorer, can_score,
                                           cannot_score_message, scorer_for, shifts)

if TYPE_CHECKING:  # pragma: no cover
    from s3gym_tui.models import Episode, Step
    from s3gym_tui.store.store import Store

Analyze = Callable[[str, list, dict], str]  # (model, messages, s3gym context) -> reply text


@dataclass(frozen=True)
class CreditSettings:
    analyzer: Optional[str] = None  # default: the episode's model when it can be asked (default_analyzer)
    scorer: Optional[str] = None  # default: the episode's model when it can score, else DEFAULT_OPEN_SCORER
    kappa: float = DEFAULT_KAPPA
    tau: float = DEFAULT_TAU
    eps_w: float = DEFAULT_EPS_W
    credit: str = "action"  # action | token | uniform
    success_rule: str = "self"  # self | verifier (the oracle ablation)
    purpose: str = "view"  # view | training
    source: str = "siblings"  # siblings | off-trajectory (the ablation: PI from other seeds)
    training_id: Optional[str] = None

    def check(self) -> None:
        if self.credit not in CREDIT_MODES:
            raise ValueError(f"unknown credit {self.credit!r}: one of {', '.join(CREDIT_MODES)}")
        if self.success_rule not in pi.SUCCESS_RULES:
            raise ValueError(f"unknown success rule {self.success_rule!r}: one of {', '.join(pi.SUCCESS_RULES)}")
        taspo_weights(1.0, [], self.kappa, self.tau, self.eps_w)  # the parameters' own checks


def default_analyzer(store: "Store", ep: "Episode") -> tuple[str, Optional[str]]:
    """(analyzer, the line that says why) for an episode given no --analyzer: its own model, unless one of our
    providers refuses that name (a GRPO rollout's `trained/<training>/policy`: the policy while it learned,
    which nothing serves). Then the model of the run its training learned from (what TASPO training asks),
    else the embedded model."""
    from s3gym_tui.providers import PROVIDERS, is_builtin, split_model

    def askable(model: str) -> bool:
        return split_model(model)[0] not in PROVIDERS or is_builtin(model)

    if askable(ep.model):
        return ep.model, None
    provider, name = split_model(ep.model)
    training = store.trainings.find_training(name.partition("/")[0]) if provider == "trained" else None
    source = None
    if training is not None and training.source_run:
        try:
            source = store.runs.get_run(training.source_run).config.model
        except Exception:  # noqa: BLE001 - a removed source run: the embedded model
            source = None
    if source and askable(source):
        chosen, whose = source, f"the model of {training.source_run}, the run its training learned from"
    else:
        chosen, whose = DEFAULT_OPEN_SCORER, "the embedded model"
    return chosen, (f"{ep.model} cannot be asked (a training's policy while it learned: no model serves it); "
                    f"the analyzer is {chosen}, {whose} (choose another with --analyzer)")


def call_model(model: str, messages: list, ctx: dict) -> str:
    """The analyzer's reply through litellm (engine.llm: retries, secrets redacted), synchronously."""
    from s3gym_tui.engine.llm import CallSettings, complete

    settings = CallSettings(model=model, temperature=0.0, max_tokens=1200, seed=0)
    try:
        asyncio.get_running_loop()
    except RuntimeError:  # the usual case: no loop in this thread
        return asyncio.run(complete(settings, messages, ctx)).reply
    # called from inside a running loop (a training driven by an async pipeline): a thread of its own
    import concurrent.futures

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        return pool.submit(lambda: asyncio.run(complete(settings, messages, ctx))).result().reply


def _rules(game: str, mode: str, seed: int) -> str:
    import s3gym_games as games

    try:
        return games.game_class(game).replay(mode, seed, []).rules()
    except Exception:  # noqa: BLE001 - the rules are context, not a requirement
        return f"(the rules of {game})"


def _messages(store: "Store", step: "Step") -> list[dict]:
    try:
        messages = json.loads(store.prompts.prompt_of(step))
        if isinstance(messages, list) and all(isinstance(m, dict) for m in messages):
            return messages
    except Exception:  # noqa: BLE001 - a damaged prompt falls back to what the agent saw
        pass
    return [{"role": "user", "content": step.observation}]


def _pool(store: "Store", ep: "Episode", settings: CreditSettings) -> list["Episode"]:
    if settings.source == "off-trajectory":
        pool = [ep, *store.credit.task_episodes(ep.game, ep.mode, ep.seed, exclude_seed=True)]
    else:
        pool = pi.sibling_group(store, ep)
    if settings.purpose == "training":  # the held-out line: exploration episodes only
        pool = [e for e in pool if e.id == ep.id or (e.phase == "explore" and e.mode == "explore")]
    return pool


def compute_credit(store: "Store", episode_id: str, settings: CreditSettings = CreditSettings(), *,
                   analyze: Analyze = call_model, scorer: Optional[Scorer] = None,
                   say: Callable[[str], None] = lambda line: print(line, file=sys.stderr),
                   progress: Callable[[Optional[int], Optional[int], str], None] = lambda done, total, what: None,
                   ) -> EpisodeCredit:
    """Compute, store and return the episode's credit (see the module docstring). `say` gets one-line
    notices (a model that cannot score); `progress(done, total, what)` hears each stage and may raise to
    cancel (the credit is stored only at the end, in one write). Raises ValueError / CannotScore /
    StoreError with one line."""
    settings.check()
    progress(None, None, "finding the siblings")
    ep = store.episodes.get_episode(episode_id)
    if settings.purpose == "training" and (ep.phase != "explore" or ep.mode != "explore"):
        from s3gym_tui.store.errors import LeakageError

        raise LeakageError(f"episode {episode_id!r} is an evaluation episode: it never trains")
    analyzer, why = (settings.analyzer, None) if settings.analyzer else default_analyzer(store, ep)
    pool = _pool(store, ep, settings)
    steps_of = {e.id: store.episodes.steps(e.id, include_prompt=False) for e in pool}
    if settings.source == "off-trajectory":  # each source judged within its own task's group
        outcomes = [pi.outcome(store, e, settings.success_rule, steps_of[e.id]) for e in pool]
        by_seed: dict[int, list[int]] = {}
        for n, e in enumerate(pool[1:], 1):
            by_seed.setdefault(e.seed, []).append(n)
        adv: list[Optional[float]] = [None] * len(pool)
        for members in by_seed.values():
            for n, a in zip(members, group_advantages([outcomes[n] for n in members])):
                adv[n] = a
        own = pi.sibling_group(store, ep)
        own_out = [pi.outcome(store, e, settings.success_rule) for e in own]
        adv[0] = group_advantages(own_out)[[e.id for e in own].index(ep.id)]
        group_ids = [e.id for e in own]
    else:
        outcomes = [pi.outcome(store, e, settings.success_rule, steps_of[e.id]) for e in pool]
        adv = group_advantages(outcomes)
        group_ids = [e.id for e in pool]
    target_n = [e.id for e in pool].index(ep.id)
    reward = outcomes[target_n]
    advantage = adv[target_n]
    successful = [e for n, (e, a) in enumerate(zip(pool, adv)) if a is not None and a > 0
                  and (settings.source == "siblings" or n != target_n)]
    others = [e for e in successful if e.id != ep.id]
    notes: list[str] = []
    items: list[PiItem] = []
    if why:
        say(why)
        notes.append(why)
    extraction_id: Optional[str] = None
    if advantage is None:
        notes.append(f"the outcome is undefined ({'no self-score stated' if settings.success_rule == 'self' else 'no score'})")
    if not others:
        notes.append("no successful sibling other than this episode: uniform credit (plain GRPO)")
    elif settings.credit != "uniform":
        read_ids = [e.id for e in pool]
        extraction_id = store.credit.pi_extractions_for(read_ids, analyzer, settings.success_rule, settings.purpose,
                                                        settings.source)
        if extraction_id is None:
            progress(None, None, f"asking the analyzer {analyzer} for PI from {len(successful)} successful sibling(s)")
            sources = [(e.id, steps_of[e.id]) for e in successful]
            messages = pi.analyzer_messages(_rules(ep.game, ep.mode, ep.seed), sources)
            ctx = {"task": "pi", "game": ep.game, "mode": ep.mode, "seed": ep.seed,
                   "trajectories": [[[s.index, s.action] for s in steps] for _, steps in sources]}
            reply = analyze(analyzer, messages, ctx)
            parsed = pi.parse_items(reply, sources)
            extraction_id = store.credit.add_pi_extraction(
                game=ep.game, mode=ep.mode, seed=ep.seed, episode_ids=read_ids,
                successful_ids=[e.id for e in successful], success_rule=settings.success_rule, analyzer=analyzer,
                prompt=json.dumps(messages), reply=reply, purpose=settings.purpose, source=settings.source,
                items=[{"requirement": i.requirement, "condition": i.condition, "cues": i.cues,
                        "evidence": i.evidence} for i in parsed])
        items = [PiItem(id=r["id"], requirement=r["requirement"], condition=r["condition"],
                        evidence=tuple(r["evidence"]), cues=tuple(r["cues"]))
                 for r in store.credit.pi_items_of(extraction_id)]
        if not items:
            notes.append(f"the analyzer {analyzer} wrote no usable PI item: uniform credit")
    target_steps = steps_of[ep.id]
    aligned = pi.aligned_items(items, target_steps, ep.id, [e.id for e in successful])
    scorer_name: Optional[str] = None
    per_action: list[Optional[list[float]]] = [None] * len(target_steps)
    if any(aligned) and advantage is not None and settings.credit != "uniform":
        if scorer is None:
            scorer_name = settings.scorer or (ep.model if can_score(ep.model) else DEFAULT_OPEN_SCORER)
            if settings.scorer is None and scorer_name != ep.model:
                line = f"{cannot_score_message(ep.model)}; scored with {scorer_name} (choose another with --scorer)"
                say(line)
                notes.append(line)
            progress(None, None, f"loading the scorer {scorer_name}")
            scorer = scorer_for(scorer_name)
        scorer_name = scorer_name or scorer.name
        total = sum(1 for its in aligned if its)
        done = 0
        for t, (step, its) in enumerate(zip(target_steps, aligned)):
            if its:
                progress(done, total, f"scoring step {step.index} with and without PI ({scorer_name})")
                done += 1
                messages = _messages(store, step)
                per_action[t] = shifts(scorer, messages, pi.with_pi(messages, pi.pi_text(its)), step.reply)
    d = action_shifts(per_action, settings.kappa)
    if advantage is None:
        weights: list[Optional[float]] = [None] * len(target_steps)
    elif settings.credit == "token":
        tw = token_weights(advantage, per_action, settings.kappa, settings.tau, settings.eps_w)
        weights = [1.0 if w is None else (sum(w) / len(w) if w else 1.0) for w in tw]
    elif settings.credit == "uniform":
        weights = [1.0] * len(target_steps)
    else:
        weights = list(taspo_weights(advantage, per_action, settings.kappa, settings.tau, settings.eps_w))
    store.credit.add_episode_credit(
        ep.id, extraction_id=extraction_id, advantage=advantage, reward=reward, group_ids=group_ids,
        analyzer=analyzer, scorer=scorer_name, credit=settings.credit, kappa=settings.kappa, tau=settings.tau,
        eps_w=settings.eps_w, note="; ".join(notes), training_id=settings.training_id,
        actions=[(s.index, w, dt, [i.id for i in its]) for s, w, dt, its in zip(target_steps, weights, d, aligned)])
    credit = episode_credit(store, ep.id)
    assert credit is not None
    return credit


__all__ = ["CreditSettings", "compute_credit", "call_model", "CannotScore"]
