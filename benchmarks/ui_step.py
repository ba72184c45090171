"""The terminal app's responsiveness: key press to updated screen, and opening things in a big database.

    python benchmarks/ui_step.py                     # ~100 steps, 100,000-episode database
    python benchmarks/ui_step.py --steps 50 --episodes 20000

Figures:
- step key (n) -> StepCompleted handled and the steps table updated, scripted model (median, p95);
- accept key (a) in propose-then-wait -> step stored and the table updated (no model call);
- with a 100,000-episode database (benchmarks/store.py's generator, plus real 64-step Snake episodes and a
  Snake Summary run shaped like a full protocol run: 30 exploration episodes, 11 checkpoints, 30 summary
  versions): app start to the Home screen ready (recent runs listed), opening a stored 64-step episode in
  the PlayScreen (replay), opening the compare screen on two 64-step episodes, `C` on a fork (compare it
  with its original), opening Summaries on the run with 30 versions, and Home -> Protocol (`o` on that run).
All timings drive the real app (headless `run_test`): keys go through the driver as a terminal sends them,
and the clock stops at the last frame that changed a cell of the screen once the change is shown (see
FrameProbe; the p95 to the last frame rendered at all, changed cells or not, is the column beside), so
Pilot's idle-detection sleeps are not counted. CPU time is the process's over the same span. On a shared machine
wall time follows the load: the load average is printed with the table.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from benchmarks._screen import ScreenCells  # noqa: E402
from benchmarks._util import print_table, stats_ms  # noqa: E402

import s3gym_games as games  # noqa: E402
from s3gym_tui.config import Settings  # noqa: E402
from s3gym_tui.models import EVAL_SEED_BASE, Checkpoint, Episode, RunConfig, Step  # noqa: E402
from s3gym_tui.store import Store  # noqa: E402

SETTINGS = Settings(default_model="scripted/snake", theme="dark", human_name="bench")
SIZE = (120, 40)


async def until(pilot, condition, limit: int = 10_000) -> None:
    for _ in range(limit):
        if condition():
            return
        await pilot.pause()
    raise RuntimeError("condition never became true")


class FrameProbe:
    """Timestamps the frames the app renders. `App._display` is called once per screen update, right
    after the compositor rendered it (headless, it then writes nothing). A measure waits for the burst
    that first shows the change: the first frame in which the condition holds, plus any frames that
    follow it within QUIET_S (a table sizing its columns on idle, a second layout pass). It ends at the
    last frame of that burst that changed a cell of the screen (ScreenCells, worked out after the
    burst, outside the timed span), so the figure is "until the screen is complete and still"; the
    last frame of the burst, visible change or not, is returned too. Waiting polls with 1 ms
    sleeps instead of Pilot's idle detection, whose 20 ms sleeps would be counted otherwise."""

    QUIET_S = 0.06

    def __init__(self, app) -> None:
        self.condition = None
        self.first: int | None = None  # index in self.frames of the first frame the condition holds in
        self.frames: list[tuple[float, float, object]] = []  # (wall, CPU, update) since the last measure
        self.screen = ScreenCells(app.console)
        original = app._display

        def display(screen, renderable) -> None:
            original(screen, renderable)
            if renderable is None:
                return
            self.frames.append((time.perf_counter(), time.process_time(), renderable))
            if self.condition is not None and self.first is None:
                try:
                    ok = bool(self.condition())
                except Exception:  # noqa: BLE001 - a screen half-built: not yet
                    ok = False
                if ok:
                    self.first = len(self.frames) - 1

        app._display = display

    async def measure(self, start, condition, timeout: float = 60.0) -> tuple[float, float, float]:
        """(wall s, CPU s) from calling `start()` to the last frame showing a change, in the burst that
        first shows what `condition()` checks, and the wall s to the burst's last frame."""
        for _, _, update in self.frames:  # the screen as it is before the measure
            self.screen.apply(update)
        self.frames.clear()
        self.first = None
        self.condition = condition
        t0, c0 = time.perf_counter(), time.process_time()
        start()
        while self.first is None or time.perf_counter() - self.frames[-1][0] < self.QUIET_S:
            await asyncio.sleep(0.001)
            if time.perf_counter() - t0 > timeout:
                raise RuntimeError("no frame satisfied the condition")
        self.condition = None
        burst = self.frames[:]
        end = self.first
        for n, (_, _, update) in enumerate(burst):
            if self.screen.apply(update) and n > end:
                end = n
        self.frames.clear()
        wall, cpu, _ = burst[end]
        return wall - t0, cpu - c0, burst[-1][0] - t0


def key_sender(app, key: str):
    """A function that sends one key press the way a terminal does (through the driver)."""
    from textual import events

    def send() -> None:
        event = events.Key(key, key if len(key) == 1 else None)
        event.set_sender(app)
        app._driver.send_message(event)

    return send


# ----- key to updated screen --------------------------------------------------------------------
async def step_latencies(db: Path, n_steps: int) -> tuple[list, list]:
    """(step key samples, accept key samples), each (wall s, CPU s) to the frame showing the new step
    in the steps table and on the board."""
    from s3gym_tui.app import S3GymApp
    from s3gym_tui.screens.play import PlayScreen

    steps: list = []
    accepts: list = []
    app = S3GymApp(db_path=db, settings=SETTINGS)
    async with app.run_test(size=SIZE) as pilot:
        probe = FrameProbe(app)
        app.open_play(game="snake", mode="explore", seed=0, model="scripted/snake")
        await pilot.pause()
        screen: PlayScreen = app.screen
        await pilot.press("n")  # warm-up: litellm import and provider registration
        await app.workers.wait_for_complete()
        await until(pilot, lambda: not screen.thinking)
        board = screen.query_one("#board")

        def shown(before: int):
            return lambda: (len(screen.steps) > before and screen.query_one("#steps").step_count > before
                            and f"step {before + 1}/" in str(board.border_subtitle))

        while len(steps) < n_steps:
            if screen.session.done:
                await pilot.press("R")
                await pilot.pause()
            steps.append(await probe.measure(key_sender(app, "n"), shown(len(screen.steps))))
            await pilot.pause()
        # propose-then-wait: the accept key (no model call in the timed part)
        await pilot.press("R")
        await pilot.pause()
        await pilot.press("p")
        while len(accepts) < max(20, n_steps // 4):
            if screen.session.done:
                await pilot.press("R")
                await pilot.pause()
            await pilot.press("n")
            await until(pilot, lambda: screen.proposal is not None)
            accepts.append(await probe.measure(key_sender(app, "a"), shown(len(screen.steps))))
            await pilot.pause()
    return steps, accepts


# ----- a big database -----------------------------------------------------------------------------
def add_real_episodes(store: Store, pairs: int, prompt_bytes: int) -> list[tuple[str, str]]:
    """Real 64-step Snake evaluation episodes (reference policy), History and Summary runs on the same
    seeds, with prompts of realistic size. Returns (history episode, summary episode) id pairs."""
    rng = random.Random(7)
    runs = {}
    for pathway in ("history", "summary"):
        runs[pathway] = store.runs.create_run(RunConfig(model="scripted/snake", game="snake", pathway=pathway),
                                              run_id=f"bench-snake-{pathway}")
    out = []
    summary_run = runs["summary"]
    explore_ids = []
    for k in range(30):  # the Summary run's exploration episodes (the sources of its 30 summary versions)
        episode = Episode(id=f"{summary_run.id}-x{k}", run_id=summary_run.id, game="snake", mode="explore",
                          phase="explore", seed=k, index=k, model=summary_run.config.model, pathway="summary")
        store.episodes.add_episode(episode)
        store.episodes.add_steps(_policy_steps(episode, k, "explore", rng, prompt_bytes))
        store.episodes.finish_episode(episode.id, float(k % 7))
        explore_ids.append(episode.id)
        store.summaries.add_summary(summary_run.id, f"Retain {k}: keep to open rows; " + "tip " * 40,
                                    f"Avoid {k}: turning into the body. " + "mistake " * 30,
                                    f"Next {k}: aim for the nearest apple. " + "plan " * 30,
                                    source_episode_ids=explore_ids[-3:], author="model:scripted/snake",
                                    for_episode_id=episode.id)
    for j in range(pairs):
        seed = EVAL_SEED_BASE + j
        ids = []
        for pathway, run in runs.items():
            episode = Episode(id=f"{run.id}-e{j}", run_id=run.id, game="snake", mode="eval", phase="eval",
                              seed=seed, index=j, checkpoint=0, model=run.config.model, pathway=pathway)
            store.episodes.add_episode(episode)
            steps = _policy_steps(episode, seed, "eval", rng, prompt_bytes)
            store.episodes.add_steps(steps)
            store.episodes.finish_episode(episode.id, float(sum(s.reward for s in steps)))
            ids.append(episode.id)
        out.append((ids[0], ids[1]))
    evals = [b for _, b in out]
    for n, x in enumerate(range(0, 31, 3)):  # 11 checkpoints of the Summary run
        chosen = tuple(evals[(n + i) % len(evals)] for i in range(3))
        store.checkpoints.add_checkpoint(Checkpoint(run_id=summary_run.id, x=x, episode_ids=chosen,
                                                    scores=(float(n), float(n + 1), float(n % 4))))
    # a fork of the first History episode after 32 steps (what `C` compares with its original)
    source = out[0][0]
    copied = [s.model_copy(update={"episode_id": "bench-fork", "prompt": store.prompts.prompt_of(s)})
              for s in store.episodes.steps(source)[:32]]  # the prompts as sent, as a fork copies them
    store.episodes.add_episode(Episode(id="bench-fork", run_id=None, game="snake", mode="eval", phase="eval",
                                       seed=EVAL_SEED_BASE, index=0, model="scripted/snake", pathway="none",
                                       fork_of=source, fork_step=32), copied)
    store.episodes.finish_episode("bench-fork", 3.0, "stopped")
    for run in runs.values():
        store.runs.set_run_status(run.id, "finished")
    return out


def _policy_steps(episode: Episode, seed: int, mode: str, rng: random.Random, prompt_bytes: int) -> list[Step]:
    """The reference policy's whole episode as stored steps, with prompts of realistic size."""
    game = games.make("snake", mode)
    game.reset(seed)
    policy = games.reference_policy("snake")
    steps = []
    while not game.done:
        observation = game.observation()
        action = policy.act(game.view()).action
        result = game.step(action)
        score = float(rng.choice([-1, 0, 1, 1, 2]))
        filler = "x" * prompt_bytes
        steps.append(Step(episode_id=episode.id, index=len(steps), observation=observation,
                          prompt=json.dumps([{"role": "user", "content": observation + filler}]),
                          reply=f"Thinking.\nAnswer: {action}, Score: {score:g}", action=action,
                          self_score=score, reward=result.reward, feedback=result.feedback,
                          valid=True, terminated=result.terminated, truncated=result.truncated,
                          tokens_in=prompt_bytes // 4, tokens_out=20, latency_ms=800.0, cost=0.0))
    return steps


def build_big_db(path: Path, n_episodes: int, prompt_bytes: int) -> tuple[list[tuple[str, str]], float]:
    from benchmarks.store import build

    t0 = time.perf_counter()
    with Store(path) as store:
        build(store, n_episodes, 50, prompt_bytes, random.Random(0))
        pairs = add_real_episodes(store, 12, prompt_bytes)
        store.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    return pairs, time.perf_counter() - t0


async def start_time(db: Path) -> tuple[float, float]:
    from textual.widgets import DataTable

    from s3gym_tui.app import S3GymApp
    from s3gym_tui.screens.home import HomeScreen

    t0, c0 = time.perf_counter(), time.process_time()
    app = S3GymApp(db_path=db, settings=SETTINGS)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, HomeScreen)
                    and app.screen.query_one("#runs", DataTable).row_count > 0)
        return time.perf_counter() - t0, time.process_time() - c0


async def open_times(db: Path, pairs: list[tuple[str, str]], rounds: int) -> dict[str, list]:
    """Opening screens on the big database, each (wall s, CPU s) to the first frame showing the data."""
    from textual.widgets import DataTable

    from s3gym_tui.app import S3GymApp
    from s3gym_tui.screens.compare import CompareScreen
    from s3gym_tui.screens.home import HomeScreen
    from s3gym_tui.screens.play import PlayScreen
    from s3gym_tui.screens.protocol import ProtocolScreen
    from s3gym_tui.screens.summaries import SummariesScreen

    out: dict[str, list] = {"play": [], "compare": [], "fork": [], "summaries": [], "protocol": []}
    app = S3GymApp(db_path=db, settings=SETTINGS)

    def on(kind, ready):
        return lambda: isinstance(app.screen, kind) and app.screen.is_mounted and ready(app.screen)

    async def back() -> None:
        await pilot.pause()
        app.pop_screen()
        await pilot.pause()

    async with app.run_test(size=SIZE) as pilot:
        probe = FrameProbe(app)
        await pilot.pause()
        for n in range(rounds):
            a, b = pairs[n % len(pairs)]
            out["play"].append(await probe.measure(lambda: app.open_episode(a), on(
                PlayScreen, lambda s: len(s.steps) == 64 and s.query_one("#steps").step_count == 64
                and bool(s.query_one("#board").border_subtitle))))
            await back()
            out["compare"].append(await probe.measure(lambda: app.open_compare(a, b), on(
                CompareScreen, lambda s: len(s.rows) >= 64)))
            await back()
        # `C` on a fork: compare it with its original
        app.open_episode("bench-fork")
        await until(pilot, lambda: isinstance(app.screen, PlayScreen) and app.screen.is_mounted
                    and len(app.screen.steps) == 32)
        await pilot.pause()
        for n in range(rounds):
            out["fork"].append(await probe.measure(key_sender(app, "C"), on(
                CompareScreen, lambda s: len(s.rows) >= 32)))
            await back()
        app.pop_screen()
        await pilot.pause()
        for n in range(rounds):
            out["summaries"].append(await probe.measure(lambda: app.open_summaries("bench-snake-summary"), on(
                SummariesScreen, lambda s: s.query_one("#sum-versions", DataTable).row_count == 30)))
            await back()
        home = app.screen
        assert isinstance(home, HomeScreen)
        runs = home.query_one("#runs", DataTable)
        for n in range(rounds):
            runs.move_cursor(row=runs.get_row_index("bench-snake-summary"))
            runs.focus()
            await pilot.pause()
            out["protocol"].append(await probe.measure(key_sender(app, "o"), on(
                ProtocolScreen, lambda s: s.run is not None and len(s.points) == 11
                and bool(s.query_one("#proto-board").border_subtitle))))
            await back()
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--steps", type=int, default=100, help="timed step key presses")
    ap.add_argument("--episodes", type=int, default=100_000, help="episodes in the big database")
    ap.add_argument("--prompt-bytes", type=int, default=6000)
    ap.add_argument("--opens", type=int, default=20, help="timed episode / compare opens")
    ap.add_argument("--starts", type=int, default=5, help="timed app starts")
    args = ap.parse_args(argv)
    rows: list[list] = []

    def both(label: str, samples: list[tuple]) -> None:
        """A row of wall times, one of CPU times; frame-probed samples also give the p95 to the last
        frame of the burst (a frame that changed no cell included)."""
        med, p95 = stats_ms([sample[0] for sample in samples])
        last = f"{stats_ms([sample[2] for sample in samples])[1]:,.2f}" if len(samples[0]) > 2 else "-"
        rows.append([label, med, p95, last, len(samples)])
        med, p95 = stats_ms([sample[1] for sample in samples])
        rows.append(["  same, CPU time of the process", med, p95, "", len(samples)])

    load_before = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    with tempfile.TemporaryDirectory(prefix="s3gym-uibench-") as tmp:
        small = Path(tmp) / "small.db"
        steps, accepts = asyncio.run(step_latencies(small, args.steps))
        both(f"step key -> steps table and board updated (scripted/snake, {len(steps)} steps)", steps)
        both("accept key (propose-then-wait) -> table and board updated", accepts)

        big = Path(tmp) / "big.db"
        pairs, build_s = build_big_db(big, args.episodes, args.prompt_bytes)
        starts = [asyncio.run(start_time(big)) for _ in range(args.starts)]
        both(f"app start -> Home ready ({args.episodes:,} episodes; first {starts[0][0] * 1000:.0f} ms, "
             f"includes the once-per-process file check)", starts)
        opened = asyncio.run(open_times(big, pairs, args.opens))
        both("open a stored 64-step episode (PlayScreen replay)", opened["play"])
        both("open the compare screen (two 64-step episodes)", opened["compare"])
        both("C on a fork -> compare with its original (32 + 64 steps)", opened["fork"])
        both("open Summaries (run with 30 versions)", opened["summaries"])
        both("Home -> Protocol (o on a run: 30 explore episodes, 11 checkpoints)", opened["protocol"])
    load = ", ".join(f"{v:.1f}" for v in os.getloadavg()) if hasattr(os, "getloadavg") else "?"
    print_table(f"UI responsiveness, key or call to the last frame that changed the screen (big database built in "
                f"{build_s:.0f} s; load average {load_before:.1f} at the start, {load} at the end, "
                f"{os.cpu_count()} CPUs)", ["measure", "median ms", "p95 ms", "p95 ms, last frame", "n"], rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
