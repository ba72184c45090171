"""Kill -9 the terminal app while it runs a protocol, reopen it, resume from the UI; repeat.

    python tests/reliability/app_lives.py DB RUN_ID [--kills 2] [--steps 15] [--seed 0]

The parent imports the app once, then forks one child per life. A child runs the real app headless
(`S3GymApp.run_test`), opens the run's Protocol screen (which starts a created or stopped run by
itself) and presses `r` when the run shows as "running" after a kill (the status a killed process
leaves). The parent SIGKILLs the child once `--steps` more steps are stored, plus a random extra
delay; the last life runs the protocol to the end. Prints one JSON line: kills, lives, the final
run status and the app's error notifications.
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
    """One life of the app: open the run, resume it if needed, wait for the worker to end."""
    settings = Settings(default_model="scripted/trust", theme="dark", human_name="tester")
    app = S3GymApp(db_path=db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        app.open_protocol(run_id)
        await pilot.pause()
        screen = app.screen
        assert isinstance(screen, ProtocolScreen), type(screen).__name__
        if not screen.running:
            await pilot.press("r")
        while screen.running:
            await pilot.pause(0.05)
        await pilot.pause(0.2)
        errors = [str(n.message) for n in app._notifications if n.severity == "error"]
        report.write_text(json.dumps({"status": app.store.get_run(run_id).status, "errors": errors}))


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("db")
    parser.add_argument("run_id")
    parser.add_argument("--kills", type=int, default=2)
    parser.add_argument("--steps", type=int, default=15, help="new steps before a kill")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    db, rng = Path(args.db), random.Random(args.seed)
    _litellm()  # imported once, before forking
    kills, lives, final = 0, 0, {}
    report = db.with_suffix(".life.json")
    while True:
        lives += 1
        report.unlink(missing_ok=True)
        start = steps_stored(db)
        kill = kills < args.kills
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
        extra = rng.uniform(0.0, 0.3)
        deadline = time.monotonic() + 600
        while time.monotonic() < deadline:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                break
            if kill and steps_stored(db) >= start + args.steps:
                time.sleep(extra)
                os.kill(pid, signal.SIGKILL)
                os.waitpid(pid, 0)
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
