"""Peak memory per phase: the resident high-water mark is reset when a phase starts, so a later phase's
figure is its own (not the process's peak so far), and every stored figure says which it is."""

from __future__ import annotations

import mmap
import sys

import pytest

from s3gym_tui.training import device


def _touch(mb: int) -> mmap.mmap:
    """`mb` MB made resident in an anonymous mapping of its own, returned to the system when closed
    (a bytearray's memory may stay in malloc's free lists, resident, and count in the next phase)."""
    block = mmap.mmap(-1, mb * 1024 * 1024)
    for i in range(0, len(block), mmap.PAGESIZE):
        block[i] = 1
    return block


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the mark is reset through /proc (Linux)")
def test_a_later_phase_reports_its_own_peak_not_the_process_peak_so_far():
    assert device.start_phase_memory()
    block = _touch(160)
    first, scope = device.phase_peak_rss()
    block.close()
    assert scope == device.PHASE_SCOPE
    device.start_phase_memory()
    _touch(8).close()
    second, scope = device.phase_peak_rss()
    assert scope == device.PHASE_SCOPE and second < first - 100  # the 160 MB of the first phase are not in it


def test_where_the_mark_cannot_be_reset_the_figure_says_process_so_far(monkeypatch):
    def refused(*args, **kwargs):
        raise PermissionError("no /proc here")

    monkeypatch.setattr("builtins.open", refused)
    assert device.start_phase_memory() is False
    monkeypatch.undo()
    _, scope = device.phase_peak_rss()
    assert scope == device.PROCESS_SCOPE
    assert device.rss_scope({"peak_rss_mb": 2800.5}) == device.PROCESS_SCOPE  # stored before scopes were kept
    assert device.rss_scope({"peak_rss_mb": 900.0, "peak_rss_scope": "phase"}) == device.PHASE_SCOPE
    assert device.rss_scope({}) is None
