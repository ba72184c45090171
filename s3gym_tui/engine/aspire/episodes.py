"""Playing for ASPIRE: every episode is an ordinary s3gym run (stored, watchable, audited).

A candidate plays a game with its model (a `scripted` candidate plays `scripted/<game>`) and its
memory for that game (a pinned copy of the summary it carries). Practice and validation runs are
exploration only (explore mode, exploration seeds); the hidden evaluation's runs are evaluation only
(eval mode, the suite's held-out seeds) and are made by the controller alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from s3gym_tui.models import EVAL_SEED_BASE, RunConfig
from s3gym_tui.store.aspire import Candidate

MEMORY_AUTHOR = "model:aspire-agent"


def player_model(model: str, game: str) -> str:
    """The model a candidate plays `game` with: the `scripted` family plays the game's own policy."""
    if model == "scripted" or model.startswith("scripted/"):
        return f"scripted/{game}"
    return model


def memories(store, candidate: Candidate) -> dict[str, str]:
    """game -> summary id the candidate carries: its own memory over those of its ancestors."""
    chain: list[Candidate] = []
    current: Optional[Candidate] = candidate
    while current is not None:
        chain.append(current)
        current = store.aspire.get_aspire_candidate(current.parent_id) if current.parent_id else None
    found: dict[str, str] = {}
    for cand in reversed(chain):
        if cand.kind == "memory" and cand.game and cand.summary_id:
            found[cand.game] = cand.summary_id
    return found


def _find_run(store, run_id: str):
    from s3gym_tui.store.errors import StoreError

    try:
        return store.runs.get_run(run_id)
    except StoreError:
        return None


def run_usage(store, run_id: str) -> tuple[int, int, Optional[float]]:
    """(model calls, tokens, cost) of a run's steps and model-written summaries; cost None if any
    call was unpriced (unknown, not 0)."""
    calls = tokens = 0
    cost: Optional[float] = 0.0
    for episode in store.episodes.list(run_id):
        for step in store.episodes.steps(episode.id, include_prompt=False):
            if step.actor != "model":
                continue
            calls += 1
            tokens += step.tokens_in + step.tokens_out
            cost = None if cost is None or step.cost is None else cost + step.cost
    for summary in store.summaries.list(run_id):
        if summary.author.startswith("model:") and summary.author != MEMORY_AUTHOR:
            calls += 1
            tokens += summary.tokens_in + summary.tokens_out
            cost = None if cost is None or summary.cost is None else cost + summary.cost
    return calls, tokens, (cost if calls else 0.0)


@dataclass(frozen=True)
class Played:
    run_id: str
    episode_ids: tuple[str, ...]


async def play_run(store, *, aspire_id: str, role: str, candidate: Candidate, game: str, memory: str,
                   seed: int, episodes: int, step_cap: int, evaluation: bool = False,
                   run_id: Optional[str] = None) -> Played:
    """Create (or resume, same `run_id`) and drive one run; link it to the ASPIRE run with `role`.

    memory: 'none', 'history' (the run's own earlier episodes) or 'summary' (the candidate's summary
    for the game, pinned). evaluation=False: `episodes` exploration episodes from exploration seed
    `seed`; True: `episodes` evaluation episodes from held-out seed `seed` (controller only)."""
    from s3gym_tui.engine.runner import ProtocolRunner

    if evaluation != (seed >= EVAL_SEED_BASE):
        raise ValueError(f"seed {seed} is not an {'evaluation' if evaluation else 'exploration'} seed")
    summary_id = memories(store, candidate).get(game) if memory == "summary" else None
    pathway = {"none": "none", "history": "history", "summary": "summary" if summary_id else "none"}[memory]
    model = player_model(candidate.model, game)
    if evaluation:
        config = RunConfig(model=model, game=game, pathway=pathway, explore_episodes=0, eval_every=1,
                           eval_episodes=episodes, eval_seed_base=seed, step_cap=step_cap)
    else:
        config = RunConfig(model=model, game=game, pathway=pathway, explore_episodes=episodes,
                           eval_every=max(1, episodes), eval_episodes=0, explore_seed_base=seed,
                           step_cap=step_cap)
    run = _find_run(store, run_id) if run_id else None
    if run is None:
        run = store.runs.create_run(config, run_id=run_id, note=f"aspire {aspire_id} {role} {candidate.id}")
        store.aspire.link_aspire_run(aspire_id, run.id, role, candidate.id)
        if summary_id:
            memo = store.summaries.get_summary(summary_id)
            copy = store.summaries.add_summary(run.id, memo.retain, memo.avoid, memo.next, author=MEMORY_AUTHOR)
            store.summaries.set_pinned(copy.id, True, author=MEMORY_AUTHOR)
    if run.status != "finished":
        run = await ProtocolRunner(store, run).run_protocol("s3gym aspire")
    eps = [e for e in store.episodes.list(run.id) if (e.phase == "eval") == evaluation]
    return Played(run.id, tuple(e.id for e in eps))
