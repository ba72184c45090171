"""A screen's first frame is the finished screen: nothing it shows changes once it has settled.

Widgets that made their content in a Resize handler (the wrapped prompt, the score strip's bars, a
table scrolled to its cursor) drew the first frame without it, and a later frame put it in: the
person watching saw the screen change under them, and every opening cost a second frame. Here
every frame the app renders is replayed onto a model of the terminal's cells (the benchmark's
ScreenCells): the cells after the first frame of the new screen must be the cells once it settled,
scrollbars included (Textual showed a bar one layout after the content that needs it; the app's
screens settle such layout requests before they draw, widgets/textual_patches.py)."""

from __future__ import annotations

import pytest

from benchmarks._screen import ScreenCells
from s3gym_tui.app import S3GymApp
from s3gym_tui.config import Settings
from s3gym_tui.store import Store

from tests.ui.frames import record_frames
from tests.ui.settle import settle

SETTINGS = Settings(default_model="scripted/trust", theme="dark", human_name="t")


def _openers(app, ids):
    store = app.store
    history = [e.id for e in store.episodes.list(ids["trust-history"]) if e.phase == "eval"]
    summary = [e.id for e in store.episodes.list(ids["trust-summary"]) if e.phase == "eval"]
    snake = [e.id for e in store.episodes.list(ids["snake-summary"]) if e.phase == "eval"]
    return {
        "stored episode": lambda: app.open_episode(history[0]),
        "stored snake episode": lambda: app.open_episode(snake[0]),
        "compare": lambda: app.open_compare(history[0], summary[0]),
        "summaries": lambda: app.open_summaries(ids["trust-summary"]),
        "summaries, 30 versions": lambda: app.open_summaries(ids["snake-summary"]),
        "protocol": lambda: app.open_protocol(ids["trust-summary"]),
    }


@pytest.mark.parametrize("size", [(120, 40), (80, 24)])
@pytest.mark.parametrize("which", ["stored episode", "stored snake episode", "compare", "summaries",
                                   "summaries, 30 versions", "protocol"])
async def test_the_first_frame_of_a_screen_is_the_settled_screen(demo_db, size, which):
    path, ids = demo_db
    if which == "summaries, 30 versions":  # the newest (selected) version is far below the first rows
        with Store(path) as store:
            have = len(store.summaries.list(ids["snake-summary"]))
            for k in range(have, 30):
                store.summaries.add_summary(ids["snake-summary"], f"retain {k}", f"avoid {k}", f"next {k}",
                                            author="human:t")
    app = S3GymApp(db_path=path, settings=SETTINGS)
    async with app.run_test(size=size) as pilot:
        await settle(pilot)
        frames = record_frames(app)  # (the top screen when drawn, update)
        home = app.screen
        await pilot.pause()
        cells = ScreenCells(app.console)
        for _, update in frames:  # Home as it is on the terminal
            cells.apply(update)
        frames.clear()
        _openers(app, ids)[which]()
        await settle(pilot)
        for _ in range(10):  # frames that timers or idle handlers still owe
            await pilot.pause(0.02)
        opened = app.screen
        assert opened is not home
        shown = [update for screen, update in frames if screen is opened]
        assert shown, "the new screen was never drawn"
        cells.apply(shown[0])
        first = dict(cells.cells)
        later = [cells.apply(update) for update in shown[1:]]
        changed = {key for key, cell in cells.cells.items() if first.get(key) != cell}
        assert not changed, (f"{len(changed)} cells changed after the first frame (changes per later frame: "
                             f"{later}); first changed row: "
                             f"{''.join(cells.cells.get((x, min(y for _, y in changed)), (' ',))[0] for x in range(size[0]))!r}")
