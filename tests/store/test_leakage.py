"""The held-out line: guards refuse evaluation data as experience; the audit finds what got around."""

from __future__ import annotations

import json

import pytest

from s3gym_tui.models import EVAL_SEED_BASE, Run, eval_episode_id, explore_episode_id
from s3gym_tui.store import LeakageError, Store, StoreError, audit


def test_leakage_error_is_a_store_error():
    assert issubclass(LeakageError, StoreError)


def test_eval_episode_on_an_exploration_seed_refused(store: Store, run: Run, make_episode):
    with pytest.raises(LeakageError, match="seed 3 is an explore seed"):
        store.episodes.add_episode(make_episode(run, phase="eval", seed=3, checkpoint=0))
    assert store.episodes.list() == []


def test_exploration_episode_on_an_eval_seed_refused(store: Store, run: Run, make_episode):
    with pytest.raises(LeakageError, match=f"seed {EVAL_SEED_BASE} is an eval seed"):
        store.episodes.add_episode(make_episode(run, phase="explore", seed=EVAL_SEED_BASE))
    with pytest.raises(LeakageError, match="is an eval seed"):  # run-less episodes too
        store.episodes.add_episode(make_episode(None, phase="explore", seed=EVAL_SEED_BASE + 5))
    assert store.episodes.list() == []


def test_mode_must_match_phase_in_a_run(store: Store, run: Run, make_episode):
    with pytest.raises(LeakageError, match="mode 'explore' but phase 'eval'"):
        store.episodes.add_episode(make_episode(run, phase="eval", mode="explore"))
    with pytest.raises(LeakageError, match="mode 'eval' but phase 'explore'"):
        store.episodes.add_episode(make_episode(run, phase="explore", mode="eval"))


def test_eval_episode_as_history_refused(store: Store, run: Run, explored, evaluated,
                                         make_episode):
    history = (explored[0].id, evaluated[0].id)
    with pytest.raises(LeakageError, match=f"evaluation episode '{evaluated[0].id}' cannot be a "
                                           f"history source"):
        store.episodes.add_episode(make_episode(run, index=3, history_episode_ids=history))
    # an eval episode may read exploration history, never the other way round
    ok = store.episodes.add_episode(make_episode(run, phase="eval", index=5, checkpoint=3,
                                                 history_episode_ids=(explored[0].id,)))
    assert store.episodes.get_episode(ok.id).history_episode_ids == (explored[0].id,)
    assert len(store.episodes.list(run.id)) == 6


def test_eval_episode_as_summary_source_refused(store: Store, run: Run, explored, evaluated):
    with pytest.raises(LeakageError, match="cannot be a summary source"):
        store.summaries.add_summary(run.id, "r", "a", "n",
                                    source_episode_ids=[explored[0].id, evaluated[1].id])
    with pytest.raises(LeakageError, match="cannot be a summary producer"):
        store.summaries.add_summary(run.id, "r", "a", "n", for_episode_id=evaluated[0].id)
    with pytest.raises(StoreError, match="unknown summary source episode 'ghost'"):
        store.summaries.add_summary(run.id, "r", "a", "n", source_episode_ids=["ghost"])
    assert store.summaries.list(run.id) == []
    assert store.summaries.add_summary(run.id, "r", "a", "n",
                                       source_episode_ids=[explored[0].id]).version == 1


def test_a_summary_and_its_episode_are_stored_together(store: Store, run: Run, explored, evaluated,
                                                       make_episode):
    """The runner stores exploration episode x and the summary written at its step 0 in one
    transaction (for_episode_id is a foreign key); a summary for an episode that is not stored,
    or for an evaluation episode, is refused."""
    episode, summary = store.episodes.add_episode_with_summary(
        make_episode(run, index=3, id="next-explore"), "r", "a", "n",
        source_episode_ids=[explored[0].id])
    assert summary.for_episode_id == "next-explore"
    assert episode.summary_id == summary.id == store.episodes.get_episode("next-explore").summary_id
    never = explore_episode_id(run.id, 8)
    with pytest.raises(StoreError, match=f"no episode '{never}'"):
        store.summaries.add_summary(run.id, "r", "a", "n", for_episode_id=never)
    with pytest.raises(LeakageError, match="only a run's exploration episode"):
        store.episodes.add_episode_with_summary(make_episode(run, phase="eval", id="an-eval"), "r", "a", "n")
    assert store.episodes.find_episode("an-eval") is None
    # all or nothing: a refused summary leaves no episode behind
    with pytest.raises(LeakageError, match="cannot be a summary source"):
        store.episodes.add_episode_with_summary(make_episode(run, index=4, id="x4"), "r", "a", "n",
                                                source_episode_ids=[explored[0].id, evaluated[0].id])
    assert store.episodes.find_episode("x4") is None
    assert len(store.summaries.list(run.id)) == 1
    assert audit(store).ok


def test_a_summary_for_an_episode_not_stored_is_refused(store: Store, run: Run, explored, make_episode):
    """for_episode_id must name a stored episode: another run's or an evaluation id is a leak
    attempt; the run's own next exploration episode must be stored first (with the summary, in one
    transaction); an evaluation episode stored under an exploration-looking id cannot produce one."""
    for bad in ("future-eval", eval_episode_id(run.id, 3, 0), explore_episode_id("other-run", 4)):
        with pytest.raises(LeakageError, match="not a stored episode nor one of the run's"):
            store.summaries.add_summary(run.id, "r", "a", "n", for_episode_id=bad)
    with pytest.raises(StoreError, match="store the episode a summary is written for first"):
        store.summaries.add_summary(run.id, "r", "a", "n", for_episode_id=explore_episode_id(run.id, 9))
    disguised = explore_episode_id(run.id, 7)
    store.episodes.add_episode(make_episode(run, phase="eval", id=disguised))
    with pytest.raises(LeakageError, match="cannot be a summary producer"):
        store.summaries.add_summary(run.id, "r", "a", "n", for_episode_id=disguised)
    assert store.summaries.list(run.id) == []
    assert audit(store).ok


def test_eval_episode_as_training_row_refused(store: Store, run: Run, explored, evaluated):
    rows = [{"episode_id": explored[0].id, "step_index": 0, "kind": "kept"},
            {"episode_id": evaluated[0].id, "step_index": 0, "kind": "kept"}]
    with pytest.raises(LeakageError, match="cannot be a training row"):
        store.datasets.add_dataset(run.id, {"threshold": 0}, rows)
    assert store.datasets.list() == []
    assert store.conn.execute("SELECT count(*) FROM dataset_rows").fetchone()[0] == 0


def _clean_data(store: Store, run: Run, explored, evaluated, make_episode):
    """Everything the protocol writes, done through the store: the audit must find nothing."""
    history = store.episodes.add_episode(make_episode(run, index=3, history_episode_ids=tuple(
        e.id for e in explored)))
    summary = store.summaries.add_summary(run.id, "r", "a", "n", for_episode_id=history.id,
                                          source_episode_ids=[e.id for e in explored])
    store.episodes.set_episode_summary(history.id, summary.id)
    store.episodes.add_episode(make_episode(run, phase="eval", index=0, checkpoint=3,
                                            summary_id=summary.id))
    store.datasets.add_dataset(run.id, {"threshold": 0},
                      [{"episode_id": e.id, "step_index": 0, "kind": "kept"} for e in explored])
    return history, summary


def test_audit_is_empty_on_clean_data(store: Store, run: Run, explored, evaluated, make_episode):
    _clean_data(store, run, explored, evaluated, make_episode)
    report = audit(store)
    assert report.ok, report.lines()
    assert report.problems == [] and report.lines() == ["audit: no leakage found"]


def test_audit_of_an_empty_store(store: Store):
    assert audit(store).ok


# Each case writes around the guards with raw SQL, then names the finding it must produce.
def _history(store, explored, evaluated):
    store.conn.execute("UPDATE episodes SET history_episode_ids = ? WHERE id = ?",
                       (json.dumps([explored[0].id, evaluated[0].id]), explored[1].id))
    return "eval_in_history", evaluated[0].id


def _summary_source(store, explored, evaluated):
    store.conn.execute(
        "INSERT INTO summaries (id, run_id, game, version, retain, avoid, next, "
        "source_episode_ids, author, created_at) SELECT 'leaky', run_id, game, 9, 'r', 'a', 'n', "
        "?, 'model', '2026' FROM episodes WHERE id = ?",
        (json.dumps([evaluated[1].id]), evaluated[1].id))
    return "eval_in_summary_sources", evaluated[1].id


def _summary_producer(store, explored, evaluated):
    store.conn.execute(
        "INSERT INTO summaries (id, run_id, game, version, retain, avoid, next, author, "
        "created_at, for_episode_id) SELECT 'leaky', run_id, game, 9, 'r', 'a', 'n', 'model', "
        "'2026', id FROM episodes WHERE id = ?", (evaluated[0].id,))
    return "eval_summary_producer", evaluated[0].id


def _dataset(store, explored, evaluated):
    store.conn.execute("INSERT INTO datasets (id, run_id, rule, created_at, counts) "
                       "VALUES ('ds', NULL, '{}', '2026', '{}')")
    store.conn.execute("INSERT INTO dataset_rows (dataset_id, episode_id, step_index, kind, "
                       "messages) VALUES ('ds', ?, 0, 'kept', '[]')", (evaluated[1].id,))
    return "eval_in_dataset", evaluated[1].id


def _phase_seed(store, explored, evaluated):
    store.conn.execute("UPDATE episodes SET phase = 'eval', mode = 'eval', checkpoint = 0 "
                       "WHERE id = ?", (explored[2].id,))
    return "phase_seed_mismatch", explored[2].id


def _mode_phase(store, explored, evaluated):
    store.conn.execute("UPDATE episodes SET mode = 'eval' WHERE id = ?", (explored[0].id,))
    return "mode_phase_mismatch", explored[0].id


def _both_phases(store, explored, evaluated):
    store.conn.execute("UPDATE episodes SET seed = ? WHERE id = ?",
                       (evaluated[0].seed, explored[0].id))
    return "seed_in_both_phases", None


def _dangling(store, explored, evaluated):
    store.conn.execute("UPDATE episodes SET history_episode_ids = '[\"gone\"]' WHERE id = ?",
                       (explored[1].id,))
    return "dangling_references", "gone"


def _malformed(store, explored, evaluated):
    store.conn.execute("UPDATE episodes SET history_episode_ids = 'not json' WHERE id = ?",
                       (explored[1].id,))
    return "malformed_json", None


@pytest.mark.parametrize("tamper", [_history, _summary_source, _summary_producer, _dataset,
                                    _phase_seed, _mode_phase, _both_phases, _dangling,
                                    _malformed])
def test_audit_catches_rows_written_around_the_guards(store: Store, run: Run, explored,
                                                      evaluated, make_episode, tamper):
    _clean_data(store, run, explored, evaluated, make_episode)
    assert audit(store).ok
    field, episode_id = tamper(store, explored, evaluated)
    report = audit(store)
    assert not report.ok
    findings = getattr(report, field)
    assert findings, report.lines()
    if episode_id is not None:
        assert episode_id in {f.episode_id for f in findings}
    assert all("\n" not in line for line in report.lines())


def test_audit_flags_a_seed_used_in_both_phases_and_the_mismatch(store: Store, run: Run,
                                                                  explored, evaluated):
    _phase_seed(store, explored, evaluated)
    store.conn.execute("UPDATE episodes SET seed = 0 WHERE id = ?", (evaluated[0].id,))
    report = audit(store)
    assert {f.kind for f in report.problems} >= {"seed_in_both_phases", "phase_seed_mismatch"}
    assert {f.episode_id for f in report.phase_seed_mismatch} == {explored[2].id,
                                                                  evaluated[0].id}


def test_audit_by_path_opens_read_only(store: Store, run: Run, explored, evaluated, db_path):
    _history(store, explored, evaluated)
    report = audit(db_path)
    assert [f.episode_id for f in report.eval_in_history] == [evaluated[0].id]
