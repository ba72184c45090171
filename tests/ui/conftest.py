"""UI fixtures: a database populated by real scripted runs (built once per session, copied per test)."""

from __future__ import annotations

import asyncio
import shutil
from pathlib import Path

import pytest

from s3gym_tui.config import Settings
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store


def build_demo_db(path: Path) -> dict:
    """Two Trust runs (History, Summary) and one Snake Summary run on the same seeds, with the
    scripted players: small but complete (checkpoints, summaries, eval episodes)."""
    store = Store(path)
    ids = {}
    for game, pathway in (("trust", "history"), ("trust", "summary"), ("snake", "summary")):
        episodes = 6 if game == "trust" else 3
        run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway=pathway,
                                              explore_episodes=episodes, eval_every=3, eval_episodes=2))
        asyncio.run(ProtocolRunner(store, run, backoff_base_s=0).run_protocol())
        ids[f"{game}-{pathway}"] = run.id
    store.close()
    return ids


@pytest.fixture(scope="session", autouse=True)
def textual_patched():
    """The app's Textual patches, as S3GymApp applies them at start: the bare test apps here host the
    app's widgets too, and a test that monkeypatches a patched name must wrap the patched one."""
    from s3gym_tui.widgets import textual_patches

    textual_patches.apply()


@pytest.fixture(scope="session")
def demo_db_template(tmp_path_factory) -> tuple[Path, dict]:
    path = tmp_path_factory.mktemp("demo") / "demo.db"
    return path, build_demo_db(path)


@pytest.fixture
def demo_db(demo_db_template, tmp_path) -> tuple[Path, dict]:
    """A private copy of the demo database and the run ids by "game-pathway"."""
    source, ids = demo_db_template
    target = tmp_path / "demo.db"
    shutil.copy(source, target)
    return target, ids


@pytest.fixture
def settings() -> Settings:
    return Settings(default_model="scripted/trust", theme="dark", human_name="tester")
