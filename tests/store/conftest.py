"""Fixtures for the store tests: a fresh store file, a run, and builders of episodes and steps."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from s3gym_tui.models import EVAL_SEED_BASE, Episode, Run, RunConfig, Step
from s3gym_tui.store import Store

_ids = itertools.count()


def make_episode(run: Run | None, *, phase: str = "explore", seed: int | None = None,
                 index: int = 0, checkpoint: int | None = None, **fields) -> Episode:
    """A valid episode of `run` (or run-less); eval episodes get an eval seed and checkpoint 0."""
    n = next(_ids)
    if seed is None:
        seed = (EVAL_SEED_BASE + index) if phase == "eval" else index
    if phase == "eval" and checkpoint is None and run is not None:
        checkpoint = 0
    data = dict(id=f"ep-{n}", run_id=run.id if run else None,
                game=run.config.game if run else "trust", mode=phase, phase=phase, seed=seed,
                index=index, checkpoint=checkpoint,
                model=run.config.model if run else "scripted/trust",
                pathway=run.config.pathway if run else "none")
    data.update(fields)
    return Episode(**data)


def make_step(episode_id: str, index: int, **fields) -> Step:
    data = dict(episode_id=episode_id, index=index, observation=f"board at step {index}",
                prompt='[{"role": "user", "content": "play"}]', reply=f"Answer: C, Score: {index}",
                action="C", self_score=float(index), reward=1.0, feedback="ok", valid=True,
                terminated=False, truncated=False)
    data.update(fields)
    return Step(**data)


@pytest.fixture
def db_path(tmp_path: Path) -> Path:
    return tmp_path / "nested" / "dir" / "s3gym.db"


@pytest.fixture
def store(db_path: Path):
    with Store(db_path) as opened:
        yield opened


@pytest.fixture
def run(store: Store) -> Run:
    return store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="summary"))


@pytest.fixture
def explored(store: Store, run: Run) -> list[Episode]:
    """Three finished exploration episodes with two steps each."""
    episodes = []
    for i in range(3):
        ep = store.episodes.add_episode(make_episode(run, index=i))
        store.episodes.add_steps([make_step(ep.id, 0), make_step(ep.id, 1, terminated=True)])
        episodes.append(store.episodes.finish_episode(ep.id, score=float(i)))
    return episodes


@pytest.fixture
def evaluated(store: Store, run: Run) -> list[Episode]:
    """Two finished evaluation episodes at checkpoint 0 with one step each."""
    episodes = []
    for i in range(2):
        ep = store.episodes.add_episode(make_episode(run, phase="eval", index=i, checkpoint=0))
        store.episodes.add_step(make_step(ep.id, 0, terminated=True))
        episodes.append(store.episodes.finish_episode(ep.id, score=10.0 + i))
    return episodes


@pytest.fixture(name="make_episode")
def _make_episode_fixture():
    return make_episode


@pytest.fixture(name="make_step")
def _make_step_fixture():
    return make_step
