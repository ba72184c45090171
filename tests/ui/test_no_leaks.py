"""Closed screens are freed: nothing (a signal subscription, a watcher of the app) keeps their
widgets alive.

Before the widgets unsubscribed from Textual's signals on unmount (and the title bar stopped
watching the app), every screen opened left widgets in memory (a Play screen ~10,000 objects),
and each garbage collection walked them all. A screen whose last act was a thread worker stayed
referenced by that pool thread's context until the thread ran another job (widgets/thread_work.py
lets go of it): the help, whose text is made once, stayed alive for good. Every opening is checked,
the last one of each screen too."""

from __future__ import annotations

import gc
import weakref

from s3gym_tui.app import S3GymApp
from s3gym_tui.config import Settings
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.title_bar import TitleBar

from tests.ui.settle import settle

SETTINGS = Settings(default_model="scripted/trust", theme="dark", human_name="t")


async def test_every_closed_screen_is_freed(demo_db):
    path, ids = demo_db
    app = S3GymApp(db_path=path, settings=SETTINGS)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        store = app.store
        episodes = [e.id for e in store.episodes.list(ids["trust-history"]) if e.phase == "eval"][:2]
        assert len(episodes) == 2
        closed: list[weakref.ref] = []
        run = ids["trust-summary"]
        openers = (lambda: app.open_episode(episodes[0]),
                   lambda: app.open_compare(*episodes),
                   lambda: app.open_play(game="trust", mode="explore", seed=3, model="scripted/trust"),
                   lambda: app.open_protocol(run), lambda: app.open_summaries(run),
                   lambda: app.open_report([ids["trust-history"], run]), app.open_pairs,
                   lambda: app.open_training(run), app.open_sweeps, app.open_aspire, app.action_help)
        for opener in openers:
            for _ in range(3):
                opener()
                await settle(pilot)
                screen = app.screen
                assert [*screen.query(TitleBar), *screen.query(KeyHints)] or type(screen).__name__ == "HelpScreen"
                closed += [weakref.ref(node) for node in screen.walk_children(with_self=True)]
                del screen
                app.pop_screen()
                await settle(pilot)
        gc.collect()
        alive = [ref() for ref in closed if ref() is not None]
        assert alive == [], f"{len(alive)} nodes of closed screens are still alive: {alive[:4]}"
