"""The ASPIRE screen, the path a person takes: Home, `a`, the newest ASPIRE run followed live (a decision
another process stores appears; hidden scores stay "—" until the run ends, then appear); `l` picks another
run; its timeline with refused and error calls marked; `c` and the arrows choose a candidate, whose
lineage and claimed-vs-measured figures are shown."""

from __future__ import annotations

import pytest

from s3gym_tui.app import S3GymApp
from s3gym_tui.screens.aspire import AspireScreen
from s3gym_tui.screens.dialogs import EpisodePickerDialog
from s3gym_tui.store import Store
from s3gym_tui.widgets.candidate_tree import CandidateTree
from tests.ui.aspire_data import FINISHED, LIVE, build_aspire_db
from tests.ui.settle import settle, until


@pytest.fixture
def aspire_db(tmp_path):
    path = tmp_path / "aspire.db"
    build_aspire_db(path)
    return path


def shown(screen, selector: str) -> str:
    """What a Static shows, as plain text (tables and groups rendered at the widget's width), its
    whitespace runs (wrapped lines) made one space."""
    from rich.console import Console

    widget = screen.query_one(selector)
    console = Console(width=max(widget.size.width, 40), record=True, file=open("/dev/null", "w"))
    console.print(widget.renderable if hasattr(widget, "renderable") else widget.content)
    return " ".join(console.export_text().split())


def timeline(screen) -> list[list[str]]:
    table = screen.query_one("#asp-timeline")
    return [[str(getattr(c, "plain", c)) for c in table.full_row(str(i))] for i in range(table.row_count)]


async def test_home_a_opens_the_newest_run_live_and_hidden_scores_wait_for_the_end(aspire_db, settings):
    app = S3GymApp(db_path=aspire_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        await pilot.press("a")
        screen = await until(pilot, lambda: isinstance(app.screen, AspireScreen) and app.screen.reads and app.screen)
        await settle(pilot)
        assert screen.aspire_id == LIVE and "[interrupted]" in shown(screen, "#asp-status")
        assert [row[1] for row in timeline(screen)] == ["  list_games", "  read_rules", "  practise", "⊘ practise",
                                                        "  write_summary"]
        claims = shown(screen, "#asp-claims")
        assert "— hidden" in claims and "hidden until the run ends" in claims and "0.78" not in claims
        assert "0.78" not in str(screen.query_one(CandidateTree).root.children[0].label)

        with Store(aspire_db) as other:  # the run's own process goes on
            other.aspire.add_aspire_decision(LIVE, tool="validate", arguments={"candidate": "live-memory", "seeds": [31]},
                                             result="1 episode; own judgement: fine", outcome="ok", category="validation",
                                             calls=7, cost=0.001)
        await until(pilot, lambda: len(screen.decisions) == 6, what="the new decision")
        assert timeline(screen)[-1][1] == "  validate" and screen.chosen_decision.idx == 5  # the view follows
        assert "1 episode; own judgement: fine" in shown(screen, "#asp-decision")

        with Store(aspire_db) as other:
            other.aspire.set_aspire_status(LIVE, "finished", "submitted")
        await until(pilot, lambda: "0.78" in shown(screen, "#asp-claims"), what="the hidden base score")
        assert "[finished]" in shown(screen, "#asp-status") and "hidden until" not in shown(screen, "#asp-claims")


async def test_pick_a_run_read_its_timeline_choose_a_candidate_see_lineage_and_claimed_vs_measured(aspire_db,
                                                                                                   settings):
    app = S3GymApp(db_path=aspire_db, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_aspire()
        await settle(pilot)
        screen = app.screen
        await pilot.press("l")
        dialog = await until(pilot, lambda: isinstance(app.screen, EpisodePickerDialog) and app.screen)
        await settle(pilot)
        options = dialog.query_one("#episode-list")
        assert [o.id for o in options.options] == [LIVE, FINISHED]
        await pilot.press("down", "enter")
        await until(pilot, lambda: screen.aspire_id == FINISHED and len(screen.decisions) == 12)
        await settle(pilot)
        rows = timeline(screen)
        marks = {row[1] for row in rows if not row[1].startswith(" ")}
        assert marks == {"⊘ practise", "✗ evaluate", "✗ train_grpo"}
        assert rows[3][3].startswith("refused") and rows[7][6] == "other" and rows[2][5] == "$0.0042"
        assert rows[3][5] == "—"  # an unpriced call: not $0
        split = shown(screen, "#asp-split")
        assert "goal" in split and "practice" in split and "50%" in split

        tree = screen.query_one(CandidateTree)
        assert tree.chosen_id == "cand-grpo-03"  # the final candidate first
        claims = shown(screen, "#asp-claims")
        assert "+0.30" in claims and "+0.02" in claims and "0.41 → 0.43" in claims
        assert "I am better at planning" in claims and "best so far" in claims

        await pilot.press("c")
        assert app.focused is tree
        await pilot.press("up")
        await until(pilot, lambda: screen.chosen_candidate == "cand-sft-02", what="the sft candidate")
        detail = shown(screen, "#asp-candidate")
        assert "cand-base-00 → cand-memory-01 → cand-sft-02" in detail and "rolled back" in detail
        assert "did not beat its parent" in detail
        claims = shown(screen, "#asp-claims")
        assert "sft cand-sft-02 0.38" in claims and "vs base — -0.03" in claims and "vs parent -0.06" in claims

        await pilot.press("d", "up", "up", "up", "up")  # back to the timeline: the refused call whole
        await until(pilot, lambda: screen.chosen_decision is not None and screen.chosen_decision.idx == 7)
        assert "error: unknown argument 'mode'" in shown(screen, "#asp-decision")
        await pilot.press("up", "up", "up", "up")
        decision = shown(screen, "#asp-decision")
        assert "⊘ refused" in decision and '"seed": 1000003' in decision and "Try the evaluation seeds" in decision


async def test_an_empty_store_says_how_to_start_one(tmp_path, settings):
    app = S3GymApp(db_path=tmp_path / "empty.db", settings=settings)
    async with app.run_test(size=(80, 24)) as pilot:
        await settle(pilot)
        app.open_aspire()
        await settle(pilot)
        assert "No ASPIRE run yet: n starts one" in shown(app.screen, "#asp-status")
        await pilot.press("l")
        await settle(pilot)
        assert isinstance(app.screen, AspireScreen)  # nothing to pick: said, no dialog


async def test_n_starts_a_run_as_its_own_process_the_screen_follows_it_to_its_hidden_scores(aspire_db, settings):
    """n, a goal, the scripted operator (offline), adaptive, a budget; ctrl+s starts `s3gym aspire` as a
    child process that holds the run's lease; the screen switches from the run it showed to the new run
    (reads of the old one still under way are not shown) and follows it live to the end, when its hidden
    scores appear and its final candidate is chosen."""
    import os
    import signal

    from s3gym_tui.screens.aspire_dialog import AspireDialog

    path = aspire_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_aspire()
        await settle(pilot)
        screen = app.screen
        await pilot.press("n")
        dialog = await until(pilot, lambda: isinstance(app.screen, AspireDialog) and app.screen)
        assert [str(v) for _, v in dialog.goals][:3] == ["rules", "uncertainty", "cooperation"]
        assert not any("suite" in str(label) for label, _ in dialog.goals)  # the hidden suites stay hidden
        dialog.query_one("#asp-model").value = "scripted"
        dialog.query_one("#asp-protocol").value = "adaptive"
        dialog.query_one("#asp-calls").value = "0"
        await pilot.pause()
        await pilot.press("ctrl+s")
        assert isinstance(app.screen, AspireDialog) and "Model calls: must be more than 0" in shown(dialog, "#asp-error")
        dialog.query_one("#asp-calls").value = "60"
        dialog.query_one("#asp-dollars").value = ""
        await pilot.pause()
        await pilot.press("ctrl+s")
        child = await until(pilot, lambda: getattr(app, "child_runs", None) and app.child_runs.children
                            and app.child_runs.children[-1])
        try:
            assert child.kind == "aspire" and child.argv[3:5] == ["aspire", "--goal-id"]
            assert "--budget" in child.argv and "calls=60" in child.argv[child.argv.index("--budget") + 1]
            assert "dollars=none" in child.argv[child.argv.index("--budget") + 1]
            await until(pilot, lambda: screen.run is not None and screen.run.id == child.run_id, timeout=90,
                        what="the new run on the screen")
            assert screen.run.protocol == "adaptive" and screen.run.goal_id == "rules"
            await until(pilot, lambda: screen.run.status == "finished" and screen.view.ended, timeout=120,
                        what="the run's end")
            await settle(pilot)
            assert len(screen.decisions) >= 3 and screen.decisions[-1].tool == "submit"
            assert "[finished]" in shown(screen, "#asp-status")
            assert "hidden until" not in shown(screen, "#asp-claims") and screen.view.base_score.value is not None
            tree = screen.query_one(CandidateTree)
            assert screen.chosen_candidate is not None and tree.chosen_id == screen.chosen_candidate
            assert screen.chosen_candidate.startswith(child.run_id)  # a candidate of the new run, shown
            assert screen.view.candidate(screen.chosen_candidate).label in shown(screen, "#asp-claims")
            with Store(path) as store:
                assert store.leases.aspire_lease(child.run_id) is None  # released at the end
        finally:
            if child.alive:
                os.kill(child.pid, signal.SIGKILL)
            child.process.wait(timeout=30)


async def test_s_stops_the_run_it_stays_resumable_r_resumes_it_to_the_end(tmp_path, settings):
    """A run started here is followed as running (its lease); s sends its process Ctrl-C: stored as
    interrupted, the decisions kept; r (confirmed) resumes it as `s3gym aspire --resume`, to the end."""
    import os
    import signal

    from s3gym_tui.screens.aspire_control import start_aspire
    from s3gym_tui.engine.detached import aspire_argv
    from s3gym_tui.screens.dialogs import ConfirmDialog

    path = tmp_path / "stop.db"
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        await settle(pilot)
        app.open_aspire()
        await settle(pilot)
        screen = app.screen
        started = []
        try:
            child = start_aspire(app, aspire_argv(path, goal_id="cooperation", model="scripted", protocol="final"),
                                 "aspire")
            started.append(child)
            screen._started(child)
            await until(pilot, lambda: screen.state == "running", timeout=90, what="the run driven by its process")
            assert f"PID {child.pid}" in shown(screen, "#asp-status")
            await pilot.press("s")
            await until(pilot, lambda: not child.alive, what="the process to stop")
            assert child.returncode == 130
            await until(pilot, lambda: screen.run.status == "interrupted" and screen.state == "interrupted",
                        what="the stop stored")
            kept = len(screen.decisions)
            await until(pilot, lambda: "[interrupted]" in shown(screen, "#asp-status")
                        and "r resumes it" in shown(screen, "#asp-status"), what="the status line")
            await pilot.press("r")
            await until(pilot, lambda: isinstance(app.screen, ConfirmDialog))
            await pilot.press("y")
            resumed = await until(pilot, lambda: app.child_runs.children[-1] is not child and app.child_runs.children[-1])
            started.append(resumed)
            assert resumed.argv[3:6] == ["aspire", "--resume", screen.run.id] and resumed.run_id == screen.run.id
            await until(pilot, lambda: screen.run.status == "finished", timeout=120, what="the resumed run's end")
            await settle(pilot)
            assert len(screen.decisions) > kept and [d.idx for d in screen.decisions] == list(range(len(screen.decisions)))
        finally:
            for process in started:
                if process.alive:
                    os.kill(process.pid, signal.SIGKILL)
                process.process.wait(timeout=30)


async def test_at_200_columns_the_runs_list_chooses_the_run_shown(aspire_db, settings):
    """At 200x50 the ASPIRE runs are listed beside the timeline; moving in the list shows that run (and the
    list's own rebuilds on every refresh do not move the person elsewhere)."""
    app = S3GymApp(db_path=aspire_db, settings=settings)
    async with app.run_test(size=(200, 50)) as pilot:
        await settle(pilot)
        app.open_aspire()
        await settle(pilot)
        screen = app.screen
        runs = screen.query_one("#asp-runs")
        assert runs.display and runs.row_count == 2 and screen.aspire_id == LIVE
        runs.focus()
        await pilot.press("down")
        await until(pilot, lambda: screen.run is not None and screen.run.id == FINISHED and len(screen.decisions) == 12)
        with Store(aspire_db) as other:  # another process writes: the list is rebuilt, the choice stays
            other.aspire.set_aspire_status(LIVE, "interrupted", "stopped")
        await until(pilot, lambda: "interrupted" in str(runs.get_row(LIVE)), what="the list rebuilt")
        await settle(pilot)
        assert screen.aspire_id == FINISHED and screen.run.id == FINISHED
