"""The live-sharing campaign, two rounds (benchmarks/live_campaign.py runs it at full size): the
real app opening every screen while two headless runs and a reader share its database, summary
edits checked from a fresh process, quits and restarts, integrity_check after every round."""

from __future__ import annotations

from pathlib import Path

from benchmarks.live_campaign import run_campaign


def test_two_rounds_nothing_lost_nothing_torn_nothing_corrupt(tmp_path: Path):
    figures = run_campaign(tmp_path / "live.db", rounds=2, seed=1)
    assert figures.rounds == 2 and figures.app_starts == 2 and figures.headless_runs == 4
    assert figures.screens_opened >= 12 and figures.edits_saved >= 2 and figures.reader_polls > 10
    assert figures.problems == []
    assert (figures.lost_edits, figures.torn_reads, figures.corrupt_rounds,
            figures.headless_failed, figures.reader_errors) == (0, 0, 0, 0, 0)
