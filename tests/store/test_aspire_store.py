"""The ASPIRE tables and their read API (store/aspire.py): what is written reads back, in order."""

from __future__ import annotations

import sqlite3

import pytest

from s3gym_tui.store import Store, StoreError


def test_aspire_run_decisions_candidates_claims_scores_round_trip(tmp_path):
    with Store(tmp_path / "s.db") as store:
        run = store.aspire.create_aspire_run(goal_id="planning", goal_text="plan better", model="scripted/x",
                                             protocol="adaptive", budget={"calls": 10}, operator="scripted")
        assert run.status == "created" and run.budget == {"calls": 10} and not run.explicit
        d0 = store.aspire.add_aspire_decision(run.id, tool="look", arguments={"what": "games"}, result="7 games",
                                              outcome="ok", category="interpretation", calls=1, tokens_in=5,
                                              tokens_out=3, cost=None)
        d1 = store.aspire.add_aspire_decision(run.id, tool="practise", arguments="{not json", result="error: x",
                                              outcome="error", category="practice", calls=1, cost=0.5, seconds=2.0)
        assert (d0.idx, d1.idx) == (0, 1) and d1.arguments == {"raw": "{not json"}  # raw text kept, not JSON
        assert [d.idx for d in store.aspire.aspire_decisions(run.id, after=0)] == [1]
        split = store.aspire.compute_split(run.id)
        assert split["interpretation"]["cost"] is None  # an unpriced call: unknown, not 0
        assert split["practice"]["cost"] == 0.5 and split["practice"]["seconds"] == 2.0

        base = store.aspire.add_aspire_candidate(run.id, kind="base", model="scripted/x", frozen_ref="scripted/x")
        child = store.aspire.add_aspire_candidate(run.id, kind="memory", model="scripted/x", parent_id=base.id,
                                                  summary_id="s1", frozen_ref="s1", game="trust")
        with pytest.raises(StoreError, match="no candidate"):
            store.aspire.add_aspire_candidate(run.id, kind="sft", model="m", parent_id="nope")
        with pytest.raises(StoreError, match="bad candidate kind"):
            store.aspire.add_aspire_candidate(run.id, kind="magic", model="m")
        store.aspire.set_candidate_status(child.id, "rolled_back")
        cands = store.aspire.aspire_candidates(run.id)
        assert [(c.kind, c.parent_id, c.status) for c in cands] == [
            ("base", None, "active"), ("memory", base.id, "rolled_back")]
        store.aspire.set_aspire_candidates(run.id, base=base.id, final=child.id, retained=base.id)
        store.aspire.add_aspire_claim(run.id, text="better at trust by 0.1", candidate_id=child.id, claimed_delta=0.1)
        store.aspire.set_hidden_score(run.id, base.id, "base", 0.25, {"trust": 0.25}, 4, ["r1"])
        store.aspire.set_hidden_score(run.id, child.id, "final", None, {"trust": None}, 0)
        store.aspire.link_aspire_run(run.id, "r1", "hidden", base.id)
        store.aspire.set_aspire_status(run.id, "finished", "submitted")

        got = store.aspire.get_aspire_run(run.id)
        assert (got.status, got.base_candidate_id, got.final_candidate_id, got.retained_candidate_id) == (
            "finished", base.id, child.id, base.id)
        assert got.finished_at is not None and got.status_reason == "submitted"
        assert [c.claimed_delta for c in store.aspire.aspire_claims(run.id)] == [0.1]
        scores = {s.purpose: s for s in store.aspire.hidden_scores(run.id)}
        assert scores["base"].score == 0.25 and scores["base"].run_ids == ["r1"]
        assert scores["final"].score is None and scores["final"].per_game == {"trust": None}
        assert [link.run_id for link in store.aspire.aspire_links(run.id, "hidden")] == ["r1"]
        assert [r.id for r in store.aspire.list_aspire_runs()] == [run.id]
        with pytest.raises(StoreError, match="bad protocol"):
            store.aspire.create_aspire_run(goal_id="g", goal_text="t", model="m", protocol="sometimes", budget={})


def test_deleting_an_aspire_run_cascades_to_its_rows(tmp_path):
    with Store(tmp_path / "s.db") as store:
        run = store.aspire.create_aspire_run(goal_id="g", goal_text="t", model="m", protocol="final", budget={})
        store.aspire.add_aspire_decision(run.id, tool="look", arguments={}, result="", outcome="ok", category="other")
        store.aspire.add_aspire_candidate(run.id, kind="base", model="m")
    conn = sqlite3.connect(tmp_path / "s.db")
    conn.execute("PRAGMA foreign_keys = ON")
    conn.execute("DELETE FROM aspire_runs")
    conn.commit()
    assert conn.execute("SELECT count(*) FROM aspire_decisions").fetchone()[0] == 0
    assert conn.execute("SELECT count(*) FROM aspire_candidates").fetchone()[0] == 0
