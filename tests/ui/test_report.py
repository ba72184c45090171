"""Report screen: the engine's numbers for the chosen runs, the curves, adding and removing runs."""

from __future__ import annotations

from textual.widgets import DataTable, SelectionList

from s3gym_tui.app import S3GymApp
from s3gym_tui.engine.glossary import REASONS, fmt_share
from s3gym_tui.engine.report import on_game_scales, run_report, summary_vs_history
from s3gym_tui.screens.analysis_common import fmt, fmt_signed
from s3gym_tui.screens.report import ReportScreen
from s3gym_tui.store import Store
from s3gym_tui.widgets.checkpoint_plot import CurvePlot
from tests.ui.settle import settle


def rows(screen, table_id) -> dict[str, list[str]]:
    table = screen.query_one(table_id, DataTable)
    out = {}
    for i in range(table.row_count):
        key = table.coordinate_to_cell_key((i, 0)).row_key.value
        out[key] = [str(c) for c in table.get_row_at(i)]
    return out


async def open_report(app, pilot, run_ids) -> ReportScreen:
    app.open_report(run_ids)
    await settle(pilot)
    screen = app.screen
    assert isinstance(screen, ReportScreen)
    return screen


async def test_report_shows_the_engine_values_for_the_demo_runs(demo_db, settings):
    path, ids = demo_db
    run_ids = [ids["trust-history"], ids["trust-summary"], ids["snake-summary"]]
    with Store(path) as store:
        reports = dict(zip(run_ids, on_game_scales([run_report(store, store.runs.get_run(r)) for r in run_ids])))
        deltas = summary_vs_history(list(reports.values()))
    assert [d.game for d in deltas] == ["trust", "overall"]
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_report(app, pilot, run_ids)
        curve_rows = rows(screen, "#report-curve-table")
        assert list(curve_rows) == run_ids
        for run_id, report in reports.items():
            c = report.curve
            assert curve_rows[run_id][5:10] == [fmt(c.y0), fmt(c.avg), fmt(c.max), fmt(c.auc_plus), fmt(c.naba)]
            assert curve_rows[run_id][1:4] == [report.run.config.game, report.run.config.pathway,
                                               report.run.config.model]
        delta_rows = rows(screen, "#report-delta-table")
        for d in deltas:
            assert delta_rows[d.game][1:7] == [str(d.n), str(d.wins), str(d.losses), str(d.ties),
                                               fmt_signed(d.mean_delta), str(d.skipped)]
        judging = rows(screen, "#report-judging-table")
        for run_id, report in reports.items():
            for phase, j in (("explore", report.judging), ("eval", report.judging_eval)):
                assert judging[f"{run_id}:{phase}"][2:10] == [str(j.n), str(j.missing), fmt(j.agreement),
                                                               fmt(j.nmae), fmt(j.over), fmt(j.under),
                                                               str(j.out_of_range), fmt_share(j.out_of_range_share)]
            assert j.n > 0
        coupling = rows(screen, "#report-coupling-table")
        for run_id, report in reports.items():
            cp = report.coupling
            assert coupling[run_id][1:5] == [str(len(cp.blocks)), str(cp.n_used), fmt(cp.corr_agreement),
                                             fmt(cp.corr_neg_nmae)]
        curves = screen.query_one(CurvePlot).curves
        assert [c.points for c in curves] == [reports[r].points for r in run_ids]


async def test_runs_can_be_added_and_removed(demo_db, settings):
    path, ids = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_report(app, pilot, [ids["trust-summary"]])
        assert list(rows(screen, "#report-curve-table")) == [ids["trust-summary"]]
        assert rows(screen, "#report-delta-table") == {}
        assert "no Summary/History pair" in str(screen.query_one("#report-delta-title").render())
        assert not screen.query_one("#report-runs").display or screen.has_class("-hide-runs")
        await pilot.press("a")  # show the run list
        await pilot.pause()
        selection = screen.query_one("#report-runs", SelectionList)
        assert selection.has_focus and not screen.has_class("-hide-runs")
        assert set(selection.selected) == {ids["trust-summary"]}
        selection.select(ids["trust-history"])
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert list(rows(screen, "#report-curve-table")) == [ids["trust-summary"], ids["trust-history"]]
        assert "trust" in rows(screen, "#report-delta-table")
        assert len(screen.query_one(CurvePlot).curves) == 2
        selection.deselect(ids["trust-summary"])
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert list(rows(screen, "#report-curve-table")) == [ids["trust-history"]]
        # keyboard: space toggles the highlighted run in the list
        selection.highlighted = [selection.get_option_at_index(i).value
                                 for i in range(selection.option_count)].index(ids["snake-summary"])
        await pilot.press("space")
        await pilot.pause()
        await app.workers.wait_for_complete()
        await pilot.pause()
        assert ids["snake-summary"] in rows(screen, "#report-curve-table")


async def test_report_without_runs_says_what_to_do(demo_db, settings):
    path, _ = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_report(app, pilot, [])
        assert not screen.has_class("-hide-runs")
        assert "press a" in str(screen.query_one("#report-status").content)
        assert screen.query_one("#report-curve-table", DataTable).row_count == 0
        unknown = await open_report(app, pilot, ["no-such-run"])
        assert unknown.run_ids == []
        assert any("no-such-run" in n.message for n in app._notifications)


async def test_report_numbers_have_one_format_and_every_metric_is_explained(demo_db, settings):
    import re

    from s3gym_tui.engine.glossary import METRICS

    path, ids = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_report(app, pilot, [ids["trust-history"], ids["trust-summary"]])
        cells = []
        for table_id, first, last in (("#report-curve-table", 5, -1), ("#report-judging-table", 4, -3),
                                      ("#report-coupling-table", 3, -1)):
            for row in rows(screen, table_id).values():
                cells += row[first:last]  # the last column says why a figure is undefined
        assert cells and all(re.fullmatch(r"-?\d+\.\d{2}|—", c) for c in cells), cells
        for row in rows(screen, "#report-judging-table").values():  # out of range: a count and its share
            assert re.fullmatch(r"\d+", row[-3]) and re.fullmatch(r"\d+\.\d%|—", row[-2]), row
        notes = " ".join(str(w.content) for w in screen.query(".report-note"))
        for name in ("y0", "Avg", "Max", "AUC+", "NABA", "ΔNABA", "skipped", "agreement", "NMAE", "over",
                     "under", "out of range", "out %", "corr(A, g)", "corr(−E, g)"):
            assert name in notes and METRICS[name] in notes
        assert "— = not defined" in notes


async def test_a_partial_run_shows_dashes_and_why(tmp_path, settings):
    """A History run stopped after x = 0 beside a finished Summary run, and a run whose self-score
    never varies: the Report screen shows — (not 0.00) and says why, in the row and under the table."""
    from tests.engine.helpers import hand_run

    path = tmp_path / "partial.db"
    with Store(path) as store:
        hand_run(store, "trust-history-partial", [[(2, 1), (0, -1)]], {0: [[(1, 1), (0, 0)]]}, {0: [2.0]},
                 pathway="history", explore_episodes=3, status="stopped")
        hand_run(store, "trust-summary-full", [[(1, 1)], [(0, 1)], [(2, 3)]], {0: [[(1, 0)]], 3: [[(2, 2)]]},
                 {0: [2.0], 3: [4.0]}, pathway="summary")
        hand_run(store, "snake-none-constant", [[(1, 0), (1, 1), (1, 4)]] * 3, {0: [[(1, 0)]], 3: [[(1, 1)]]},
                 {0: [0.0], 3: [1.0]}, game="snake")
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(160, 50)) as pilot:
        screen = await open_report(app, pilot, ["trust-history-partial", "trust-summary-full",
                                                "snake-none-constant"])
        curve = rows(screen, "#report-curve-table")["trust-history-partial"]
        assert curve[4:] == ["1/2", "2.00", "2.00", "2.00", "—", "—", "AUC+, NABA: one checkpoint"]
        assert rows(screen, "#report-curve-table")["trust-summary-full"][8:] == ["3.00", "1.50", ""]
        delta = rows(screen, "#report-delta-table")["trust"]
        assert delta[1:] == ["0", "0", "0", "0", "—", "1", "mean ΔNABA: NABA undefined"]
        judging = rows(screen, "#report-judging-table")["snake-none-constant:explore"]
        assert judging[5] == "—" and judging[-1] == "NMAE: s constant" and judging[4] == "0.67"
        notes = " ".join(str(w.content) for w in screen.query(".report-note"))
        for reason in ("one checkpoint", "NABA undefined", "s constant", "< 3 blocks"):
            assert f"{reason}: {REASONS[reason]}" in notes
        assert "snake: s 1.00..1.00" in notes  # the scale NMAE would divide by


async def test_equal_curves_are_drawn_once_and_named_together_beside_the_plot(demo_db, settings):
    from s3gym_tui.widgets.checkpoint_plot import drawn_groups

    path, ids = demo_db
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        run_id = ids["trust-history"]
        screen = await open_report(app, pilot, [run_id])
        plot = screen.query_one(CurvePlot)
        same = plot.curves[0]
        plot.show([same, type(same)("twin", same.points)])  # two runs with the very same curve
        groups = drawn_groups(plot.curves)
        assert len(groups) == 1 and groups[0][1] == [same.label, "twin"]
        legend = plot.legend_text().plain
        assert f"{same.label} = twin (same curve)" in legend
        assert plot.legend == "beside"  # plotext draws no legend on the data


def test_x_ticks_are_whole_episodes():
    from s3gym_tui.widgets.checkpoint_plot import integer_ticks

    assert integer_ticks([0, 3, 6, 9]) == [0, 3, 6, 9]
    assert integer_ticks([0.0, 0.5, 1.0]) == [0, 1]
    assert len(integer_ticks(list(range(0, 100, 3)))) <= 13


async def test_report_shows_each_runs_prompt_cache_share_and_a_dash_where_the_provider_did_not_say(
        demo_db, settings):
    import sqlite3

    from s3gym_tui.engine.glossary import DASH, fmt_share

    path, ids = demo_db
    cached_run, silent_run = ids["trust-history"], ids["trust-summary"]
    with sqlite3.connect(path) as conn:  # as a provider that reports its cache would have stored them
        conn.execute("UPDATE steps SET tokens_cached = tokens_in * 3 / 4 WHERE episode_id IN "
                     "(SELECT id FROM episodes WHERE run_id = ?)", (cached_run,))
    with Store(path) as store:
        usage = run_report(store, store.runs.get_run(cached_run)).usage
    assert usage.tokens_in > 0 and 0.7 < usage.cache_share < 0.8
    app = S3GymApp(db_path=path, settings=settings)
    async with app.run_test(size=(120, 40)) as pilot:
        screen = await open_report(app, pilot, [cached_run, silent_run])
        table = rows(screen, "#report-usage-table")
    assert table[cached_run][1:3] == [f"{usage.calls:,}", f"{usage.tokens_in:,}"]
    assert table[cached_run][4:6] == [f"{usage.tokens_cached:,}", fmt_share(usage.cache_share)]
    assert table[cached_run][7] == ""
    assert table[silent_run][4:6] == [DASH, DASH] and "not reported" in table[silent_run][7]
