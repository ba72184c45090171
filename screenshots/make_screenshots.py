"""Regenerate screenshots/<name>.svg and .png of every screen, from a deterministic database.

    python screenshots/make_screenshots.py                 # all screens
    python screenshots/make_screenshots.py --only play,help
    python screenshots/make_screenshots.py --db /tmp/showcase.db   # keep the database

The database is built by real scripted runs (Trust and Snake, History and Summary; Minesweeper with
no pathway), plus human edits and a veto of a summary and a fork of a stored episode. Ids, times and
call latencies are fixed so the pictures only change when the UI does. The real app is then driven
with `run_test` and each screen saved as SVG, then converted to PNG with rsvg-convert (Debian
librsvg2-bin and fonts-firacode) after adding xml:space="preserve" to the root <svg>.
A screen whose module does not exist yet is skipped with a warning.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import itertools
import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile
import types
from pathlib import Path
from typing import Awaitable, Callable, Optional

ROOT = Path(__file__).resolve().parents[1]
OUT = Path(__file__).resolve().parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")
from tests.ui.settle import settle  # noqa: E402 - the suite's wait: workers done, the screen not busy

SIZE = (120, 40)
RUNS = (  # run id, game, pathway, exploration episodes
    ("trust-history-demo", "trust", "history", 6),
    ("trust-summary-demo", "trust", "summary", 6),
    ("snake-history-demo", "snake", "history", 3),
    ("snake-summary-demo", "snake", "summary", 3),
    ("minesweeper-none-demo", "minesweeper", "none", 3),
)
FORK_SOURCE_RUN, FORK_INDEX, FORK_STEP = "trust-history-demo", 2, 4


# ----- determinism ------------------------------------------------------------------------------
def make_deterministic(record_start: int = 1) -> None:
    """Fixed ids for play episodes and store records, and a fake clock for call latencies."""
    import s3gym_tui.engine.llm as llm
    import s3gym_tui.engine.play as play
    import importlib
    import pkgutil

    import s3gym_tui.store as store_package

    play_ids = itertools.count(1)
    play.uuid = types.SimpleNamespace(uuid4=lambda: types.SimpleNamespace(hex=f"{next(play_ids):010d}"))
    record_ids = itertools.count(record_start)

    def new_id(prefix: str) -> str:
        return f"{prefix}-{next(record_ids):04d}"

    # the repositories import store.connection's _new_id by name: each module's copy is replaced
    for info in pkgutil.iter_modules(store_package.__path__):
        module = importlib.import_module(f"s3gym_tui.store.{info.name}")
        if hasattr(module, "_new_id"):
            module._new_id = new_id
    clock = itertools.count()
    llm.time = types.SimpleNamespace(perf_counter=lambda: next(clock) * 0.012)


def fix_times(path: Path) -> None:
    """Every stored time becomes a fixed, plausible one (in insertion order)."""
    conn = sqlite3.connect(path)
    with conn:
        for table, cols in (("runs", ("created_at",)), ("episodes", ("started_at", "finished_at")),
                            ("steps", ("created_at",)), ("summaries", ("created_at",))):
            for col in cols:
                conn.execute(f"UPDATE {table} SET {col} = strftime('%Y-%m-%dT%H:%M:%S.000+00:00', "
                             f"'2026-11-20 09:00:00', '+' || (rowid * 3) || ' minutes') "
                             f"WHERE {col} IS NOT NULL")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


# ----- the database -------------------------------------------------------------------------------
async def build_db(path: Path) -> dict:
    from s3gym_tui.engine.llm import CallSettings
    from s3gym_tui.engine.play import fork_session
    from s3gym_tui.engine.visibility import Borrow
    from s3gym_tui.engine.runner import ProtocolRunner, explore_episode_id
    from s3gym_tui.models import RunConfig
    from s3gym_tui.store import Store

    store = Store(path)
    for run_id, game, pathway, episodes in RUNS:
        run = store.runs.create_run(RunConfig(model=f"scripted/{game}", game=game, pathway=pathway,
                                              explore_episodes=episodes, eval_every=3, eval_episodes=2),
                                    run_id=run_id, note=f"{game} {pathway} (scripted reference player)")
        await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()
    # a person curates the Trust summary: two edits and a veto
    versions = store.summaries.list("trust-summary-demo")
    latest = versions[-1]
    edited = store.summaries.edit_summary(
        latest.id, retain=latest.retain + "\n- Collaborate while the opponent collaborates.",
        avoid=latest.avoid + "\n- Do not cheat twice in a row: it ends the trust.",
        next=latest.next, author="human:alice")
    store.summaries.edit_summary(edited.id, retain=edited.retain, avoid=edited.avoid,
                                 next="Probe once with a cheat in round 3, then mirror the opponent.",
                                 author="human:bob")
    if len(versions) > 1:
        store.summaries.update_summary_status(versions[0].id, "vetoed", author="human:alice")
    # a fork: the History episode from step 4, continued with Summary experience
    source = explore_episode_id(FORK_SOURCE_RUN, FORK_INDEX)
    session = fork_session(store, source, FORK_STEP, CallSettings(model="scripted/trust", backoff_base_s=0),
                           "summary", Borrow(run_id="trust-summary-demo"))
    await session.play()
    store.close()
    fix_times(path)
    return {"fork": session.episode.id, "fork_source": source}


# ----- driving the app ----------------------------------------------------------------------------
async def press(pilot, *keys: str) -> None:
    for key in keys:
        await pilot.press(key)
        await settle(pilot)


Navigate = Callable[..., Awaitable[None]]


async def nav_home(pilot, ids) -> None:
    table = pilot.app.screen.query_one("#runs")
    table.move_cursor(row=table.get_row_index("trust-summary-demo"))


async def nav_play(pilot, ids) -> None:
    pilot.app.open_play(game="trust", mode="explore", seed=0, model="scripted/trust", pathway="history",
                        source_run_id="trust-history-demo")
    await settle(pilot)
    await press(pilot, "n", "n", "n", "t", *"cheat", "enter", "p", "n", "e")
    dialog = pilot.app.screen
    dialog.query_one("Input").value = "cheat"  # a person edits the model's proposal
    await press(pilot, "enter", "p", "n", "n")


async def nav_play_proposal(pilot, ids) -> None:
    pilot.app.open_play(game="snake", mode="explore", seed=0, model="scripted/snake", pathway="summary",
                        source_run_id="snake-summary-demo")
    await settle(pilot)
    await press(pilot, "p", "n", "a", "n", "a", "n", "a", "n")


async def nav_fork(pilot, ids) -> None:
    pilot.app.open_episode(ids["fork"])
    await settle(pilot)
    await press(pilot, *["right"] * (FORK_STEP + 1))


async def nav_play_chess(pilot, ids) -> None:
    pilot.app.open_play(game="chess", mode="explore", seed=0, model="scripted/chess")
    await settle(pilot)
    await press(pilot, "n", "n")


async def nav_run_dialog(pilot, ids) -> None:
    screen = pilot.app.screen
    game_list = screen.query_one("#game-list")
    game_list.highlighted = [o.id for o in game_list.options].index("snake")
    screen.query_one("#model-select").value = "scripted/snake"
    screen.query_one("#pathway").value = "history"
    await settle(pilot)
    await press(pilot, "f6")


async def nav_help(pilot, ids) -> None:
    await press(pilot, "question_mark")


async def nav_protocol(pilot, ids) -> None:
    pilot.app.open_protocol("trust-summary-demo")


async def nav_summaries(pilot, ids) -> None:
    pilot.app.open_summaries("trust-summary-demo")


async def nav_compare(pilot, ids) -> None:
    from s3gym_tui.engine.runner import eval_episode_id

    pilot.app.open_compare(eval_episode_id("trust-history-demo", 6, 0), eval_episode_id("trust-summary-demo", 6, 0))


async def nav_pairs(pilot, ids) -> None:
    pilot.app.open_pairs()


async def nav_report(pilot, ids) -> None:
    pilot.app.open_report(["trust-history-demo", "trust-summary-demo", "snake-history-demo",
                           "snake-summary-demo"])


async def nav_search(pilot, ids) -> None:
    from s3gym_tui.store import Store

    with Store(pilot.app.db_path) as store:  # a person's mark, found among the results
        episode = store.episodes.list("trust-summary-demo", phase="eval")[0]
        store.annotations.add_annotation("step", "mistake", author="human:alice", episode_id=episode.id, step_index=1,
                                         note="walked into the opponent's grudge", correction="collaborate")
    await press(pilot, "slash")
    pilot.app.screen.query_one("#search-input").value = "opponent cheat game:trust phase:eval"
    await press(pilot, "enter")
    await settle(pilot)
    await press(pilot, "down")


CREDIT_SOURCE, CREDIT_FORK_AT = "trust-summary-demo-c006-e0", 2


def steered_fork(db: Path) -> str:
    """A person forks an evaluation episode after two steps and collaborates to the end, stating no
    self-score: a sibling of seed 1000000 whose self-judged return is below the others' (so they are
    its successful siblings: the PI's sources). Returns its id."""
    import s3gym_tui.engine.play as play
    from s3gym_tui.engine.llm import CallSettings
    from s3gym_tui.engine.play import fork_session
    from s3gym_tui.store import Store

    play.uuid = types.SimpleNamespace(uuid4=lambda: types.SimpleNamespace(hex="steered001"))  # not the demo fork's
    with Store(db) as store:
        session = fork_session(store, CREDIT_SOURCE, CREDIT_FORK_AT,
                               CallSettings(model="scripted/trust", backoff_base_s=0))
        while not session.done:
            session.commit(None, action="collaborate", actor="human")
        return session.episode.id


async def computed_credit(pilot, episode_ids: list[str]) -> None:
    """Open the credit view and compute it the way a person does: c, the offered open scorer (the
    embedded model: the scripted player cannot score), enter; the scripted analyzer writes the PI."""
    pilot.app.open_credit(episode_ids, at_step=CREDIT_FORK_AT)
    await settle(pilot)
    await press(pilot, "c")
    await press(pilot, "enter")
    await settle(pilot)


async def nav_credit(pilot, ids) -> None:
    await computed_credit(pilot, [steered_fork(pilot.app.db_path)])


async def nav_credit_compare(pilot, ids) -> None:
    fork = steered_fork(pilot.app.db_path)
    pilot.app.open_compare(CREDIT_SOURCE, fork)
    await settle(pilot)
    await press(pilot, *["right"] * CREDIT_FORK_AT, "w", "c", "enter")
    await settle(pilot)


async def _with_aspire(pilot) -> None:
    """ASPIRE runs in this shot's copy only (the scripted operator's run makes ordinary runs too, which
    the other shots must not list): the fixture's runs and a whole scripted-operator run (tests/ui/aspire_data)."""
    from tests.ui.aspire_data import build_scripted_aspire, fill_aspire, fix_aspire_times

    from s3gym_tui.store import Store

    path = pilot.app.db_path
    with Store(path) as store:
        fill_aspire(store)
    fix_aspire_times(path)
    await asyncio.to_thread(build_scripted_aspire, path)  # the controller runs its own event loop


async def nav_aspire(pilot, ids) -> None:
    await _with_aspire(pilot)
    pilot.app.open_aspire()
    await settle(pilot)


async def nav_aspire_marks(pilot, ids) -> None:
    from tests.ui.aspire_data import FINISHED

    await _with_aspire(pilot)
    pilot.app.open_aspire(FINISHED)
    await settle(pilot)
    await press(pilot, "c", "up")  # the sft candidate score-gated retention rolled back


async def nav_training(pilot, ids) -> None:
    """The Trust History run's dataset and a GRPO training from it with a format warm start, its rows
    written directly (checkpoints, losses, evaluation episodes: no model needed), in this shot's copy only."""
    from s3gym_tui.models import Checkpoint, Episode
    from s3gym_tui.store import LossPoint, Store, Training, TrainingCheckpoint
    from s3gym_tui.training.dataset import build_dataset
    from s3gym_tui.training.evaluate import create_eval_run

    source_id, tid = "trust-history-demo", "trust-grpo-demo"
    means = {0: 0.0, 1: 3.0, 2: 3.0}  # the bundled model's figures in benchmarks/train_learns.py
    with Store(pilot.app.db_path) as store:
        await build_dataset(store, source_id, threshold=1.5, correction="reference")
        source = store.runs.get_run(source_id)
        training = store.trainings.add_training(Training(
            id=tid, method="grpo", reward="oracle", games=("trust",), source_run=source_id, base="smollm2-135m",
            epochs=2, steps=4, examples=16, status="finished",
            settings={"grpo": {"level": "step", "sampling": "mixed", "format_weight": 1.0, "warm_start": 16,
                               "warm_start_epochs": 2}},
            metrics={"warm_start_examples": 16, "warm_start_first_loss": 2.59, "warm_start_last_loss": 0.21}))
        for x in means:
            store.trainings.set_training_checkpoint(TrainingCheckpoint(training_id=tid, x=x,
                                                                       model=f"trained/{tid}/{x}"))
        flat = {"frac_reward_zero_std": 1.0, "reward_std": 0.0, "parsed_replies": 1.0, "no_signal": 1.0}
        store.trainings.add_losses(tid, [LossPoint(step=i, loss=2.6 - 0.075 * i, phase="warm-start")
                                         for i in range(1, 33)]
                                   + [LossPoint(step=i, loss=0.0, phase="grpo", metrics=flat) for i in range(1, 5)])
        run = create_eval_run(store, training, source.config, list(means), eval_episodes=1, run_id=tid)
        for x, mean in means.items():
            episode = Episode(id=f"{run.id}-c{x}", run_id=run.id, game="trust", mode="eval", phase="eval",
                              seed=run.config.eval_seed(0), index=0, checkpoint=x, model=f"trained/{tid}/{x}",
                              pathway="trained")
            store.episodes.add_episode(episode)
            store.episodes.finish_episode(episode.id, mean)
            store.checkpoints.add_checkpoint(Checkpoint(run_id=run.id, x=x, episode_ids=(episode.id,), scores=(mean,)))
        store.runs.set_run_status(run.id, "finished")
    pilot.app.open_training(source_id)
    await settle(pilot)


# name -> (screen module that must exist, navigation, settings overrides[, terminal size])
SHOTS: dict[str, tuple] = {
    "home": ("home", nav_home, {}),
    "play": ("play", nav_play, {}),
    "play_light": ("play", nav_play, {"theme": "light"}),
    "play_proposal": ("play", nav_play_proposal, {}),
    "fork": ("play", nav_fork, {}),
    "play_chess": ("play", nav_play_chess, {}),
    "run_dialog": ("run_dialog", nav_run_dialog, {}),
    "help": ("help", nav_help, {}),
    "protocol": ("protocol", nav_protocol, {}),
    "summaries": ("summaries", nav_summaries, {}),
    "compare": ("compare", nav_compare, {}),
    "pairs": ("pairs", nav_pairs, {}),
    "report": ("report", nav_report, {}),
    "search": ("search", nav_search, {}),
    "aspire": ("aspire", nav_aspire, {}),
    "aspire_marks": ("aspire", nav_aspire_marks, {}),
    "training-80x24": ("training", nav_training, {}, (80, 24)),
    "training-120x40": ("training", nav_training, {}, (120, 40)),
    "training-200x50": ("training", nav_training, {}, (200, 50)),
    "credit-80x24": ("credit", nav_credit, {}, (80, 24)),
    "credit-120x40": ("credit", nav_credit, {}, (120, 40)),
    "credit-200x50": ("credit", nav_credit, {}, (200, 50)),
    "credit_compare-120x40": ("credit", nav_credit_compare, {}, (120, 40)),
}


async def shoot(name: str, db: Path, ids: dict, navigate: Navigate, overrides: dict, size=SIZE) -> Path:
    from s3gym_tui.app import S3GymApp
    from s3gym_tui.config import Settings

    settings = Settings(default_model="scripted/trust", theme="dark", human_name="alice").model_copy(
        update=overrides)
    app = S3GymApp(db_path=db, settings=settings)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        await navigate(pilot, ids)
        await settle(pilot)
        app.clear_notifications()
        await pilot.pause()
        app.save_screenshot(filename=f"{name}.svg", path=str(OUT))
    return OUT / f"{name}.svg"


def preserve_spaces(svg: Path) -> None:
    text = svg.read_text(encoding="utf-8")
    if 'xml:space="preserve"' not in text.split(">", 1)[0]:
        text = text.replace("<svg ", '<svg xml:space="preserve" ', 1)
        svg.write_text(text, encoding="utf-8")


def to_png(svg: Path) -> Optional[Path]:
    converter = shutil.which("rsvg-convert")
    if converter is None:
        print("warning: rsvg-convert not found (apt-get install -y librsvg2-bin fonts-firacode); SVG only")
        return None
    png = svg.with_suffix(".png")
    subprocess.run([converter, str(svg), "-o", str(png)], check=True)
    return png


def main(argv: Optional[list[str]] = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--only", default="", help="comma-separated screenshot names: " + ", ".join(SHOTS))
    ap.add_argument("--db", type=Path, default=None, help="where to build the database (kept)")
    args = ap.parse_args(argv)
    wanted = [n.strip() for n in args.only.split(",") if n.strip()] or list(SHOTS)
    unknown = [n for n in wanted if n not in SHOTS]
    if unknown:
        ap.error(f"unknown screenshot(s): {', '.join(unknown)}")
    make_deterministic()
    tmp = None
    if args.db is None:
        tmp = tempfile.TemporaryDirectory(prefix="s3gym-shots-")
        args.db = Path(tmp.name) / "showcase.db"
    if args.db.exists():
        ap.error(f"{args.db} exists; choose a new path")
    ids = asyncio.run(build_db(args.db))
    made, skipped = [], []
    for name in wanted:
        module, navigate, overrides, *size = SHOTS[name]
        if importlib.util.find_spec(f"s3gym_tui.screens.{module}") is None:
            print(f"warning: s3gym_tui/screens/{module}.py does not exist yet; skipping {name}")
            skipped.append(name)
            continue
        copy = args.db.with_name(f"{name}-{args.db.name}")  # each shot starts from the same state
        shutil.copy(args.db, copy)
        make_deterministic(record_start=5000)  # the same ids and latencies whatever ran before
        try:
            svg = asyncio.run(shoot(name, copy, ids, navigate, overrides, *size))
        except Exception as exc:  # noqa: BLE001 - one broken screen must not stop the others
            print(f"warning: {name} failed: {type(exc).__name__}: {exc}")
            skipped.append(name)
            continue
        finally:
            for suffix in ("", "-wal", "-shm"):
                Path(f"{copy}{suffix}").unlink(missing_ok=True)
        preserve_spaces(svg)
        png = to_png(svg)
        made.append(name)
        print(f"{name:15s} {svg.relative_to(ROOT)}" + (f"  {png.relative_to(ROOT)}" if png else ""))
    print(f"{len(made)} screenshot(s) written" + (f"; skipped: {', '.join(skipped)}" if skipped else ""))
    if tmp is not None:
        tmp.cleanup()
    return 1 if skipped and not made else 0


if __name__ == "__main__":
    sys.exit(main())
