"""Summaries screen: edit, veto, pin (and no new summaries while pinned), diff, jump, test a version."""

from __future__ import annotations

import asyncio
import contextlib
import statistics

from textual.widgets import DataTable, TextArea

from s3gym_tui.app import S3GymApp
from s3gym_tui.engine import events as ev
from s3gym_tui.engine.compare import summary_diff
from s3gym_tui.engine.runner import ProtocolRunner
from s3gym_tui.messages import SummaryEdited
from s3gym_tui.models import RunConfig
from s3gym_tui.screens.analysis_common import fmt
from s3gym_tui.screens.summaries import MAX_SECTION_CHARS, SummariesScreen, SummaryEditor
from s3gym_tui.widgets.summary_diff import SummaryDiff


async def open_summaries(app, pilot, run_id) -> SummariesScreen:
    app.open_summaries(run_id)
    await pilot.pause()
    screen = app.screen
    assert isinstance(screen, SummariesScreen)
    return screen


async def select_version(pilot, screen: SummariesScreen, version: int) -> None:
    table = screen.query_one("#sum-versions", DataTable)
    table.focus()
    row = [s.version for s in screen.versions].index(version)
    table.move_cursor(row=row)
    await pilot.pause()
    assert screen.selected().version == version


def cell(screen: SummariesScreen, summary_id: str, column: str) -> str:
    table = screen.query_one("#sum-versions", DataTable)
    return str(table.get_cell(summary_id, column))


def current_marker_row(screen: SummariesScreen) -> list[str]:
    return [s.id for s in screen.versions if cell(screen, s.id, "use") == "▶"]


async def test_edit_saves_a_new_human_version_used_next(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_summaries(app, pilot, run_id)
        versions = list(screen.versions)
        assert [s.version for s in versions] == list(range(1, len(versions) + 1))
        assert screen.query_one("#sum-versions", DataTable).row_count == len(versions)
        await select_version(pilot, screen, 2)
        await pilot.press("e")
        await pilot.pause()
        editor = app.screen
        assert isinstance(editor, SummaryEditor)
        assert editor.query_one("#edit-avoid", TextArea).text == versions[1].avoid
        editor.query_one("#edit-avoid", TextArea).load_text("Never cheat twice in a row.")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is screen
        stored = app.store.summaries.list(run_id)
        assert len(stored) == len(versions) + 1
        new = stored[-1]
        assert new.author == "human:tester" and new.parent_version == 2 and new.created_at
        assert (new.retain, new.avoid, new.next) == (versions[1].retain, "Never cheat twice in a row.",
                                                     versions[1].next)
        assert app.store.summaries.current_summary(run_id).id == new.id
        assert current_marker_row(screen) == [new.id]
        assert cell(screen, new.id, "author") == "human:tester"
        assert cell(screen, new.id, "time") == new.created_at[5:16].replace("T", " ")  # MM-DD HH:MM (UTC)
        assert screen.selected().id == new.id
        assert "Never cheat twice in a row." in str(screen.query_one("#sum-detail").content)


async def test_empty_and_enormous_edits_are_refused(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_summaries(app, pilot, run_id)
        count = len(screen.versions)
        await pilot.press("e")
        await pilot.pause()
        editor = app.screen
        for key in ("retain", "avoid", "next"):
            editor.query_one(f"#edit-{key}", TextArea).load_text("  \n ")
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is editor  # still editing
        error = editor.query_one("#editor-error")
        assert error.display and "empty" in str(error.render())  # said in the editor, not over it
        editor.query_one("#edit-retain", TextArea).load_text("x" * (MAX_SECTION_CHARS + 1))
        await pilot.press("ctrl+s")
        await pilot.pause()
        assert app.screen is editor
        assert "limit" in str(error.render())
        await pilot.press("escape")
        await pilot.pause()
        assert app.screen is screen
        assert len(app.store.summaries.list(run_id)) == count
        # the screen's own check refuses them too (not only the editor)
        assert screen.save_edit("", " ", "\n") is None
        assert len(app.store.summaries.list(run_id)) == count


async def test_veto_falls_back_and_unveto_restores(demo_db, settings, monkeypatch):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_summaries(app, pilot, run_id)
        posted = []
        post = screen.post_message
        monkeypatch.setattr(screen, "post_message", lambda m: (posted.append(m), post(m))[1])
        latest, previous = screen.versions[-1], screen.versions[-2]
        assert current_marker_row(screen) == [latest.id]
        await select_version(pilot, screen, latest.version)
        await pilot.press("v")
        await pilot.pause()
        assert app.store.summaries.get_summary(latest.id).status == "vetoed"
        assert app.store.summaries.current_summary(run_id).id == previous.id
        assert current_marker_row(screen) == [previous.id]
        assert cell(screen, latest.id, "status") == "vetoed"
        assert f"in force: v{previous.version}" in str(screen.query_one("#sum-status").content)
        await pilot.press("v")
        await pilot.pause()
        assert app.store.summaries.get_summary(latest.id).status == "active"
        assert current_marker_row(screen) == [latest.id]
        edited = [(m.summary.id, m.summary.status) for m in posted if isinstance(m, SummaryEdited)]
        assert edited == [(latest.id, "vetoed"), (latest.id, "active")]


async def test_pin_keeps_the_version_and_stops_new_summaries_until_unpinned(demo_db, settings):
    path, _ = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        store = app.store
        run = store.runs.create_run(RunConfig(model="scripted/trust", game="trust", pathway="summary",
                                              explore_episodes=6, eval_every=3, eval_episodes=1))
        # run part of it: stop after exploration episode 2 is done
        task: asyncio.Task

        def on_event(event):
            if isinstance(event, ev.EpisodeDone) and event.episode.phase == "explore" and event.episode.index == 2:
                task.cancel()

        task = asyncio.create_task(ProtocolRunner(store, run, on_event, backoff_base_s=0).run_protocol())
        with contextlib.suppress(asyncio.CancelledError):
            await task
        assert store.runs.get_run(run.id).status == "stopped"
        before = store.summaries.list(run.id)
        assert len(before) >= 2
        screen = await open_summaries(app, pilot, run.id)
        await select_version(pilot, screen, 1)
        await pilot.press("p")
        await pilot.pause()
        pinned = store.summaries.get_summary(before[0].id)
        assert pinned.pinned and store.summaries.current_summary(run.id).id == pinned.id
        assert current_marker_row(screen) == [pinned.id] and cell(screen, pinned.id, "pin") == "pinned"
        # a couple more exploration episodes (the rest of the run): no new model summary is written
        await ProtocolRunner(store, run, backoff_base_s=0).run_protocol()
        assert store.runs.get_run(run.id).status == "finished"
        assert [s.id for s in store.summaries.list(run.id)] == [s.id for s in before]
        later = [e for e in store.episodes.list(run.id) if e.phase == "explore" and e.index >= 3]
        assert len(later) == 3 and all(e.summary_id == pinned.id for e in later)
        await select_version(pilot, screen, 1)
        await pilot.press("p")
        await pilot.pause()
        assert not store.summaries.get_summary(pinned.id).pinned
        assert store.summaries.current_summary(run.id).id == before[-1].id
        assert current_marker_row(screen) == [before[-1].id]


async def test_vetoed_version_cannot_be_pinned(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_summaries(app, pilot, run_id)
        await select_version(pilot, screen, 3)
        await pilot.press("v", "p")
        await pilot.pause()
        assert not app.store.summaries.get_summary(screen.versions[2].id).pinned
        assert any("un-veto" in n.message for n in app._notifications)


async def test_diff_between_two_marked_versions(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_summaries(app, pilot, run_id)
        v2, v5 = screen.versions[1], screen.versions[4]
        await select_version(pilot, screen, 5)
        await pilot.press("m")
        await select_version(pilot, screen, 2)
        await pilot.press("d")
        await pilot.pause()
        diff = screen.query_one(SummaryDiff)
        assert screen.has_class("-diff") and diff.display
        assert list(diff.lines) == summary_diff(v2, v5)  # older -> newer, whatever the order marked
        changed = [line for line in diff.lines if line[:1] in "+-" and not line.startswith(("+++", "---"))]
        assert changed and any(line.startswith("-") for line in changed) and any(
            line.startswith("+") for line in changed)
        rendered = str(diff.content)
        assert all(line in rendered for line in changed)
        # without a mark: the diff against the previous version
        await pilot.press("m")  # v2 is selected: the mark moves from v5 to v2
        await pilot.press("m")  # ...and a second press clears it
        await select_version(pilot, screen, 5)
        assert not screen.has_class("-diff")  # a new selection leaves the diff
        await pilot.press("d")
        await pilot.pause()
        assert list(diff.lines) == summary_diff(screen.versions[3], v5)


async def test_source_episode_opens_the_episode(demo_db, settings, monkeypatch):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    app = S3GymApp(db_path=path, settings=settings)
    opened: list[str] = []
    monkeypatch.setattr(app, "open_episode", opened.append)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_summaries(app, pilot, run_id)
        await select_version(pilot, screen, 3)
        sources = screen.query_one("#sum-sources", DataTable)
        assert sources.row_count == len(screen.versions[2].source_episode_ids) == 3
        sources.focus()
        await pilot.press("down", "enter")
        await pilot.pause()
        assert opened == [screen.versions[2].source_episode_ids[1]]
        await pilot.press("o")
        assert opened[-1] == screen.versions[2].source_episode_ids[1]


async def test_test_this_summary_shows_the_mean_score(demo_db, settings):
    path, ids = demo_db
    run_id = ids["trust-summary"]
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_summaries(app, pilot, run_id)
        await select_version(pilot, screen, 2)
        target = screen.selected()
        await pilot.press("t")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        played = [e for e in app.store.episodes.list() if e.run_id is None and e.summary_id == target.id]
        run = app.store.runs.get_run(run_id)
        assert len(played) == run.config.eval_episodes
        assert sorted(e.seed for e in played) == [run.config.eval_seed(j) for j in range(run.config.eval_episodes)]
        assert all(e.mode == "eval" and e.status == "finished" for e in played)
        expected = fmt(statistics.fmean(e.score for e in played), 2)
        assert cell(screen, target.id, "test") == expected
        assert any(expected in n.message for n in app._notifications)
