"""Curation on the Summaries screen says what the agent will really use, and who did it.

Each edit, veto, unveto, pin and unpin is made with keys on the screen; the message is read from
the notification, the curation log and the versions from the store, and the run is then resumed to
check that the state the message named used what the message said (the runner's own rule)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import pwd
import sqlite3

from textual.widgets import DataTable, TextArea

from s3gym_tui.app import S3GymApp
from s3gym_tui.authors import author_kind, author_problem
from s3gym_tui.config import Settings
from s3gym_tui.engine import events as ev
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.models import RunConfig, explore_episode_id
from s3gym_tui.screens.summaries import SummariesScreen, SummaryEditor
from tests.ui.test_summaries import open_summaries, select_version

TESTER = "human:tester"  # the settings fixture's human_name


async def partial_summary_run(store):
    """A Summary run stopped after exploration episode 3 of 9: versions written, states to come."""
    run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="summary",
                                          explore_episodes=9, eval_every=3, eval_episodes=1))
    task: asyncio.Task

    def on_event(event):
        if isinstance(event, ev.EpisodeDone) and event.episode.phase == "explore" and event.episode.index == 3:
            task.cancel()

    task = asyncio.create_task(ProtocolRunner(store, run, on_event, backoff_base_s=0).run_protocol())
    with contextlib.suppress(asyncio.CancelledError):
        await task
    assert store.runs.get_run(run.id).status == "stopped"
    return run


async def press_on(pilot, screen, version: int, key: str, notes: list[str]) -> str:
    await select_version(pilot, screen, version)
    before = len(notes)
    await pilot.press(key)
    await pilot.pause()
    assert len(notes) == before + 1, notes[before:]
    return notes[-1]


async def edit_with_keys(pilot, app, screen, version: int, notes: list[str], avoid: str) -> str:
    await select_version(pilot, screen, version)
    await pilot.press("e")
    await pilot.pause()
    editor = app.screen
    assert isinstance(editor, SummaryEditor)
    editor.query_one("#edit-avoid", TextArea).load_text(avoid)
    before = len(notes)
    await pilot.press("ctrl+s")
    await pilot.pause()
    assert app.screen is screen and len(notes) == before + 1
    return notes[-1]


async def test_vetoing_a_version_while_another_is_pinned_names_the_pinned_one(demo_db, settings, monkeypatch):
    path, _ = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    notes: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        monkeypatch.setattr(app, "notify", lambda message, **kw: notes.append(str(message)))
        store = app.store
        run = await partial_summary_run(store)
        versions = store.summaries.list(run.id)
        assert len(versions) >= 2
        v1, v2 = versions[0], versions[1]
        x = store.summaries.next_state(run.id)
        assert x is not None and x > 0
        screen = await open_summaries(app, pilot, run.id)
        said = await press_on(pilot, screen, v2.version, "p", notes)
        assert f"will use pinned v{v2.version} as is" in said
        said = await press_on(pilot, screen, v1.version, "v", notes)
        assert said.startswith(f"v{v1.version} vetoed. From state x={x}, when the run resumes: "
                               f"exploration episode #{x + 1}")
        assert f"will use pinned v{v2.version} as is" in said, said
        assert f"v{v1.version} is vetoed: the agent skips it" in said
        assert "fall back" not in said
        log = store.summaries.summary_actions(run.id)
        assert [(a["action"], a["summary_id"], a["author"], a["effective_from_x"]) for a in log] == [
            ("pin", v2.id, TESTER, x), ("veto", v1.id, TESTER, x)]
    # what the runner does when the run resumes: state x plays with pinned v2, as said
    with app.store.__class__(path) as store:
        await ProtocolRunner(store, store.runs.get_run(run.id), backoff_base_s=0).run_protocol()
        assert store.episodes.get_episode(explore_episode_id(run.id, x)).summary_id == v2.id
        assert [s.id for s in store.summaries.list(run.id)] == [s.id for s in versions]  # none written


async def test_every_curation_says_what_the_next_state_will_use(demo_db, settings, monkeypatch):
    path, _ = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    notes: list[str] = []
    async with app.run_test(size=(120, 40)) as pilot:
        monkeypatch.setattr(app, "notify", lambda message, **kw: notes.append(str(message)))
        store = app.store
        run = await partial_summary_run(store)
        model_versions = store.summaries.list(run.id)
        n = model_versions[-1].version
        x = store.summaries.next_state(run.id)
        screen = await open_summaries(app, pilot, run.id)
        status = str(screen.query_one("#sum-status").content)
        assert f"state x={x} uses a summary the model writes from v{n}" in status

        said = await edit_with_keys(pilot, app, screen, n, notes, "Never cheat twice.")
        assert said.startswith(f"Saved v{n + 1} (edited from v{n}). From state x={x}")
        assert said.endswith(f"will use a summary the model writes from v{n + 1}."), said

        said = await press_on(pilot, screen, 1, "p", notes)
        assert said.endswith("will use pinned v1 as is (no new summaries while it is pinned)."), said

        said = await edit_with_keys(pilot, app, screen, n + 1, notes, "Probe once.")
        assert f"will use pinned v1 as is" in said
        assert said.endswith(f"v{n + 2} is not used while v1 is pinned."), said

        said = await press_on(pilot, screen, 1, "p", notes)  # unpin
        assert f"will use a summary the model writes from v{n + 2}." in said
        assert said.endswith(f"v1 is not used: v{n + 2} is newer."), said

        said = await press_on(pilot, screen, n + 2, "v", notes)  # veto the newest
        assert f"will use a summary the model writes from v{n + 1}." in said
        assert said.endswith(f"v{n + 2} is vetoed: the agent skips it."), said

        said = await press_on(pilot, screen, n + 2, "v", notes)  # and restore it
        assert said.endswith(f"will use a summary the model writes from v{n + 2}."), said
        status = str(screen.query_one("#sum-status").content)
        assert f"state x={x} uses a summary the model writes from v{n + 2}" in status

        log = store.summaries.summary_actions(run.id)
        assert [a["action"] for a in log] == ["edit", "pin", "edit", "unpin", "veto", "unveto"]
        assert {a["author"] for a in log} == {TESTER}
        assert {a["effective_from_x"] for a in log} == {x}
        versions = store.summaries.list(run.id)
        assert [s.author for s in versions] == ["model:scripted/trust"] * n + [TESTER, TESTER]
        table = screen.query_one("#sum-versions", DataTable)
        assert [str(table.get_cell(s.id, "author")) for s in versions] == [s.author for s in versions]
    with app.store.__class__(path) as store:  # resumed: state x's summary was written from v(n+2)
        await ProtocolRunner(store, store.runs.get_run(run.id), backoff_base_s=0).run_protocol()
        used = store.summaries.get_summary(store.episodes.get_episode(explore_episode_id(run.id, x)).summary_id)
        assert used.author == "model:scripted/trust" and used.parent_version == n + 2


def test_the_human_name_defaults_to_the_login_name(monkeypatch):
    for var in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.delenv(var, raising=False)
    account = pwd.getpwuid(os.getuid()).pw_name
    assert Settings().human_name == account  # not a made-up "human"
    monkeypatch.setenv("USER", "alice")
    assert Settings().human_name == "alice"
    assert author_problem(f"human:{Settings().human_name}") is None


async def test_rows_from_before_the_author_format_stay_readable(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    conn = sqlite3.connect(path)
    with conn:  # what older versions stored: pins and vetoes by a bare "human"
        first = conn.execute("SELECT id FROM summaries WHERE run_id = ? ORDER BY version LIMIT 1",
                             (run_id,)).fetchone()[0]
        conn.execute("UPDATE summaries SET author = 'human' WHERE id = ?", (first,))
        conn.execute("INSERT INTO summary_actions (run_id, summary_id, action, author, created_at) "
                     "VALUES (?, ?, 'veto', 'human', '2026-01-01T00:00:00+00:00')", (run_id, first))
    conn.close()
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_summaries(app, pilot, run_id)
        assert isinstance(screen, SummariesScreen)
        assert str(screen.query_one("#sum-versions", DataTable).get_cell(first, "author")) == "human"
        assert [a["author"] for a in app.store.summaries.summary_actions(run_id)] == ["human"]
        assert author_kind("human") == "human" and author_kind("model:x") == "model"
        assert author_problem("human") is not None  # read, but no longer written
