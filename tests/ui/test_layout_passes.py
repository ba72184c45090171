"""Opening a screen costs no layout passes that only redraw the same frame.

Textual, as a screen opens: lays it out (ScreenResume), gets the screen's own Resize from that layout
and lays out the new screen and every screen below it again at the same size, and has the mount
awaiter of `push_screen` ask for one more whole layout. textual_patches (patch 1) skips a same-size
relayout when nothing is pending; App.push_screen drops the awaiter's layout request. (A pass that
arranges the screen again before it draws, to settle the scrollbars it made appear, is one pass.)"""

from __future__ import annotations

import pytest
from textual.screen import Screen
from textual.widgets import Static

from s3gym_tui.app import S3GymApp
from s3gym_tui.config import Settings
from s3gym_tui.screens.help import HelpScreen

from tests.ui.settle import settle

SETTINGS = Settings(default_model="scripted/trust", theme="dark", human_name="t")


@pytest.mark.parametrize("which", ["episode", "compare", "summaries", "protocol"])
async def test_opening_a_screen_does_not_lay_out_the_screen_below(demo_db, which, monkeypatch):
    path, ids = demo_db
    layouts: list[Screen] = []
    original = Screen._refresh_layout

    depth = [0]

    def counted(self, size=None, scroll=False):
        if not scroll and not depth[0]:  # a pass, not the settling inside one (textual_patches, patch 2)
            layouts.append(self)
        depth[0] += 1
        try:
            return original(self, size, scroll)
        finally:
            depth[0] -= 1

    monkeypatch.setattr(Screen, "_refresh_layout", counted)
    app = S3GymApp(db_path=path, settings=SETTINGS)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        home = app.screen
        first = [e.id for e in app.store.episodes.list(ids["trust-history"]) if e.phase == "eval"][0]
        other = [e.id for e in app.store.episodes.list(ids["trust-summary"]) if e.phase == "eval"][0]
        open_it = {"episode": lambda: app.open_episode(first), "compare": lambda: app.open_compare(first, other),
                   "summaries": lambda: app.open_summaries(ids["trust-summary"]),
                   "protocol": lambda: app.open_protocol(ids["trust-summary"])}[which]
        layouts.clear()
        open_it()
        await settle(pilot)
        for _ in range(10):
            await pilot.pause(0.02)
        opened = app.screen
        assert opened is not home
        assert home not in layouts  # it was laid out again at the same size, under the new screen
        assert 1 <= layouts.count(opened) <= 3, f"{layouts.count(opened)} layouts of the opened screen"
        app.pop_screen()
        await settle(pilot)
        await pilot.resize_terminal(100, 30)  # a real resize still lays out the screen shown
        await settle(pilot)
        assert home._compositor.size == (100, 30)


async def test_push_screen_still_waits_for_the_screen_to_mount(demo_db):
    path, _ = demo_db
    app = S3GymApp(db_path=path, settings=SETTINGS)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        screen = HelpScreen()
        await app.push_screen(screen)
        assert screen.is_mounted and screen.query(Static)  # its children are mounted too
