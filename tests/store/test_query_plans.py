"""The hot reads the Store really issues use indexes (EXPLAIN QUERY PLAN, no wall-clock limits)."""

from __future__ import annotations

from typing import Callable

import pytest

from s3gym_tui.models import Run
from s3gym_tui.store import Store


def _plans(store: Store, call: Callable[[], object]) -> list[tuple[str, str]]:
    """(sql, plan) for every SELECT the call executed, with its parameters bound."""
    seen: list[str] = []
    store.conn.set_trace_callback(seen.append)
    try:
        call()
    finally:
        store.conn.set_trace_callback(None)
    selects = [s for s in seen if s.lstrip().upper().startswith("SELECT")]
    assert selects, seen
    return [(s, " | ".join(r[3] for r in store.conn.execute("EXPLAIN QUERY PLAN " + s)))
            for s in selects]


@pytest.mark.parametrize("name, call, index", [
    ("steps", lambda s, run, ep: s.episodes.steps(ep), "idx_steps_episode_index"),
    ("light steps", lambda s, run, ep: s.episodes.steps(ep, include_prompt=False),
     "idx_steps_episode_index"),
    ("last step", lambda s, run, ep: s.episodes.last_step_index(ep), "idx_steps_episode_index"),
    ("runs", lambda s, run, ep: s.runs.list_runs(limit=20), "idx_runs_created_at"),
    ("run episodes", lambda s, run, ep: s.episodes.list(run), "idx_episodes_run_phase_checkpoint"),
    ("checkpoint episodes", lambda s, run, ep: s.episodes.list(run, phase="eval", checkpoint=0),
     "idx_episodes_run_phase_checkpoint"),
    ("summaries", lambda s, run, ep: s.summaries.list(run), "idx_summaries_run_version"),
    ("current summary", lambda s, run, ep: s.summaries.current_summary(run), "idx_summaries_run_version"),
])
def test_store_reads_use_indexes(store: Store, run: Run, explored, name, call, index):
    plans = _plans(store, lambda: call(store, run.id, explored[0].id))
    for sql, plan in plans:
        assert index in plan, (sql, plan)
        full_scans = [part for part in plan.split(" | ")
                      if part.startswith("SCAN ") and "USING" not in part]
        assert not full_scans, (sql, plan)
        if name not in ("run episodes", "current summary"):  # those sort one run's few rows
            assert "TEMP B-TREE" not in plan, (sql, plan)


def test_loading_an_episode_is_one_range_scan_without_a_sort(store: Store, explored):
    [(sql, plan)] = _plans(store, lambda: store.episodes.steps(explored[0].id))
    assert "SEARCH steps USING INDEX idx_steps_episode_index (episode_id=?)" in plan
    assert "TEMP B-TREE" not in plan


def test_get_episode_is_a_primary_key_lookup(store: Store, explored):
    [(sql, plan)] = _plans(store, lambda: store.episodes.get_episode(explored[0].id))
    assert "USING INDEX sqlite_autoindex_episodes_1 (id=?)" in plan
