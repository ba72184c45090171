"""Summary versions: numbering, veto, pin, human edits, and which version the agent uses next."""

from __future__ import annotations

import pytest

from s3gym_tui.models import Run, RunConfig
from s3gym_tui.store import Store, StoreError

ALICE = "human:alice"


def _add(store: Store, run: Run, tag: str, **kw):
    return store.summaries.add_summary(run.id, f"retain {tag}", f"avoid {tag}", f"next {tag}", **kw)


def test_versions_count_up_per_run(store: Store, run: Run):
    other = store.runs.create_run(RunConfig(model="m", game="trust"))
    a1, a2 = _add(store, run, "1"), _add(store, run, "2")
    b1 = _add(store, other, "1")
    a3 = _add(store, run, "3")
    assert [s.version for s in (a1, a2, a3)] == [1, 2, 3]
    assert b1.version == 1
    assert [s.version for s in store.summaries.list(run.id)] == [1, 2, 3]
    assert len({a1.id, a2.id, a3.id, b1.id}) == 4
    with pytest.raises(StoreError, match="no run 'ghost'"):
        _add(store, Run(id="ghost", config=run.config), "x")


def test_game_given_must_match_the_run(store: Store, run: Run):
    assert store.summaries.add_summary(run.id, "r", "a", "n", game="trust").game == "trust"
    with pytest.raises(StoreError, match="is for 'chess' but the run is 'trust'"):
        store.summaries.add_summary(run.id, "r", "a", "n", game="chess")
    assert len(store.summaries.list(run.id)) == 1


def test_no_summary_yet(store: Store, run: Run):
    assert store.summaries.current_summary(run.id) is None


def test_latest_active_version_is_current(store: Store, run: Run):
    _add(store, run, "1")
    latest = _add(store, run, "2")
    assert store.summaries.current_summary(run.id) == latest


def test_veto_falls_back_to_previous_non_vetoed(store: Store, run: Run):
    v1, v2, v3 = (_add(store, run, str(i)) for i in (1, 2, 3))
    assert store.summaries.update_summary_status(v3.id, "vetoed", author=ALICE).status == "vetoed"
    assert store.summaries.current_summary(run.id).id == v2.id
    store.summaries.update_summary_status(v2.id, "vetoed", author=ALICE)
    assert store.summaries.current_summary(run.id).id == v1.id
    store.summaries.update_summary_status(v1.id, "vetoed", author=ALICE)
    assert store.summaries.current_summary(run.id) is None
    store.summaries.update_summary_status(v2.id, "active", author=ALICE)
    assert store.summaries.current_summary(run.id).id == v2.id
    with pytest.raises(StoreError, match="bad summary status"):
        store.summaries.update_summary_status(v1.id, "deleted", author=ALICE)
    with pytest.raises(StoreError, match="no summary 'x'"):
        store.summaries.update_summary_status("x", "vetoed", author=ALICE)


def test_pinned_version_wins_over_newer_ones(store: Store, run: Run):
    v1, v2 = _add(store, run, "1"), _add(store, run, "2")
    assert store.summaries.set_pinned(v1.id, True, author=ALICE).pinned
    _add(store, run, "3")
    assert store.summaries.current_summary(run.id).id == v1.id
    # one pin per run: pinning v2 unpins v1
    store.summaries.set_pinned(v2.id, True, author=ALICE)
    assert [s.pinned for s in store.summaries.list(run.id)] == [False, True, False]
    assert store.summaries.current_summary(run.id).id == v2.id
    store.summaries.set_pinned(v2.id, False, author=ALICE)
    assert store.summaries.current_summary(run.id).version == 3
    with pytest.raises(StoreError, match="no summary 'x'"):
        store.summaries.set_pinned("x", True, author=ALICE)


def test_a_vetoed_pin_is_not_used(store: Store, run: Run):
    v1, v2 = _add(store, run, "1"), _add(store, run, "2")
    store.summaries.set_pinned(v1.id, True, author=ALICE)
    store.summaries.update_summary_status(v1.id, "vetoed", author=ALICE)
    assert store.summaries.current_summary(run.id).id == v2.id


def test_pins_are_per_run(store: Store, run: Run):
    other = store.runs.create_run(RunConfig(model="m", game="trust"))
    a, b = _add(store, run, "a"), _add(store, other, "b")
    store.summaries.set_pinned(a.id, True, author=ALICE)
    store.summaries.set_pinned(b.id, True, author=ALICE)
    assert store.summaries.get_summary(a.id).pinned and store.summaries.get_summary(b.id).pinned


def test_edit_makes_a_new_version_with_author_and_parent(store: Store, run: Run, explored):
    v1 = _add(store, run, "1", source_episode_ids=[explored[0].id], author="model:scripted",
              for_episode_id=explored[0].id)
    _add(store, run, "2")
    edited = store.summaries.edit_summary(v1.id, "retain edited", "avoid edited", "next edited",
                                          author="human:alice")
    assert edited.version == 3 and edited.parent_version == 1
    assert edited.author == "human:alice" and edited.created_at >= v1.created_at
    assert (edited.retain, edited.avoid, edited.next) == ("retain edited", "avoid edited",
                                                          "next edited")
    assert edited.source_episode_ids == v1.source_episode_ids
    assert edited.for_episode_id is None and edited.status == "active"
    assert store.summaries.get_summary(v1.id) == v1  # the original is kept as it was
    assert store.summaries.current_summary(run.id) == edited
    for bad in (" ", "human", "human:", "alice", "robot:x"):
        with pytest.raises(StoreError, match="is not 'human:<name>' or 'model:<model>'"):
            store.summaries.edit_summary(v1.id, "a", "b", "c", author=bad)
    with pytest.raises(StoreError, match="no summary 'x'"):
        store.summaries.edit_summary("x", "a", "b", "c", author="human:bob")
    assert len(store.summaries.list(run.id)) == 3


def test_editing_a_pinned_version_moves_the_pin(store: Store, run: Run):
    v1 = _add(store, run, "1")
    _add(store, run, "2")
    store.summaries.set_pinned(v1.id, True, author=ALICE)
    edited = store.summaries.edit_summary(v1.id, "r", "a", "n", author="human:alice")
    assert edited.pinned and not store.summaries.get_summary(v1.id).pinned
    assert store.summaries.current_summary(run.id) == edited


def test_summary_id_collision_refused(store: Store, run: Run):
    _add(store, run, "1", summary_id="fixed")
    with pytest.raises(StoreError, match="already exists"):
        _add(store, run, "2", summary_id="fixed")
    assert [s.version for s in store.summaries.list(run.id)] == [1]
