"""The demo database (`s3gym demo`, Home's `d`): what it holds, where it lives, and how it is marked.

One schedule, here and nowhere else: the learner over the seven games x {none, history, summary} (one
sweep) and, beside it, one short run of the embedded model for contrast (a one-run sweep). The CLI, the
app and the tests read `schedule()`; `S3GYM_DEMO_SCHEDULE` (a JSON object of fields to change) is a
test-only setting that shrinks it.

A demo database carries a mark (the store's meta row `demo`): re-running the demo replaces a file that
has it, and refuses any other file, so a person's own database is never overwritten.
"""

from __future__ import annotations

import json
import os
import sqlite3
from pathlib import Path
from typing import Literal, Optional

from pydantic import Field

from s3gym_tui.models import Frozen, SweepConfig, utcnow

DEMO_DB_NAME = "s3gym-demo.db"
MARK_KEY = "demo"  # the meta row that makes a database a demo database
MARK_KIND = "s3gym demo"
SCHEDULE_ENV = "S3GYM_DEMO_SCHEDULE"  # test-only: a JSON object of DemoSchedule fields to change


class ContrastRun(Frozen):
    """The embedded model's short run beside the learner's sweep: what a small real model does."""

    model: str = "local/smollm2-135m"
    game: str = "trust"
    pathway: Literal["none", "history", "summary"] = "history"
    explore_episodes: int = Field(2, ge=1)
    eval_every: int = Field(2, ge=1)
    eval_episodes: int = Field(1, ge=1)
    step_cap: int = Field(5, ge=1, le=64)
    decoding: Literal["free", "grammar"] = "grammar"  # replies constrained to the game's action grammar

    def sweep(self) -> SweepConfig:
        settings = dict(explore_episodes=self.explore_episodes, eval_every=self.eval_every,
                        eval_episodes=self.eval_episodes, step_cap=self.step_cap, decoding=self.decoding)
        return SweepConfig(games=(self.game,), pathways=(self.pathway,), models=(self.model,), settings=settings,
                           concurrency=1, runs_per_model=1)


class DemoSchedule(Frozen):
    """What `s3gym demo` runs (the coordinator may retune it: every number of the demo is here)."""

    games: tuple[str, ...] = ()  # empty: all seven
    pathways: tuple[Literal["none", "history", "summary"], ...] = ("none", "history", "summary")
    model: str = "learner"  # a family: learner/<game> for each game
    explore_episodes: int = Field(12, ge=1)
    eval_every: int = Field(3, ge=1)
    eval_episodes: int = Field(5, ge=1)
    step_cap: int = Field(64, ge=1, le=64)
    contrast: Optional[ContrastRun] = ContrastRun()

    def sweep(self) -> SweepConfig:
        """The learner's sweep: every game x pathway."""
        import s3gym_games as games

        settings = dict(explore_episodes=self.explore_episodes, eval_every=self.eval_every,
                        eval_episodes=self.eval_episodes, step_cap=self.step_cap)
        return SweepConfig(games=self.games or tuple(games.names()), pathways=self.pathways, models=(self.model,),
                           settings=settings)


DEMO_SCHEDULE = DemoSchedule()


def schedule() -> DemoSchedule:
    """The demo's schedule: DEMO_SCHEDULE, with the test-only overrides of $S3GYM_DEMO_SCHEDULE."""
    text = os.environ.get(SCHEDULE_ENV, "").strip()
    if not text:
        return DEMO_SCHEDULE
    try:
        changes = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"${SCHEDULE_ENV} is not JSON: {exc}") from None
    if not isinstance(changes, dict):
        raise ValueError(f"${SCHEDULE_ENV} must be a JSON object of schedule fields")
    return DemoSchedule.model_validate({**DEMO_SCHEDULE.model_dump(), **changes})


def default_demo_path() -> Path:
    """`s3gym-demo.db` beside the default database (in the user data directory)."""
    from s3gym_tui.store import default_db_path

    return default_db_path().parent / DEMO_DB_NAME


# ----- the mark ---------------------------------------------------------------------------------------
class DemoMark(Frozen):
    """What the meta row `demo` says: a demo database, how far its build got, what it holds."""

    kind: Literal["s3gym demo"] = MARK_KIND
    status: Literal["building", "ready"] = "building"
    schedule: DemoSchedule = DEMO_SCHEDULE
    sweep_id: Optional[str] = None  # the learner's sweep
    contrast_sweep_id: Optional[str] = None  # the embedded model's run (a one-run sweep), if it ran
    contrast_note: str = ""  # why there is no contrast run (one line), if there is none
    started_at: str = Field(default_factory=utcnow)
    wall_s: Optional[float] = None  # how long the build took (set when ready)
    cpu_s: Optional[float] = None
    pid: Optional[int] = None  # the process building it (while building)
    host: str = ""


def read_mark(conn: sqlite3.Connection) -> Optional[DemoMark]:
    """The mark of the database open on `conn`; None when it has none (or one this code cannot read)."""
    try:
        row = conn.execute("SELECT value FROM meta WHERE key = ?", (MARK_KEY,)).fetchone()
    except sqlite3.Error:
        return None
    if row is None:
        return None
    try:
        return DemoMark.model_validate_json(row[0])
    except ValueError:
        return None


def mark_of_file(path: Path) -> Optional[DemoMark]:
    """The mark of the database at `path`, read without changing it; None for a file that is not a demo
    database (not SQLite, not s3gym, unmarked). Do not call it on a file this process has open: the
    store's own connection reads it then (`read_mark(store.conn)`)."""
    try:
        conn = sqlite3.connect(f"{Path(path).resolve().as_uri()}?mode=ro", uri=True)
    except sqlite3.Error:
        return None
    try:
        return read_mark(conn)
    finally:
        conn.close()


def write_mark(store, mark: DemoMark) -> None:
    store.meta.set_meta_value(MARK_KEY, mark.model_dump_json())


class DemoRefused(ValueError):
    """The demo may not write there: one line saying why."""


def building_elsewhere(mark: DemoMark) -> bool:
    """True while another live process of this machine builds that demo database."""
    from s3gym_tui.store.leases import HOST

    if mark.status != "building" or not mark.pid or mark.pid == os.getpid() or mark.host != HOST:
        return False
    try:
        os.kill(mark.pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def check_target(path: Path) -> Optional[DemoMark]:
    """May the demo (re)build the database at `path`? Its mark when it is a demo database (replaced), None
    when nothing is there; DemoRefused for any other file, or while another process builds it."""
    path = Path(path)
    if not path.exists():
        return None
    if path.is_dir():
        raise DemoRefused(f"{path} is a directory, not a demo database: nothing was written")
    mark = mark_of_file(path)
    if mark is None:
        raise DemoRefused(f"{path} exists and is not a demo database: it is left untouched (give another --db)")
    if building_elsewhere(mark):
        raise DemoRefused(f"{path} is being built by another `s3gym demo` (PID {mark.pid}): wait for it")
    return mark


def remove_database(path: Path) -> None:
    """Delete a demo database and its WAL files (only after check_target said it is one)."""
    for suffix in ("", "-wal", "-shm"):
        try:
            Path(f"{path}{suffix}").unlink()
        except FileNotFoundError:
            pass
