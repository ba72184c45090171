"""Helpers for engine tests: run a protocol on a fresh store, and read it back."""

from __future__ import annotations

import asyncio
import statistics

import s3gym_games as games
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import Checkpoint, Episode, RunConfig, Step
from s3gym_tui.store import Store


def run_protocol(path, run_id=None, **config) -> tuple[Store, object]:
    store = Store(path)
    run = store.runs.create_run(RunConfig(**config), run_id=run_id)
    final = asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
    return store, final


def trajectory(store: Store, run_id: str) -> list[tuple]:
    """Everything about a run that must be reproducible, in a canonical order."""
    rows = []
    for episode in sorted(store.episodes.list(run_id), key=lambda e: e.id):
        rows.append((episode.id, episode.seed, episode.score, episode.n_steps, episode.history_episode_ids,
                     episode.history_cut))
        for step in store.episodes.steps(episode.id):
            rows.append((step.index, step.observation, store.prompts.step_prompt(episode.id, step.index), step.reply,
                         step.action, step.self_score, step.reward, step.feedback))
    return rows


def check_run_consistency(store: Store, run) -> None:
    """Audit clean; stored scores recomputed from actions; checkpoint means from their episodes."""
    from s3gym_tui.store import audit

    report = audit(store)
    assert report.ok, report.problems
    cfg = run.config
    episodes = store.episodes.list(run.id)
    assert sum(e.phase == "explore" for e in episodes) == cfg.explore_episodes
    assert sum(e.phase == "eval" for e in episodes) == len(cfg.checkpoints()) * cfg.eval_episodes
    for episode in episodes:
        steps = store.episodes.steps(episode.id)
        assert episode.status == "finished" and episode.n_steps == len(steps)
        assert [s.index for s in steps] == list(range(len(steps)))
        assert games.verify_trajectory(episode.game, episode.mode, episode.seed, [s.action for s in steps]) \
            == episode.score
        assert sum(s.reward for s in steps) == sum(s.reward for s in steps)  # rewards are numbers
    checkpoints = store.checkpoints.list(run.id)
    assert [c.x for c in checkpoints] == cfg.checkpoints()
    by_id = {e.id: e for e in episodes}
    for c in checkpoints:
        eps = [by_id[i] for i in c.episode_ids]
        assert all(e.phase == "eval" and e.checkpoint == c.x for e in eps)
        assert [e.seed for e in eps] == [cfg.eval_seed(j) for j in range(cfg.eval_episodes)]
        assert c.mean == statistics.mean(e.score for e in eps)


def _step(episode_id: str, index: int, s, r) -> Step:
    return Step(episode_id=episode_id, index=index, observation="o", prompt="[]", reply="r", action="a",
                self_score=s, reward=r, feedback="", valid=True, terminated=False, truncated=False)


def _episode(run, phase: str, index: int, checkpoint=None, score=0.0) -> Episode:
    seed = (1_000_000 + index) if phase == "eval" else index
    suffix = f"c{checkpoint:03d}-e{index}" if phase == "eval" else f"x{index:03d}"
    return Episode(id=f"{run.id}-{suffix}", run_id=run.id, game=run.config.game, mode=phase, phase=phase,
                   seed=seed, index=index, checkpoint=checkpoint, model=run.config.model,
                   pathway=run.config.pathway, status="finished", score=score)


def hand_run(store: Store, run_id: str, explore: list[list[tuple]], evals: dict[int, list[list[tuple]]],
             means: dict[int, list[float]], game="trust", pathway="none", model="m/x", status="finished",
             explore_episodes=None, sweep_id=None):
    """A run written step by step: exploration episodes of (s, r) steps, evaluation episodes per
    checkpoint x with their scores; checkpoints not in `evals` are left unscored."""
    cfg = RunConfig(model=model, game=game, pathway=pathway,
                    explore_episodes=len(explore) if explore_episodes is None else explore_episodes,
                    eval_every=3, eval_episodes=max((len(v) for v in evals.values()), default=1))
    run = store.runs.create_run(cfg, run_id=run_id, sweep_id=sweep_id)
    for i, pairs in enumerate(explore):
        ep = store.episodes.add_episode(_episode(run, "explore", i))
        store.episodes.add_steps([_step(ep.id, k, s, r) for k, (s, r) in enumerate(pairs)])
    for x, episodes in evals.items():
        ids = []
        for j, pairs in enumerate(episodes):
            ep = store.episodes.add_episode(_episode(run, "eval", j, x, means[x][j]))
            store.episodes.add_steps([_step(ep.id, k, s, r) for k, (s, r) in enumerate(pairs)])
            ids.append(ep.id)
        store.checkpoints.add_checkpoint(Checkpoint(run_id=run.id, x=x, episode_ids=tuple(ids), scores=tuple(means[x])))
    store.runs.set_run_status(run.id, status)
    return store.runs.get_run(run.id)
