"""Helpers for engine tests: run a protocol on a fresh store, and read it back."""

from __future__ import annotations

import asyncio
import statistics

import games
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store


def run_protocol(path, run_id=None, **config) -> tuple[Store, object]:
    store = Store(path)
    run = store.create_run(RunConfig(**config), run_id=run_id)
    final = asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    return store, final


def trajectory(store: Store, run_id: str) -> list[tuple]:
    """Everything about a run that must be reproducible, in a canonical order."""
    rows = []
    for episode in sorted(store.episodes(run_id), key=lambda e: e.id):
        rows.append((episode.id, episode.seed, episode.score, episode.n_steps, episode.history_episode_ids,
                     episode.history_cut))
        for step in store.steps(episode.id):
            rows.append((step.index, step.observation, store.step_prompt(episode.id, step.index), step.reply,
                         step.action, step.self_score, step.reward, step.feedback))
    return rows


def check_run_consistency(store: Store, run) -> None:
    """Audit clean; stored scores recomputed from actions; checkpoint means from their episodes."""
    from s3gym_tui.store import audit

    report = audit(store)
    assert report.ok, report.problems
    cfg = run.config
    episodes = store.episodes(run.id)
    assert sum(e.phase == "explore" for e in episodes) == cfg.explore_episodes
    assert sum(e.phase == "eval" for e in episodes) == len(cfg.checkpoints()) * cfg.eval_episodes
    for episode in episodes:
        steps = store.steps(episode.id)
        assert episode.status == "finished" and episode.n_steps == len(steps)
        assert [s.index for s in steps] == list(range(len(steps)))
        assert games.verify_trajectory(episode.game, episode.mode, episode.seed, [s.action for s in steps]) \
            == episode.score
        assert sum(s.reward for s in steps) == sum(s.reward for s in steps)  # rewards are numbers
    checkpoints = store.checkpoints(run.id)
    assert [c.x for c in checkpoints] == cfg.checkpoints()
    by_id = {e.id: e for e in episodes}
    for c in checkpoints:
        eps = [by_id[i] for i in c.episode_ids]
        assert all(e.phase == "eval" and e.checkpoint == c.x for e in eps)
        assert [e.seed for e in eps] == [cfg.eval_seed(j) for j in range(cfg.eval_episodes)]
        assert c.mean == statistics.mean(e.score for e in eps)
