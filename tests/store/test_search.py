"""The search index follows every write (this process, another process, removals), an upgraded file's
older steps are indexed on first use, typed FTS operators are inert, annotations are checked and found."""

from __future__ import annotations

import sqlite3
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from s3gym_tui.engine.judging import verdict
from s3gym_tui.models import RunConfig
from s3gym_tui.store import Store, StoreError
from s3gym_tui.store.search import SearchFilters, match_spans, parse_query, step_verdict

from tests.store.conftest import make_episode, make_step
from tests.store.old_schema import as_older_code

ROOT = Path(__file__).resolve().parents[2]


def _fts_ok(path: Path) -> None:
    conn = sqlite3.connect(path)
    try:
        for table in ("search_steps", "search_summaries", "search_notes"):
            conn.execute(f"INSERT INTO {table} ({table}) VALUES ('integrity-check')")
    finally:
        conn.close()


def _targets(result) -> list[str]:
    return [h.target for h in result.hits]


def test_a_stored_step_is_found_at_once_and_gone_with_its_run(store: Store, run, db_path: Path):
    ep = store.episodes.add_episode(make_episode(run))
    store.episodes.add_steps([make_step(ep.id, 0, reply="I will avoid the left column. Answer: C"),
                              make_step(ep.id, 1, feedback="the opponent holds a grudge")])
    assert _targets(store.search.find("left column")) == [f"{ep.id}#0"]
    assert _targets(store.search.find("grudge")) == [f"{ep.id}#1"]
    assert _targets(store.search.find('"column left"')) == []  # a phrase keeps its order
    assert store.search.find("left column").hits[0].lines == (("reply", "I will avoid the left column. Answer: C"),)
    summary = store.summaries.add_summary(run.id, "keep cooperating", "the grudge", "test early")
    assert [h.kind for h in store.search.find("grudge").hits] == ["step", "summary"]
    # the query Datasette runs for the summary_search view (metadata: fts_table, fts_pk)
    assert store.conn.execute("SELECT summary_id FROM summary_search WHERE search_rowid IN (SELECT rowid FROM "
                              "search_summaries WHERE search_summaries MATCH 'grudge')").fetchall() == [(summary.id,)]
    store.hygiene.remove_runs([run.id])
    assert store.search.find("grudge").hits == ()
    _fts_ok(db_path)


def test_steps_written_by_another_process_are_found_by_an_open_store(store: Store, run, db_path: Path):
    ep = store.episodes.add_episode(make_episode(run))
    assert store.search.find("zanzibar").hits == ()
    code = textwrap.dedent(f"""
        from s3gym_tui.store import Store
        from tests.store.conftest import make_step
        with Store({str(db_path)!r}) as other:
            other.episodes.add_steps([make_step({ep.id!r}, i, feedback=f"zanzibar move {{i}}") for i in range(3)])
            other.summaries.add_summary({run.id!r}, "zanzibar rules", "a", "n")
    """)
    subprocess.run([sys.executable, "-c", code], check=True, cwd=ROOT, env={"PYTHONPATH": str(ROOT),
                                                                           "PATH": "/usr/bin:/bin"})
    found = store.search.find("zanzibar")
    assert sorted(h.target for h in found.hits if h.kind == "step") == [f"{ep.id}#{i}" for i in range(3)]
    assert [h.kind for h in found.hits].count("summary") == 1
    _fts_ok(db_path)


@pytest.mark.parametrize("typed", ['NOT', 'a OR', '"unclosed', '(', 'col:umn', '*', 'NEAR(a b)', '-', "{x}", "^a"])
def test_fts_operators_typed_by_a_person_are_plain_words(store: Store, run, typed: str):
    ep = store.episodes.add_episode(make_episode(run))
    store.episodes.add_step(make_step(ep.id, 0, feedback="not a column or near"))
    try:
        store.search.find(typed)
    except StoreError as err:  # only our own one-line refusal, never an SQLite syntax error
        assert "give words" in str(err) or "besides" in str(err)


def test_query_parsing_and_highlight_spans():
    parsed = parse_query('left "the grudge" col* -right')
    assert parsed.fts == '("left" AND "the grudge" AND "col"*) NOT "right"'
    assert [t.text for t in parsed.terms] == ["left", "the", "grudge", "col"]
    text = "Columns LEFT of the Grudge; right"
    spans = match_spans(text, parsed.terms)
    assert [text[a:b] for a, b in spans] == ["Columns", "LEFT", "the", "Grudge"]
    with pytest.raises(StoreError, match="besides"):
        parse_query("-alone")


def test_the_verdict_filter_is_the_judging_rule():
    for s in (None, -1.0, 0.0, 0.5):
        for r in (-1.0, 0.0, 2.0):
            assert step_verdict(s, r) == verdict(s, r)


def test_filters_without_words_and_bad_ranges(store: Store, run):
    ep = store.episodes.add_episode(make_episode(run))
    store.episodes.add_steps([make_step(ep.id, 0, self_score=2.0, reward=-1.0),
                              make_step(ep.id, 1, self_score=None, reward=1.0, fault="missing self-score"),
                              make_step(ep.id, 2, self_score=-1.0, reward=3.0, actor="human")])
    assert _targets(store.search.find("", SearchFilters(verdicts=("over",)))) == [f"{ep.id}#0"]
    assert _targets(store.search.find("", SearchFilters(faults=("missing",)))) == [f"{ep.id}#1"]
    assert _targets(store.search.find("", SearchFilters(actors=("human",), reward_min=2))) == [f"{ep.id}#2"]
    with pytest.raises(StoreError, match="give words"):
        store.search.find("")
    with pytest.raises(ValueError, match="above"):
        SearchFilters(self_min=2, self_max=1)


def test_limit_says_there_is_more(store: Store, run):
    ep = store.episodes.add_episode(make_episode(run))
    store.episodes.add_steps([make_step(ep.id, i) for i in range(12)])
    result = store.search.find("board", limit=5)
    assert len(result.hits) == 5 and result.more
    assert [h.step_index for h in result.hits] == [11, 10, 9, 8, 7]  # newest first
    assert not store.search.find("board", limit=12).more


# ----- annotations --------------------------------------------------------------------------------
def test_annotations_on_step_episode_and_summary(store: Store, run):
    ep = store.episodes.add_episode(make_episode(run))
    store.episodes.add_steps([make_step(ep.id, 0), make_step(ep.id, 1)])
    summary = store.summaries.add_summary(run.id, "r", "a", "n")
    a = store.annotations.add_annotation("step", "mistake", author="human:ann", note="went left after all",
                                         episode_id=ep.id, step_index=1, correction="D")
    b = store.annotations.add_annotation("episode", "lucky", author="human:ann", episode_id=ep.id)
    c = store.annotations.add_annotation("summary", "insight", author="human:bob", note="names the grudge",
                                         summary_id=summary.id)
    assert (a.target, b.target, c.target) == (f"{ep.id}#1", ep.id, f"summary:{summary.id}")
    assert store.annotations.list(run_id=run.id) == [a, b, c]
    assert store.annotations.annotations_of_steps(ep.id) == {1: [a]}
    assert _targets(store.search.find("went")) == [f"{ep.id}#1"]
    assert _targets(store.search.find("mistake")) == [f"{ep.id}#1"]  # labels are searchable too
    assert _targets(store.search.find("grudge")) == [f"summary:{summary.id}"]
    labelled = store.search.find("", SearchFilters(labels=("lucky",)))
    assert {h.target for h in labelled.hits} == {f"{ep.id}#0", f"{ep.id}#1", ep.id}
    assert store.annotations.remove_annotation(a.id) == a
    assert store.search.find("went").hits == ()
    for kwargs, message in (
            (dict(kind="step", label="mistake", episode_id=ep.id, step_index=9), "no step 9"),
            (dict(kind="episode", label="mistake", episode_id="nope"), "no episode"),
            (dict(kind="summary", label="mistake", summary_id="nope"), "no summary"),
            (dict(kind="episode", label="two words", episode_id=ep.id), "one word"),
            (dict(kind="episode", label="odd", episode_id=ep.id, labels=("mistake",)), "unknown label"),
            (dict(kind="episode", label="mistake", episode_id=ep.id, correction="D"), "corrected action")):
        with pytest.raises(StoreError, match=message):
            store.annotations.add_annotation(author="human:ann", **kwargs)
    with pytest.raises(StoreError, match="author"):
        store.annotations.add_annotation("episode", "lucky", author="ann", episode_id=ep.id)


def test_removing_a_run_takes_its_annotations(store: Store, run, db_path: Path):
    ep = store.episodes.add_episode(make_episode(run))
    store.episodes.add_step(make_step(ep.id, 0))
    summary = store.summaries.add_summary(run.id, "r", "a", "n")
    store.annotations.add_annotation("step", "mistake", author="human:a", note="zebra", episode_id=ep.id, step_index=0)
    store.annotations.add_annotation("summary", "insight", author="human:a", note="zebra", summary_id=summary.id)
    store.hygiene.remove_runs([run.id])
    assert store.annotations.list() == [] and store.search.find("zebra").hits == ()
    _fts_ok(db_path)


# ----- an upgraded file ---------------------------------------------------------------------------
def test_an_older_file_is_upgraded_with_a_backup_and_indexed_on_first_use(db_path: Path,
                                                                       monkeypatch: pytest.MonkeyPatch):
    as_older_code(monkeypatch, 7)
    with Store(db_path) as old:
        run = old.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
        ep = old.episodes.add_episode(make_episode(run))
        old.episodes.add_steps([make_step(ep.id, i, feedback=f"older move {i}") for i in range(23)])
    monkeypatch.undo()
    notices: list[str] = []
    with Store(db_path, notify=notices.append) as store:
        assert store.upgraded is not None and store.upgraded.backup is not None
        assert store.upgraded.backup.exists() and "backup" in notices[0]
        assert store.search.search_backlog() == 23
        store.episodes.add_step(make_step(ep.id, 23, feedback="older move 23"))
        # a step removed before it is indexed must not break the index
        store.conn.execute("DELETE FROM steps WHERE episode_id = ? AND \"index\" = 5", (ep.id,))
        assert store.search.search_backlog() == 23
        seen: list[tuple[int, int]] = []
        assert store.search.index_backlog(progress=lambda d, t: seen.append((d, t)), batch=10) == 23
        assert seen == [(10, 23), (20, 23), (23, 23)]
        found = store.search.find("older", limit=100)
        assert found.backlog == 0 and len(found.hits) == 23
    _fts_ok(db_path)


def test_a_search_indexes_what_waits_unless_it_is_many_or_the_store_is_read_only(store: Store, run, db_path: Path,
                                                                               monkeypatch: pytest.MonkeyPatch):
    ep = store.episodes.add_episode(make_episode(run))
    store.episodes.add_steps([make_step(ep.id, i, feedback="queued move") for i in range(4)])
    assert store.search.search_backlog() == 4
    with Store(db_path, read_only=True) as reader:
        result = reader.search.find("queued")
        assert result.backlog == 4 and result.hits == ()  # said, not hidden
    monkeypatch.setattr("s3gym_tui.store.search.FLUSH_AT_MOST", 3)
    assert store.search.find("queued").backlog == 4
    monkeypatch.undo()
    assert len(store.search.find("queued").hits) == 4 and store.search.search_backlog() == 0
    store.episodes.add_step(make_step(ep.id, 4, feedback="queued move"))
    store.episodes.finish_episode(ep.id, 1.0)  # an episode's end indexes its steps
    assert store.search.search_backlog() == 0
    _fts_ok(db_path)


def test_indexing_the_backlog_refuses_a_full_disk(db_path: Path, monkeypatch: pytest.MonkeyPatch):
    as_older_code(monkeypatch, 7)
    with Store(db_path) as old:
        run = old.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
        ep = old.episodes.add_episode(make_episode(run))
        old.episodes.add_steps([make_step(ep.id, i) for i in range(5)])
    monkeypatch.undo()
    with Store(db_path, notify=lambda _: None) as store:
        with pytest.raises(StoreError, match="not enough free space .* nothing was changed"):
            store.search.index_backlog(free_bytes=lambda _: 10)
        assert store.search.search_backlog() == 5


def test_a_file_of_the_per_step_index_is_moved_to_the_queue(db_path: Path, monkeypatch: pytest.MonkeyPatch):
    """Schema 8 indexed each step as it was stored, with a backlog range of older steps; schema 10 queues."""
    as_older_code(monkeypatch, 7)
    with Store(db_path) as old:
        run = old.runs.create_run(RunConfig(model="scripted/trust", game="trust"))
        ep = old.episodes.add_episode(make_episode(run))
        old.episodes.add_steps([make_step(ep.id, i, feedback=f"older move {i}") for i in range(6)])  # the backlog
    monkeypatch.undo()
    as_older_code(monkeypatch, 9)
    with Store(db_path, notify=lambda _: None) as mid:
        mid.episodes.add_steps([make_step(ep.id, i, feedback=f"older move {i}") for i in range(6, 9)])  # indexed at once
        assert mid.conn.execute("SELECT count(*) FROM search_steps WHERE search_steps MATCH 'older'"
                                ).fetchone()[0] == 3
    monkeypatch.undo()
    with Store(db_path, notify=lambda _: None) as store:
        assert store.search.search_backlog() == 6  # the backlog range, queued
        store.episodes.add_step(make_step(ep.id, 9, feedback="older move 9"))
        store.conn.execute("DELETE FROM steps WHERE episode_id = ? AND \"index\" IN (1, 7)", (ep.id,))
        assert sorted(h.step_index for h in store.search.find("older", limit=100).hits) == [0, 2, 3, 4, 5, 6, 8, 9]
    _fts_ok(db_path)


def test_a_busy_file_still_answers_and_says_what_it_could_not_index(store: Store, run, db_path: Path):
    ep = store.episodes.add_episode(make_episode(run))
    store.episodes.add_step(make_step(ep.id, 0, feedback="queued move"))
    other = sqlite3.connect(db_path, isolation_level=None)
    other.execute("BEGIN IMMEDIATE")  # another process holds the write lock
    try:
        with Store(db_path, busy_timeout=0.2) as searcher:
            result = searcher.search.find("queued")
        assert result.backlog == 1 and result.hits == ()
    finally:
        other.execute("ROLLBACK")
        other.close()
    assert len(store.search.find("queued").hits) == 1
