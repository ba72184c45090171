"""Kill -9 the terminal app and the run process it started, reopen the app, resume from the UI; repeat.

    python tests/reliability/app_lives.py DB RUN_ID [--kills 2] [--steps 15] [--seed 0]

The parent imports the app once, then forks one child per life. A child runs the real app headless
(`S3GymApp.run_test`), opens the run's Protocol screen and, when no process drives the run (created,
or "running" with its driver gone after a kill), presses `r` and confirms: the run is resumed as its
own process (`s3gym resume`). The parent SIGKILLs the app and the process holding the run's lease once
`--steps` to `2 x --steps` more steps are stored (a random number, from --seed); the last life follows the run to its end.
Prints one JSON line: kills, lives, the final run status and the app's error notifications.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import signal
import sqlite3
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("S3GYM_CONFIG", "/nonexistent/s3gym-app-lives.toml")

from s3gym_tui.app import S3GymApp  # noqa: E402
from s3gym_tui.config import Settings  # noqa: E402
from s3gym_tui.engine.llm import _litellm  # noqa: E402
from s3gym_tui.screens.protocol import ProtocolScreen  # noqa: E402
from s3gym_tui.screens.run_control import ResumeDialog  # noqa: E402


def steps_stored(db: Path) -> int:
    try:
        conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
        try:
            return conn.execute("SELECT count(*) FROM steps").fetchone()[0]
        finally:
            conn.close()
    except sqlite3.Error:
        return 0


def run_status(db: Path, run_id: str) -> str:
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        return conn.execute("SELECT status FROM runs WHERE id = ?", (run_id,)).fetchone()[0]
    finally:
        conn.close()


async def app_life(db: Path, run_id: str, report: Path) -> None:
    """One life of the app: open the run, resume it when nothing drives it, follow it to its end."""
    settings = Settings(default_model="scripted/trust", theme="dark", human_name="tester")
    app = S3GymApp(db_path=db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run_id)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProtocolScreen), type(screen).__name__
        resumes = 0
        while True:
            status = app.store.runs.get_run(run_id).status
            if status == "finished" and not screen.running:
                break
            if not screen.running and screen.child is None and app.screen is screen:
                if resumes == 3:
                    break  # it does not resume: the report says how it ended
                resumes += 1
                await pilot.press("r")
                while not isinstance(app.screen, ResumeDialog):
                    await pilot.pause(0.05)
                await pilot.press("y")
                while screen.child is None and not screen.running:
                    await pilot.pause(0.05)
            await pilot.pause(0.1)
            screen.refresh_from_store()
        await pilot.pause(0.2)
        errors = [str(n.message) for n in app._notifications if n.severity == "error"]
        report.write_text(json.dumps({"status": app.store.runs.get_run(run_id).status, "errors": errors}))


def lease_pid(db: Path, run_id: str):
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5)
    try:
        row = conn.execute("SELECT pid FROM leases WHERE run_id = ?", (run_id,)).fetchone()
    finally:
        conn.close()
    return None if row is None else row[0]


def reap_orphan(pid: int) -> None:
    """The run process of a killed app comes to this process (a subreaper): collect it."""
    try:
        os.waitpid(pid, os.WNOHANG)
    except ChildProcessError:
        pass


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("run_id")
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--steps", type=int, default=15, help="new steps before a kill (up to twice as many, at random)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    db, rng = Path(args.db), random.Random(args.seed)
    try:  # the run processes of a killed app are re-parented here, to be reaped (PR_SET_CHILD_SUBREAPER)
        import ctypes

        ctypes.CDLL(None).prctl(36, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass
    _litellm()  # imported once, before forking
    kills, lives, final = 0, 0, {}
    report = db.with_suffix(".life.json")
    while True:
        lives += 1
        report.unlink(missing_ok=True)
        start = steps_stored(db)
        kill = kills < args.kills
        # the kill comes a random number of steps past --steps, not a random time: a fast driver stored 40
        # steps in the 0.3 s an extra delay took, so two lives could use up a 100-step run before a 2nd kill
        threshold = start + args.steps + rng.randint(0, args.steps)
        pid = os.fork()
        if pid == 0:
            code = 1
            try:
                devnull = os.open(os.devnull, os.O_WRONLY)
                os.dup2(devnull, 1)
                asyncio.run(app_life(db, args.run_id, report))
                code = 0
            except BaseException:  # noqa: BLE001
                import traceback

                traceback.print_exc()
            finally:
                os._exit(code)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if kill and steps_stored(db) >= threshold:
                driver = lease_pid(db, args.run_id)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
                if driver is not None:
                    try:
                        os.kill(driver, signal.SIGKILL)
                    except ProcessLookupError:
                        pass
                    for _ in range(500):  # until it is gone and reaped (its lease then is dead)
                        reap_orphan(driver)
                        try:
                            os.kill(driver, 0)
                        except ProcessLookupError:
                            break
                        time.sleep(0.01)
                kills += 1
                break
            time.sleep(0.02)
        else:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            final = {"error": "a life timed out"}
            break
        if report.exists():
            final = json.loads(report.read_text())
            break
        if not kill:
            final = {"error": "the last life ended without a report"}
            break
    print(json.dumps({"kills": kills, "lives": lives, "status": run_status(db, args.run_id), **final}))


if __name__ == "__main__":
    main()
