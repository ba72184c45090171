"""ASPIRE (issue 25) offline: the scripted operator on scripted games, through the CLI where a person would
go, then the store read back. Full runs per protocol, lineage and rollback, budgets, bad calls, the hidden
suite absent from everything the agent saw (canary seeds), resume after Ctrl-C, the report's table."""

from __future__ import annotations

import asyncio
import json

import pytest

from s3gym_tui.cli import main
from s3gym_tui.engine.aspire import controller as controller_mod
from s3gym_tui.engine.aspire.audit import AspireAudit, audit_aspire
from s3gym_tui.engine.aspire.budget import Budget
from s3gym_tui.engine.aspire.controller import Controller, Settings
from s3gym_tui.engine.aspire.goals import Goal, HiddenSuite, SuiteGame
from s3gym_tui.engine.aspire.hidden import suite_of
from s3gym_tui.engine.aspire.operators import AgentTurn, ScriptedOperator, history_messages, system_prompt
from s3gym_tui.models import EVAL_SEED_BASE
from s3gym_tui.store import Store

CANARY_SEED = EVAL_SEED_BASE + 777_123
CANARY_NAME = "suite-canary-7f3a"
CANARY_GOALS = (Goal("canary", "Become better at working with a partner you do not know.",
                     HiddenSuite(CANARY_NAME, (SuiteGame("trust", CANARY_SEED, 2, 1.0),))),)


def run_cli(capsys, *args) -> tuple[int, str, str]:
    code = main(list(args))
    out = capsys.readouterr()
    return code, out.out, out.err


def only_run(db) -> str:
    with Store(db) as store:
        runs = store.aspire.list_aspire_runs()
    assert len(runs) == 1
    return runs[0].id


def new_run(store, protocol="final", budget=Budget(), goal="canary", **settings):
    return store.aspire.create_aspire_run(goal_id=goal, goal_text=CANARY_GOALS[0].text, model="scripted", protocol=protocol,
                                          budget=budget.as_dict(), operator="scripted",
                                          settings=Settings(player="scripted", step_cap=6, **settings).__dict__)


class ListOperator:
    """Fixed turns in order, then the scripted plan; records every briefing and conversation it got."""

    def __init__(self, turns):
        self.turns = list(turns)
        self.fallback = ScriptedOperator()
        self.seen: list[str] = []

    async def next_turn(self, briefing, decisions):
        self.seen.append(system_prompt(briefing))
        self.seen.extend(m["content"] for m in history_messages(briefing, decisions, result_chars=10**9,
                                                                max_chars=10**12))
        if self.turns:
            return self.turns.pop(0)
        return await self.fallback.next_turn(briefing, decisions)


@pytest.mark.parametrize("protocol", ["final", "adaptive"])
def test_full_run_per_protocol_through_the_cli(tmp_path, capsys, protocol):
    db = str(tmp_path / "a.db")
    code, out, err = run_cli(capsys, "aspire", "--goal-id", "cooperation", "--model", "scripted", "--protocol",
                             protocol, "--step-cap", "6", "--db", db)
    assert code == 0, err
    assert "hidden base" in out and "measured delta" in out
    aid = only_run(db)
    with Store(db) as store:
        run = store.aspire.get_aspire_run(aid)
        tools = [d.tool for d in store.aspire.aspire_decisions(aid)]
        cands = store.aspire.aspire_candidates(aid)
        scores = {s.purpose: s for s in store.aspire.hidden_scores(aid)}
        claims = store.aspire.aspire_claims(aid)
        hidden_runs = [store.runs.get_run(link.run_id) for link in store.aspire.aspire_links(aid, "hidden")]
        practice = [store.runs.get_run(link.run_id) for link in store.aspire.aspire_links(aid, "practice")]
    assert run.status == "finished" and run.status_reason == "submitted"
    expected = ["look", "practise", "update", "validate", "update", "submit"]
    if protocol == "adaptive":
        expected = ["look", "practise", "update", "validate", "evaluate", "update", "evaluate", "submit"]
    assert tools == expected
    assert [c.kind for c in cands] == ["base", "memory", "memory"]
    assert {"base", "final", "retained"} <= set(scores) and scores["base"].score is not None
    assert run.final_candidate_id == claims[-1].candidate_id
    # strict: the hidden runs are evaluation only, on the suite's held-out seeds, in eval mode
    assert hidden_runs and all(r.config.explore_episodes == 0 and r.config.eval_seed_base >= EVAL_SEED_BASE
                               for r in hidden_runs)
    assert practice and all(r.config.eval_episodes == 0 and r.config.explore_seed_base < EVAL_SEED_BASE
                            for r in practice)
    code, out, _ = run_cli(capsys, "aspire", "--audit", aid, "--db", db)
    assert code == 0 and "no hidden seed" in out
    code, out, _ = run_cli(capsys, "audit", "--db", db)
    assert code == 0 and "audit clean" in out
    from s3gym_tui.engine.aspire.goals import goal_by_id
    from s3gym_tui.engine.aspire.hidden import suite_of

    with Store(db) as store:
        seed = suite_of(store, store.aspire.get_aspire_run(aid)).seeds()[0]  # drawn from the store's secret
        assert seed not in goal_by_id("cooperation").suite.seeds()  # not the seeds the source names
        assert {e.seed for r in hidden_runs for e in store.episodes.list(r.id)} == set(suite_of(
            store, store.aspire.get_aspire_run(aid)).seeds())
        store.aspire.add_aspire_decision(aid, tool="look", arguments={}, result=f"[{seed}]", outcome="ok",
                                         category="interpretation")
    code, out, _ = run_cli(capsys, "audit", "--db", db)
    assert code == 1 and f"ASPIRE run {aid}: hidden seed #1 in decision" in out and str(seed) not in out


def test_lineage_and_score_gated_rollback(tmp_path, monkeypatch):
    """Adaptive: a candidate that does not beat its parent is rolled back; one that does is kept.
    The hidden scores are set per candidate (the scripted policy ignores memory, so it cannot improve)."""
    wanted = {"-base": 0.5, "-c2": 0.4, "-c5": 0.7}  # c2 (child of base) worse; c5 (child of base) better
    real = controller_mod.hidden_score

    async def fake(store, aspire_id, cand, suite, step_cap, purpose="candidate"):
        value = next(v for k, v in wanted.items() if cand.id.endswith(k))
        return store.aspire.set_hidden_score(aspire_id, cand.id, purpose, value, {"trust": value}, 1)

    monkeypatch.setattr(controller_mod, "hidden_score", fake)
    with Store(tmp_path / "a.db") as store:
        run = new_run(store, protocol="adaptive")
        final = asyncio.run(Controller(store, run.id, ScriptedOperator(), CANARY_GOALS).run_all())
        cands = {c.id.rsplit("-", 1)[1]: c for c in store.aspire.aspire_candidates(run.id)}
        results = [json.loads(d.result) for d in store.aspire.aspire_decisions(run.id) if d.tool == "evaluate"]
    assert real is not fake
    assert cands["c2"].status == "rolled_back" and cands["c2"].parent_id == cands["base"].id
    assert cands["c5"].parent_id == cands["base"].id  # the plan moved back to the base after the rollback
    assert results[0]["rolled_back"] and results[0]["aggregate"] == 0.4
    assert "rolled_back" not in results[1] and results[1]["aggregate"] == 0.7
    assert final.final_candidate_id == cands["c5"].id == final.retained_candidate_id
    assert cands["c5"].status == "final"


def test_final_protocol_retains_the_base_when_final_does_not_beat_it(tmp_path, monkeypatch):
    async def fake(store, aspire_id, cand, suite, step_cap, purpose="candidate"):
        value = 0.5 if cand.kind == "base" else 0.5  # a tie does not beat the base
        return store.aspire.set_hidden_score(aspire_id, cand.id, purpose, value, {"trust": value}, 1)

    monkeypatch.setattr(controller_mod, "hidden_score", fake)
    with Store(tmp_path / "a.db") as store:
        run = new_run(store, protocol="final")
        final = asyncio.run(Controller(store, run.id, ScriptedOperator(), CANARY_GOALS).run_all())
    assert final.final_candidate_id != final.base_candidate_id
    assert final.retained_candidate_id == final.base_candidate_id


def test_budgets_are_enforced_and_over_budget_calls_recorded(tmp_path):
    with Store(tmp_path / "a.db") as store:
        run = new_run(store, budget=Budget(calls=10, tokens=None, seconds=None, decisions=6))
        final = asyncio.run(Controller(store, run.id, ScriptedOperator(), CANARY_GOALS).run_all())
        decisions = store.aspire.aspire_decisions(run.id)
        usage = store.aspire.get_aspire_run(run.id).usage
    assert len(decisions) == 6 and final.status_reason.startswith("decisions budget spent")
    over = [d for d in decisions if d.outcome == "over_budget"]
    assert over and all(d.tool == "validate" and "are left" in d.result for d in over)
    assert usage["calls"] <= 10 and usage["decisions"] == 6
    assert final.final_candidate_id is not None  # no submit: the newest usable candidate is judged


def test_bad_calls_get_an_error_are_recorded_and_counted(tmp_path):
    turns = [AgentTurn(tool="look", arguments="{not json"),
             AgentTurn(tool="fly", arguments={}),
             AgentTurn(tool=None, arguments="I think I will practise", error="no tool call found"),
             AgentTurn(tool="practise", arguments={"game": "trust", "seed": EVAL_SEED_BASE + 5}),
             AgentTurn(tool="validate", arguments={"candidate": "x", "game": "trust", "seeds": [1], "mode": "eval"}),
             AgentTurn(tool="look", arguments={"what": "scores"}),
             AgentTurn(tool="validate", arguments={"candidate": "x", "game": "trust", "seeds": [1], "reward": True}),
             AgentTurn(tool="update", arguments={"action": "grpo", "run": "r", "reward": "oracle"}),
             AgentTurn(tool="evaluate", arguments={"candidate": "x"}),
             AgentTurn(tool="practise", arguments={"game": "nope"}),
             AgentTurn(tool="submit", arguments={"candidate": "missing", "claim": "x"})]
    op = ListOperator(turns)
    with Store(tmp_path / "a.db") as store:
        run = new_run(store)
        final = asyncio.run(Controller(store, run.id, op, CANARY_GOALS).run_all())
        decisions = store.aspire.aspire_decisions(run.id)
        usage = store.aspire.get_aspire_run(run.id).usage
    outcomes = [d.outcome for d in decisions[:11]]
    assert outcomes == ["error", "error", "error", "refused", "refused", "refused", "refused", "refused", "error",
                        "error", "error"]
    assert "not valid JSON" in decisions[0].result and "unknown tool 'fly'" in decisions[1].result
    assert decisions[1].tool == "fly" and decisions[2].tool == "(none)"
    assert "evaluation seed" in decisions[3].result and "final-only" in decisions[8].result
    assert final.status == "finished" and final.status_reason == "submitted"  # the agent recovered
    assert usage["decisions"] == len(decisions)


def test_hidden_suite_never_reaches_the_agent(tmp_path):
    """Canary seeds and suite name: used by the hidden evaluation, absent from every briefing, message,
    tool result and practice prompt; the audit finds them when they do leak."""
    op = ListOperator([AgentTurn(tool="look", arguments={"what": "runs"}),
                       AgentTurn(tool="look", arguments={"what": "candidates"})])
    with Store(tmp_path / "a.db") as store:
        run = new_run(store, protocol="adaptive")
        asyncio.run(Controller(store, run.id, op, CANARY_GOALS).run_all())
        hidden = [store.runs.get_run(link.run_id) for link in store.aspire.aspire_links(run.id, "hidden")]
        hidden_seeds = {e.seed for r in hidden for e in store.episodes.list(r.id)}
        seen = "\n".join(op.seen + [d.result + json.dumps(d.arguments) + d.reply
                                    for d in store.aspire.aspire_decisions(run.id)])
        canaries = suite_of(store, store.aspire.get_aspire_run(run.id), CANARY_GOALS).seeds()  # drawn for this store
        assert hidden_seeds == set(canaries) and len(canaries) == 2  # the canaries were really played
        assert CANARY_SEED not in canaries  # the source's seed is not played
        assert any(d.tool == "evaluate" and d.outcome == "ok" for d in store.aspire.aspire_decisions(run.id))
        for needle in (*map(str, canaries), CANARY_NAME):
            assert needle not in seen
        assert audit_aspire(store, run.id, CANARY_GOALS) == AspireAudit([], [])
        leak = store.aspire.add_aspire_decision(run.id, tool="look", arguments={}, result=f"seed {canaries[1]}",
                                                outcome="ok", category="interpretation")
        found = audit_aspire(store, run.id, CANARY_GOALS)
    assert found.leaks == [f"hidden seed #2 in decision {leak.idx} (look) result"] and not found.own


def test_resume_after_ctrl_c(tmp_path, capsys, monkeypatch):
    db = str(tmp_path / "a.db")
    real = ScriptedOperator.next_turn
    calls = {"n": 0}

    async def interrupted(self, briefing, decisions):
        calls["n"] += 1
        if calls["n"] == 4:
            raise KeyboardInterrupt
        return await real(self, briefing, decisions)

    monkeypatch.setattr(ScriptedOperator, "next_turn", interrupted)
    code, out, err = run_cli(capsys, "aspire", "--goal-id", "rules", "--model", "scripted", "--step-cap", "6",
                             "--db", db)
    aid = only_run(db)
    assert code == 130 and f"resume with: s3gym aspire --resume {aid}" in err
    with Store(db) as store:
        assert store.aspire.get_aspire_run(aid).status == "interrupted"
        assert len(store.aspire.aspire_decisions(aid)) == 3
    code, out, err = run_cli(capsys, "resume", aid, "--db", db)
    assert code == 0, err
    with Store(db) as store:
        run = store.aspire.get_aspire_run(aid)
        decisions = store.aspire.aspire_decisions(aid)
    assert run.status == "finished" and [d.idx for d in decisions] == list(range(len(decisions)))
    assert [d.tool for d in decisions] == ["look", "practise", "update", "validate", "update", "submit"]
    assert run.usage["decisions"] == len(decisions)


def test_report_table_with_vague_and_explicit_runs(tmp_path, capsys):
    db = str(tmp_path / "a.db")
    for extra in ([], ["--explicit"]):
        code, _, err = run_cli(capsys, "aspire", "--goal-id", "cooperation", "--model", "scripted", "--step-cap", "6",
                               "--db", db, *extra)
        assert code == 0, err
    code, out, err = run_cli(capsys, "report", "--json", "--db", db)
    assert code == 0, err
    rows = json.loads(out)["aspire"]["runs"]
    vague, explicit = sorted(rows, key=lambda r: r["explicit"])
    assert explicit["gap"] is None and explicit["gap_n"] == 0  # undefined, not 0
    assert vague["gap_n"] == 1 and vague["gap"] == pytest.approx(explicit["final"] - vague["final"])
    assert vague["measured_delta"] == pytest.approx(vague["final"] - vague["base"])
    with Store(db) as store:
        explicit_run = next(r for r in store.aspire.list_aspire_runs() if r.explicit)
    assert "trust" in explicit_run.goal_text and str(EVAL_SEED_BASE)[:3] not in explicit_run.goal_text
    code, out, _ = run_cli(capsys, "report", "--db", db)
    assert code == 0 and "vague−explicit gap" in out and "(n=1)" in out


@pytest.mark.parametrize("seeds", [[True], [False], [1, True]])
def test_validate_refuses_what_is_no_seed_and_plays_nothing(tmp_path, seeds):
    """`validate seeds [true]` played seed 1: a JSON/TOML boolean passed as an integer (bool is int in Python)."""
    with Store(tmp_path / "a.db") as store:
        run = new_run(store, budget=Budget(calls=None, tokens=None, seconds=None, decisions=1))
        op = ListOperator([AgentTurn(tool="validate", arguments={"candidate": f"{run.id}-base", "game": "trust",
                                                                 "seeds": seeds})])
        asyncio.run(Controller(store, run.id, op, CANARY_GOALS).run_all())
        first = store.aspire.aspire_decisions(run.id)[0]
        played = [link for link in store.aspire.aspire_links(run.id) if link.role == "validation"]
    assert first.tool == "validate" and first.outcome == "error"
    assert "seeds must be a non-empty list of exploration seeds" in first.result
    assert played == []
