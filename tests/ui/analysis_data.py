"""Deterministic data for the analysis screens (protocol, summaries, compare, pairs, report):
a Trust History run and a Trust Summary run with fixed ids and fixed times, scripted players,
and one evaluation episode of the History run that a person steered off the scripted path at
step 3, so the pair at (seed 1000000, x=3) diverges."""

from __future__ import annotations

import asyncio
import shutil
import sqlite3
from pathlib import Path

import pytest

from s3gym_tui.engine.runner import ProtocolRunner, eval_episode_id
from s3gym_tui.engine.session import EpisodeSession
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store

HISTORY_RUN = "trust-history-demo"
SUMMARY_RUN = "trust-summary-demo"
DIVERGING_X = 3
DIVERGE_AT = 2  # step index a person changed
DIVERGING_HISTORY = eval_episode_id(HISTORY_RUN, DIVERGING_X, 0)
DIVERGING_SUMMARY = eval_episode_id(SUMMARY_RUN, DIVERGING_X, 0)
FIXED_TIME = "2026-01-02T03:04:05.000+00:00"
CONFIG = dict(model="scripted/trust", game="trust", explore_episodes=3, eval_every=3, eval_episodes=2)


class SteeredRunner(ProtocolRunner):
    """The real runner, except that in one episode a person replaces the model's action at one step."""

    def __init__(self, *args, target: str, at: int, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.target, self.at = target, at

    async def play(self, episode, state):
        if episode.id != self.target:
            return await super().play(episode, state)
        session = EpisodeSession(self.store, episode, self.settings, state, self.on_event)
        while not session.done:
            proposal = await session.propose()
            if len(session.steps) == self.at:
                other = "cheat" if proposal.action == "collaborate" else "collaborate"
                session.commit(proposal, action=other, actor="human-edit")
            else:
                session.commit(proposal)
        return session.episode


def build_analysis_db(path: Path) -> dict:
    store = Store(path)
    history = store.runs.create_run(RunConfig(pathway="history", **CONFIG), run_id=HISTORY_RUN)
    asyncio.run(SteeredRunner(store, history, backoff_base_s=0, target=DIVERGING_HISTORY,
                              at=DIVERGE_AT).run_protocol())
    summary = store.runs.create_run(RunConfig(pathway="summary", **CONFIG), run_id=SUMMARY_RUN)
    asyncio.run(ProtocolRunner(store, summary, backoff_base_s=0).run_protocol())
    store.close()
    conn = sqlite3.connect(path)  # fixed times: nothing on screen depends on the clock
    with conn:
        conn.execute("UPDATE runs SET created_at = ?", (FIXED_TIME,))
        conn.execute("UPDATE summaries SET created_at = ?", (FIXED_TIME,))
        conn.execute("UPDATE episodes SET started_at = ?, finished_at = ?", (FIXED_TIME, FIXED_TIME))
        conn.execute("UPDATE steps SET created_at = ?", (FIXED_TIME,))
    conn.close()
    return {"history": HISTORY_RUN, "summary": SUMMARY_RUN}


@pytest.fixture(scope="session")
def analysis_template(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("analysis") / "analysis.db"
    build_analysis_db(path)
    return path


@pytest.fixture
def analysis_db(analysis_template, tmp_path) -> Path:
    """A private copy of the deterministic analysis database."""
    target = tmp_path / "analysis.db"
    shutil.copy(analysis_template, target)
    return target
