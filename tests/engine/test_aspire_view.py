"""engine/aspire_view.py: what the ASPIRE screen shows, from stored records. Hidden scores only once a run
has ended (before: undefined with the reason), lineage from the parents, deltas against the base and the
parent, the claim beside the measurement, the agent's own validations, the compute split in shares."""

from __future__ import annotations

import pytest

from s3gym_tui.engine.aspire_view import HIDDEN_WHY, aspire_view
from s3gym_tui.store import Store
from tests.ui.aspire_data import FINISHED, LIVE, fill_aspire


@pytest.fixture
def store(tmp_path):
    with Store(tmp_path / "a.db") as store:
        fill_aspire(store)
        yield store


def view_of(store, aspire_id):
    return aspire_view(store.aspire.get_aspire_run(aspire_id), store.aspire.aspire_decisions(aspire_id),
                       store.aspire.aspire_candidates(aspire_id), store.aspire.aspire_claims(aspire_id),
                       store.aspire.hidden_scores(aspire_id), store.aspire.compute_split(aspire_id))


def test_a_finished_run_shows_lineage_hidden_scores_and_claimed_against_measured(store):
    view = view_of(store, FINISHED)
    assert view.ended and view.hidden_why == ""
    grpo = view.candidate("cand-grpo-03")
    assert grpo.lineage == ("cand-base-00", "cand-memory-01", "cand-grpo-03") and grpo.depth == 2
    assert grpo.is_final and grpo.score.value == pytest.approx(0.43)
    assert grpo.vs_base.value == pytest.approx(0.02) and grpo.vs_parent.value == pytest.approx(-0.01)
    assert grpo.claimed.value == pytest.approx(0.3)
    assert grpo.validations == ("2 episodes; own judgement: best so far",)
    sft = view.candidate("cand-sft-02")
    assert sft.status == "rolled_back" and "rolled back" in sft.marks and sft.claimed.value is None
    assert view.candidate("cand-memory-01").retained and not sft.retained
    assert view.claimed_delta.value == pytest.approx(0.3)
    assert view.measured_delta.value == pytest.approx(0.02)
    assert view.retained_delta.value == pytest.approx(0.03)
    base = view.candidate("cand-base-00")
    assert base.is_base and base.vs_base.value is None and base.vs_parent.value is None


def test_before_the_end_every_hidden_figure_is_undefined_with_why_though_the_store_has_one(store):
    assert [s.score for s in store.aspire.hidden_scores(LIVE)] == [0.777]  # the controller wrote it
    view = view_of(store, LIVE)
    assert not view.ended and view.hidden_why.startswith(HIDDEN_WHY) and "adaptive" in view.hidden_why
    figures = [view.base_score, view.final_score, view.retained_score, view.measured_delta, view.retained_delta]
    for c in view.candidates:
        figures += [c.score, c.vs_base]
    assert all(f.value is None for f in figures)
    assert view.base_score.why.startswith(HIDDEN_WHY)
    assert view.claimed_delta.value is None and view.claimed_delta.why == "no claim yet"
    store.aspire.set_aspire_status(LIVE, "finished")  # the run ends: now it may be seen
    assert view_of(store, LIVE).base_score.value == pytest.approx(0.777)


def test_a_final_only_run_says_no_score_comes_before_the_end(store):
    store.aspire.set_aspire_status(FINISHED, "running")
    assert "final-only" in view_of(store, FINISHED).hidden_why


def test_the_compute_split_is_shares_of_the_model_calls_in_the_issues_order(store):
    split = view_of(store, FINISHED).split
    assert [s.category for s in split][:4] == ["interpretation", "practice", "update", "validation"]
    calls = {s.category: s.calls for s in split}
    assert calls == {"interpretation": 2, "practice": 20, "update": 4, "validation": 28, "submit": 1, "other": 1}
    assert sum(s.share for s in split) == pytest.approx(1.0)
    assert sum(s.token_share for s in split) == pytest.approx(1.0) and sum(s.time_share for s in split) == pytest.approx(1.0)
    assert {s.category: s.token_share for s in split}["practice"] == pytest.approx(20 / 56)  # 960 tokens a call
    assert {s.category: s.cost for s in split}["practice"] is None  # one practice call was unpriced: not $0
    empty = aspire_view(store.aspire.get_aspire_run(LIVE), [], [], [], [], {})
    assert all(s.share is None and s.token_share is None and s.time_share is None for s in empty.split)
    assert empty.candidates == ()
