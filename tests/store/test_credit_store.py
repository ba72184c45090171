"""Stored credit per action (store/credit.py) read back through engine.credit.episode_credit."""

from __future__ import annotations

import pytest

from s3gym_tui.engine.credit import episode_credit
from s3gym_tui.store import LeakageError, Store, StoreError


def _extraction(store: Store, episodes, purpose="view", cite=None):
    a, b = episodes[0], episodes[1]
    return store.credit.add_pi_extraction(
        game=a.game, mode=a.mode, seed=a.seed, episode_ids=[e.id for e in episodes],
        successful_ids=[b.id], success_rule="self", analyzer="scripted/trust", prompt="the prompt",
        reply="the raw reply", purpose=purpose,
        items=[{"requirement": "cooperate first", "condition": "at the start", "cues": ["board"],
                "evidence": [(cite or b.id, 0)]},
               {"requirement": "defect last", "condition": "late", "cues": [], "evidence": [(b.id, 1)]}])


def test_credit_round_trip(store: Store, explored):
    target = explored[0]
    assert episode_credit(store, target.id) is None  # never computed: undefined
    ext = _extraction(store, explored)
    store.credit.add_episode_credit(target.id, extraction_id=ext, advantage=-0.5, reward=0.0,
                                    group_ids=[e.id for e in explored], analyzer="scripted/trust", scorer=None,
                                    credit="action", kappa=0.05, tau=1.0, eps_w=0.5, note="no scorer",
                                    actions=[(0, 1.2, 0.3, [f"{ext}.0"]), (1, None, None, [])])
    credit = episode_credit(store, target.id)
    assert credit.advantage == -0.5 and credit.group == tuple(e.id for e in explored)
    assert credit.successful == (explored[1].id,) and credit.note == "no scorer"
    first, second = credit.actions
    assert (first.step, first.action, first.weight, first.shift) == (0, "C", 1.2, 0.3)
    assert first.items[0].requirement == "cooperate first"
    assert first.items[0].evidence == ((explored[1].id, 0),)
    assert first.advantage(credit.advantage) == pytest.approx(-0.6)
    assert second.weight is None and second.advantage(credit.advantage) is None and second.items == ()
    assert [i.id for i in credit.items] == [f"{ext}.0", f"{ext}.1"]
    assert store.credit.pi_extraction(ext)["reply"] == "the raw reply"
    assert credit.to_json()["actions"][1]["weight"] is None


def test_training_pi_never_reads_evaluation_episodes(store: Store, explored, evaluated):
    with pytest.raises(LeakageError):
        _extraction(store, explored, purpose="training", cite=evaluated[0].id)
    with pytest.raises(StoreError):
        _extraction(store, explored, cite="no-such-episode")
    assert _extraction(store, explored, purpose="training")


def test_removing_a_run_removes_its_credit_and_the_pi_that_read_it(store: Store, run, explored):
    ext = _extraction(store, explored)
    store.credit.add_episode_credit(explored[0].id, extraction_id=ext, advantage=1.0, reward=1.0,
                                    group_ids=[e.id for e in explored], analyzer="a", scorer="s", credit="action",
                                    kappa=0.05, tau=1.0, eps_w=0.5, actions=[(0, 1.0, None, [])])
    store.hygiene.remove_runs([run.id])
    for table in ("pi_extractions", "pi_items", "pi_evidence", "episode_credits", "action_credits"):
        assert store.conn.execute(f"SELECT count(*) FROM {table}").fetchone()[0] == 0, table


def test_audit_finds_evaluation_episodes_in_training_pi_written_around_the_guard(store: Store, explored, evaluated):
    from s3gym_tui.store import audit

    ext = _extraction(store, explored, purpose="training")
    assert audit(store).ok
    item = f"{ext}.0"
    store.conn.execute("INSERT INTO pi_evidence (item_id, episode_id, step_index) VALUES (?, ?, 0)",
                       (item, evaluated[0].id))  # raw SQL, around the store's guard
    store.conn.execute("UPDATE pi_extractions SET episode_ids = json_insert(episode_ids, '$[#]', ?) WHERE id = ?",
                       (evaluated[1].id, ext))
    store.credit.add_episode_credit(evaluated[1].id, extraction_id=None, advantage=1.0, reward=1.0, group_ids=[],
                                    analyzer="a", scorer=None, credit="action", kappa=0.05, tau=1.0, eps_w=0.5,
                                    actions=[], training_id="t-1")
    found = {(f.episode_id, f.detail.split()[0]) for f in audit(store).eval_in_training_pi}
    assert found == {(evaluated[0].id, "training"), (evaluated[1].id, "training")} and \
        len(audit(store).eval_in_training_pi) == 3
    # PI made for reading an evaluation episode (no training) is no leak
    view = _extraction(store, [evaluated[0], evaluated[1]])
    assert store.credit.pi_extraction(view)["purpose"] == "view"
    assert len(audit(store).eval_in_training_pi) == 3
