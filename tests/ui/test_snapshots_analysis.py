"""Snapshots (120x40) of the analysis screens on a deterministic database (fixed ids and times):
Protocol (finished run), Summaries, Compare (at the first divergence), Pairs, Report."""

from __future__ import annotations

from s3gym_tui.app import S3GymApp
from s3gym_tui.screens.compare import CompareScreen
from s3gym_tui.screens.pairs import PairsScreen
from s3gym_tui.screens.protocol import ProtocolScreen
from s3gym_tui.screens.report import ReportScreen
from s3gym_tui.screens.summaries import SummariesScreen
from tests.ui.settle import settle
from tests.ui.analysis_data import (DIVERGING_HISTORY, DIVERGING_SUMMARY, HISTORY_RUN,  # noqa: F401
                                    SUMMARY_RUN, analysis_db, analysis_template)

SIZE = (120, 40)


def snapshot(snap_compare, path, settings, open_screen, expected_type, keys=()) -> bool:
    app = S3GymApp(db_path=path, settings=settings)

    async def run_before(pilot) -> None:
        open_screen(pilot.app)
        await settle(pilot)
        assert isinstance(pilot.app.screen, expected_type)
        for key in keys:
            await pilot.press(key)
        await settle(pilot)

    return snap_compare(app, terminal_size=SIZE, run_before=run_before)


def test_protocol_finished_run(snap_compare, analysis_db, settings):
    assert snapshot(snap_compare, analysis_db, settings, lambda app: app.open_protocol(SUMMARY_RUN),
                    ProtocolScreen)


def test_summaries(snap_compare, analysis_db, settings):
    assert snapshot(snap_compare, analysis_db, settings, lambda app: app.open_summaries(SUMMARY_RUN),
                    SummariesScreen)


def test_summaries_diff(snap_compare, analysis_db, settings):
    assert snapshot(snap_compare, analysis_db, settings, lambda app: app.open_summaries(SUMMARY_RUN),
                    SummariesScreen, keys=("d",))


def test_compare_at_first_divergence(snap_compare, analysis_db, settings):
    assert snapshot(snap_compare, analysis_db, settings,
                    lambda app: app.open_compare(DIVERGING_HISTORY, DIVERGING_SUMMARY), CompareScreen,
                    keys=("g",))


def test_pairs(snap_compare, analysis_db, settings):
    assert snapshot(snap_compare, analysis_db, settings, lambda app: app.open_pairs(), PairsScreen)


def test_report(snap_compare, analysis_db, settings):
    assert snapshot(snap_compare, analysis_db, settings,
                    lambda app: app.open_report([HISTORY_RUN, SUMMARY_RUN]), ReportScreen)
