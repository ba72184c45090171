"""The "one live truth" campaign: the real app (driven by Pilot) opens every screen in turn while two
headless runs write the same database from other processes and a reader process polls it; the app
edits, vetoes and pins summaries, each edit checked from a fresh process right after it is saved;
the app quits and restarts every round; PRAGMA integrity_check after every round.

    python benchmarks/live_campaign.py [--rounds 10] [--seed 0] [--db FILE] [--json]

Prints rounds, processes, screens opened, edits saved / seen by a fresh process / lost, torn reads
seen by the reader, corrupt rounds. Before the fix in store/connection.py (a header check with
open()/close() dropped the process's POSIX locks), the first round already lost edits and ended
with a malformed file; the test in tests/reliability/test_live_campaign.py runs two rounds.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
os.environ.setdefault("S3GYM_CONFIG", "/nonexistent/s3gym-live-campaign.toml")
ENV = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
       "S3GYM_CONFIG": "/nonexistent/s3gym-live-campaign.toml"}

READER = r"""
import json, sys, time
from pathlib import Path
from s3gym_tui.store import Store, StoreError
path, stop = sys.argv[1], Path(sys.argv[2])
polls = torn = errors = 0
notes = []
while not stop.exists():
    try:
        with Store(path, read_only=True, check=False) as store, store.snapshot():
            for run in store.runs.list_runs(limit=1000):
                for episode in store.episodes.list(run.id):
                    steps = store.episodes.steps(episode.id, include_prompt=False)
                    if episode.n_steps != len(steps) or [s.index for s in steps] != list(range(len(steps))):
                        torn += 1
                        notes.append(f"{episode.id}: n_steps {episode.n_steps}, {len(steps)} steps")
                for summary in store.summaries.list(run.id):
                    store.summaries.current_summary(run.id)
        polls += 1
    except StoreError as exc:
        errors += 1
        notes.append(str(exc))
    time.sleep(0.05)
print(json.dumps({"polls": polls, "torn": torn, "errors": errors, "notes": notes[:5]}))
"""

SEEN = r"""
import sys
from s3gym_tui.store import Store
with Store(sys.argv[1], read_only=True, check=False) as store:
    s = store.summaries.get_summary(sys.argv[2])
    print(s.retain + "\x1f" + s.status + "\x1f" + str(int(s.pinned)))
"""

HEADLESS = [
    ["trust", "-m", "scripted/trust", "-p", "summary", "--episodes", "9", "--eval-every", "3",
     "--eval-episodes", "1"],
    ["snake", "-m", "scripted/snake", "-p", "history", "--episodes", "6", "--eval-every", "3",
     "--eval-episodes", "1"],
]


@dataclass
class Figures:
    rounds: int = 0
    processes: int = 0
    app_starts: int = 0
    screens_opened: int = 0
    edits_saved: int = 0
    edits_seen_fresh: int = 0
    vetoes_pins: int = 0
    headless_runs: int = 0
    headless_failed: int = 0
    reader_polls: int = 0
    torn_reads: int = 0
    reader_errors: int = 0
    corrupt_rounds: int = 0
    problems: list = field(default_factory=list)

    @property
    def lost_edits(self) -> int:
        return self.edits_saved - self.edits_seen_fresh

    @property
    def ok(self) -> bool:
        return (not self.problems and self.lost_edits == 0 and self.torn_reads == 0
                and self.corrupt_rounds == 0 and self.headless_failed == 0 and self.reader_errors == 0)


def _python(code: str, *args: str, timeout: float = 120) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code, *map(str, args)], cwd=ROOT, env=ENV,
                          capture_output=True, text=True, timeout=timeout)


def _integrity(db: Path) -> str:
    done = _python("import sqlite3, sys; c = sqlite3.connect(sys.argv[1]); "
                   "print(c.execute('PRAGMA integrity_check').fetchone()[0])", str(db))
    return done.stdout.strip() or (done.stderr.strip().splitlines() or ["no answer"])[-1]


async def _until(pilot, predicate, timeout: float = 60.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        await pilot.pause(0.05)
    return None


async def _app_round(db: Path, rng: random.Random, figures: Figures) -> None:
    """One life of the real app: every screen in turn, curation checked from a fresh process."""
    from s3gym_tui.app import S3GymApp
    from s3gym_tui.config import Settings
    from s3gym_tui.screens.summaries import SummariesScreen

    app = S3GymApp(db_path=db, settings=Settings(default_model="scripted/trust", theme="dark",
                                                 human_name="campaign"))
    figures.app_starts += 1
    async with app.run_test(size=(120, 40)) as pilot:
        store = app.store

        def summary_run():
            for run in store.runs.list_runs(limit=50):
                if run.config.pathway == "summary" and store.summaries.list(run.id):
                    return run
            return None

        run = await _until(pilot, summary_run, timeout=120)
        if run is None:
            figures.problems.append("no summary run appeared")
            return
        runs = store.runs.list_runs(limit=50)
        screens = [lambda: app.open_protocol(run.id), lambda: app.open_summaries(run.id),
                   lambda: app.open_report([r.id for r in runs[:3]]), app.open_pairs,
                   lambda: app.open_training(run.id)]
        episodes = [e for e in store.episodes.list(run.id) if e.status == "finished"]
        if len(episodes) >= 2:
            screens.append(lambda: app.open_compare(episodes[0].id, episodes[1].id))
            screens.append(lambda: app.open_episode(episodes[-1].id))
        rng.shuffle(screens)
        for open_screen in screens:
            depth = len(app.screen_stack)
            open_screen()
            await _until(pilot, lambda: len(app.screen_stack) > depth)
            await pilot.pause(rng.uniform(0.2, 1.0))  # let workers and live refreshes run
            figures.screens_opened += 1
            if isinstance(app.screen, SummariesScreen):
                await _curate(app.screen, pilot, db, rng, figures)
            await pilot.press("escape")
            await _until(pilot, lambda: len(app.screen_stack) == depth)
        app.open_summaries(run.id)
        screen = await _until(pilot, lambda: isinstance(app.screen, SummariesScreen) and app.screen)
        if screen:
            figures.screens_opened += 1
            await _curate(screen, pilot, db, rng, figures)
        await pilot.press("ctrl+q")
        await pilot.pause(0.2)
        if app.is_running:  # asked because a screen drives a run: quit anyway
            await pilot.press("ctrl+q")


async def _curate(screen, pilot, db: Path, rng: random.Random, figures: Figures) -> None:
    """Edit (and sometimes veto/pin) the selected version; check each from a fresh process."""
    await pilot.pause(0.3)
    if not screen.versions:
        return
    for _ in range(rng.randint(1, 3)):
        text = f"retain {rng.randrange(10**9)}"
        new = screen.save_edit(text, "avoid nothing", "next: keep going")
        await pilot.pause()
        if new is None:
            figures.problems.append("an edit was refused")
            continue
        figures.edits_saved += 1
        seen = _python(SEEN, str(db), new.id)
        if seen.returncode == 0 and seen.stdout.strip().split("\x1f")[0] == text:
            figures.edits_seen_fresh += 1
        else:
            figures.problems.append(f"edit {new.id} not seen by a fresh process: {seen.stderr[-200:]}")
        figures.processes += 1
    if rng.random() < 0.5:
        await pilot.press("p")  # pin the edit (then unpin it: the runs go on writing summaries)
        await pilot.pause()
        await pilot.press("p")
        await pilot.pause()
        figures.vetoes_pins += 2


def run_campaign(db: Path, rounds: int, seed: int = 0) -> Figures:
    from s3gym_tui.store import Store

    rng = random.Random(seed)
    figures = Figures()
    Store(db).close()  # the file exists before the reader's first poll
    for round_no in range(rounds):
        stop = db.parent / f"stop-{round_no}"
        reader = subprocess.Popen([sys.executable, "-c", READER, str(db), str(stop)], cwd=ROOT,
                                  env=ENV, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs = [subprocess.Popen([sys.executable, "-m", "s3gym_tui", "run", *args, "--db", str(db)],
                                  cwd=ROOT, env=ENV, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                                  text=True) for args in HEADLESS]
        figures.processes += 1 + len(procs)
        asyncio.run(_app_round(db, rng, figures))
        for proc in procs:
            _, err = proc.communicate(timeout=900)
            figures.headless_runs += 1
            if proc.returncode != 0:
                figures.headless_failed += 1
                figures.problems.append(f"headless run exit {proc.returncode}: {err.strip()[-300:]}")
        stop.touch()
        out, err = reader.communicate(timeout=300)
        try:
            seen = json.loads(out.strip().splitlines()[-1])
            figures.reader_polls += seen["polls"]
            figures.torn_reads += seen["torn"]
            figures.reader_errors += seen["errors"]
            figures.problems.extend(seen["notes"])
        except (ValueError, IndexError):
            figures.reader_errors += 1
            figures.problems.append(f"reader died: {err.strip()[-300:]}")
        verdict = _integrity(db)
        figures.processes += 1
        if verdict != "ok":
            figures.corrupt_rounds += 1
            figures.problems.append(f"round {round_no}: integrity_check says {verdict}")
        figures.rounds += 1
    return figures


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--db", type=Path, default=None)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    db = args.db or Path(tempfile.mkdtemp(prefix="live-campaign-")) / "live.db"
    started = time.monotonic()
    figures = run_campaign(db, args.rounds, args.seed)
    wall = time.monotonic() - started
    result = {**asdict(figures), "lost_edits": figures.lost_edits, "ok": figures.ok, "wall_s": round(wall, 1)}
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        from benchmarks._util import print_table

        print_table(f"live campaign ({db})", ["figure", "value"],
                    [[k, v] for k, v in result.items() if k != "problems"])
        for problem in figures.problems[:20]:
            print("problem:", problem)
    return 0 if figures.ok else 1


if __name__ == "__main__":
    sys.exit(main())
