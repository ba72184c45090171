"""ASPIRE's hidden suite against an agent that guesses (issue 36): a refused guess of a hidden seed is the
agent's own, not a leak, and no refusal repeats it; a hidden value the system gives the agent is still a
leak (a leaky controller as the test double); hidden suites come from the store's secret, not from the
source (old stores keep the suites their runs were judged on); decisions are stored and sent back to
the model within bounds, a cut recorded as a step's is."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from dataclasses import replace

from s3gym_tui.engine.aspire.audit import audit_aspire
from s3gym_tui.engine.aspire.controller import Controller, Settings
from s3gym_tui.engine.aspire.goals import GOALS, SUITE_SEED_BASE, HiddenSuite, SuiteGame, goal_by_id
from s3gym_tui.engine.aspire.operators import AgentTurn, ScriptedOperator, history_messages
from s3gym_tui.engine.aspire.tools import Refused, check_allowed
from s3gym_tui.models import EVAL_SEED_BASE
from s3gym_tui.store import Store
from s3gym_tui.store import schema

from tests.aspire.test_aspire import ListOperator, run_cli

GOAL = goal_by_id("cooperation")


def new_run(store, goal=GOAL):
    return store.aspire.create_aspire_run(goal_id=goal.id, goal_text=goal.text, model="scripted", protocol="final",
                                          budget={"decisions": 12}, operator="scripted",
                                          settings=Settings(player="scripted", step_cap=4).__dict__)


def hidden_seeds(store, aspire_id) -> list[int]:
    """The seeds its hidden evaluation really played (what a person reads in the store)."""
    return sorted({e.seed for link in store.aspire.aspire_links(aspire_id, "hidden") for e in store.episodes.list(link.run_id)})


def test_a_refused_guess_of_a_hidden_seed_is_not_a_leak(tmp_path, capsys):
    """An agent that names the hidden seeds (as one that read them somewhere might) and the suite's name:
    refused or answered with an error that never repeats them; the audits pass and list the guesses."""
    db = str(tmp_path / "a.db")
    code, _, err = run_cli(capsys, "aspire", "--goal-id", GOAL.id, "--model", "scripted", "--step-cap", "4",
                           "--db", db)
    assert code == 0, err
    with Store(db) as store:
        (first,) = store.aspire.list_aspire_runs()
        seeds = hidden_seeds(store, first.id)  # the same store and goal: the same suite
        run = new_run(store)
        base = f"{run.id}-base"
        op = ListOperator([AgentTurn(tool="practise", arguments={"game": "trust", "seed": seeds[0]},
                                     reply=f"Let me practise on {seeds[0]}."),
                           AgentTurn(tool="validate", arguments={"candidate": base, "game": "trust",
                                                                 "seeds": [3, seeds[1]]}),
                           AgentTurn(tool="look", arguments={"what": "suite-cooperation"}),
                           AgentTurn(tool="update", arguments={"action": "write_summary", "game": "trust",
                                                               "parent": base, "retain": f"seed {seeds[2]}"}),
                           AgentTurn(tool="look", arguments={"what": "summaries"})])
        asyncio.run(Controller(store, run.id, op).run_all())
        decisions = store.aspire.aspire_decisions(run.id)
        assert [d.outcome for d in decisions[:5]] == ["refused", "refused", "error", "ok", "ok"]
        for d in decisions[:3]:  # what the system answered a guess with never repeats it
            assert not any(str(s) in d.result for s in seeds), d.result
        assert "suite-cooperation" in decisions[2].result  # an error repeating the agent's own word...
        assert str(seeds[2]) in decisions[4].result  # ... and its own summary shown back to it
        found = audit_aspire(store, run.id)
        assert found.ok, found.leaks
        assert found.own[:4] == ["hidden seed #1 guessed by the agent in decision 0 (practise, refused)",
                                 "hidden seed #2 guessed by the agent in decision 1 (validate, refused)",
                                 "the suite's name guessed by the agent in decision 2 (look, error)",
                                 "hidden seed #3 guessed by the agent in decision 3 (update, ok)"]
        assert "the suite's name in decision 2 (look) result: the agent's own, from decision 2" in found.own
        assert "hidden seed #3 in decision 4 (look) result: the agent's own, from decision 3" in found.own
    code, out, _ = run_cli(capsys, "aspire", "--audit", run.id, "--db", db)
    assert code == 0 and "no hidden seed or suite name reached the agent" in out and "own guesses" in out
    assert not any(str(s) in out for s in seeds)  # the audit names hidden seeds by their place only
    code, out, _ = run_cli(capsys, "audit", "--db", db)
    assert code == 0 and "audit clean" in out and f"ASPIRE run {run.id}: " in out


class LeakyController(Controller):
    """The test double: its `look` tells the agent a hidden seed (a real leak, through the system)."""

    async def _tool_look(self, args, idx):
        result = await super()._tool_look(args, idx)
        return replace(result, text=result.text + f" (between us: {self.suite.seeds()[1]})")


def test_a_hidden_value_the_system_gives_the_agent_is_a_leak(tmp_path, capsys):
    """Even when the agent repeats it afterwards (its later 'guess' is no guess)."""
    db = str(tmp_path / "a.db")
    with Store(db) as store:
        run = new_run(store)
        leaked = LeakyController(store, run.id, ScriptedOperator()).suite.seeds()[1]
        op = ListOperator([AgentTurn(tool="look", arguments={"what": "games"}),
                           AgentTurn(tool="practise", arguments={"game": "trust", "seed": leaked})])
        asyncio.run(LeakyController(store, run.id, op).run_all())
        found = audit_aspire(store, run.id)
    assert found.leaks[0] == "hidden seed #2 in decision 0 (look) result"
    assert "hidden seed #2 guessed by the agent in decision 1 (practise, refused)" in found.own
    code, out, _ = run_cli(capsys, "aspire", "--audit", run.id, "--db", db)
    assert code == 1 and "leak: hidden seed #2 in decision 0 (look) result" in out and str(leaked) not in out
    code, out, _ = run_cli(capsys, "audit", "--db", db)
    assert code == 1 and f"ASPIRE run {run.id}: hidden seed #2 in decision 0 (look) result" in out


def test_a_refusal_is_the_same_for_every_evaluation_seed():
    """A refusal that differed for a hidden seed would tell the agent it guessed right."""
    suite = GOAL.suite.drawn("a secret", GOAL.id)
    texts = set()
    for seed in (suite.seeds()[0], EVAL_SEED_BASE, EVAL_SEED_BASE + 5, 10 ** 12):
        for args in ({"game": "trust", "seed": seed}, {"seeds": [1, seed]}):
            try:
                check_allowed("practise", args)
            except Refused as exc:
                texts.add(str(exc))
                assert str(seed) not in str(exc)
    assert len(texts) == 1
    for tool, asked in (("validate", [{"mode": "eval"}, {"mode": str(suite.seeds()[0])}]),
                        ("look", [{"what": "scores"}, {"what": "Suite"}])):
        answers = set()
        for args in asked:
            try:
                check_allowed(tool, args)
            except Refused as exc:
                answers.add(str(exc))
        assert len(answers) == 1 and str(suite.seeds()[0]) not in answers.pop()


def test_hidden_suites_are_drawn_from_the_stores_secret(tmp_path):
    """Each store draws its own seeds (none named in the source, all held out, a slot per game), the same
    ones every time it is opened; the secret is where no tool of the agent reads."""
    drawn = []
    for name in ("a.db", "b.db"):
        with Store(tmp_path / name) as store:
            run = new_run(store)
            drawn.append(Controller(store, run.id, ScriptedOperator()).suite)
        with Store(tmp_path / name) as store:  # again: the same suite
            assert Controller(store, run.id, ScriptedOperator()).suite == drawn[-1]
    fixed = {s for goal in GOALS for s in goal.suite.seeds()}
    for suite in drawn:
        assert [(g.game, g.episodes, g.weight) for g in suite.games] == \
            [(g.game, g.episodes, g.weight) for g in GOAL.suite.games]
        assert all(SUITE_SEED_BASE <= s < 2 ** 31 for s in suite.seeds()) and not fixed & set(suite.seeds())
    assert drawn[0].seeds() != drawn[1].seeds()
    many = HiddenSuite("x", tuple(SuiteGame("trust", 0, 10, 1.0) for _ in range(50))).drawn("s", "k")
    assert len(set(many.seeds())) == 500  # no seed serves two games
    with Store(tmp_path / "a.db") as store:  # a whole run: the secret is in no result, prompt or reply
        secret = store.aspire.aspire_suite_secret()
        run = new_run(store)
        asyncio.run(Controller(store, run.id, ScriptedOperator()).run_all())
        seen = [d.result + d.reply for d in store.aspire.aspire_decisions(run.id)]
        seen += [s.prompt for link in store.aspire.aspire_links(run.id) for e in store.episodes.list(link.run_id)
                 for s in store.episodes.steps(e.id)]
        assert len(secret) == 64 and not any(secret in text for text in seen)


def test_an_existing_store_keeps_the_suites_its_runs_were_judged_on(tmp_path, monkeypatch):
    """A schema-14 store with an ASPIRE run: the upgrade gives the store its secret; the old run keeps its
    fixed seeds (its hidden scores were measured on them), a new run draws its own."""
    path = tmp_path / "old.db"
    before = schema.MIGRATIONS.index(schema._v15_aspire_suite_secret)
    monkeypatch.setattr(schema, "MIGRATIONS", schema.MIGRATIONS[:before])
    with Store(path) as store:
        assert store.schema_version == before
    monkeypatch.undo()
    conn = sqlite3.connect(path)
    conn.execute("INSERT INTO aspire_runs (id, goal_id, goal_text, model, protocol, settings, created_at) VALUES "
                 "('aspire-old', 'cooperation', 'Become better at working with a partner you do not know.', "
                 "'scripted', 'final', '{\"player\": \"scripted\"}', '2026-01-01T00:00:00+00:00')")
    conn.commit()
    conn.close()
    with Store(path) as store:
        old = store.aspire.get_aspire_run("aspire-old")
        assert old.suite == "fixed" and len(store.aspire.aspire_suite_secret()) == 64
        assert Controller(store, old.id, ScriptedOperator()).suite == GOAL.suite  # the seeds it was judged on
        new = new_run(store)
        assert new.suite == "drawn"
        assert Controller(store, new.id, ScriptedOperator()).suite == GOAL.suite.drawn(
            store.aspire.aspire_suite_secret(), GOAL.id)


def test_decisions_are_stored_and_sent_back_within_bounds(tmp_path, capsys):
    """A 3,000,059-character reply, a megabyte of arguments and of tool name: stored cut (start and end
    kept), the cut said in the decision's fault; what goes back to the model stays small."""
    from s3gym_tui.engine.session import MAX_REPLY_CHARS

    huge = "a" * 3_000_000 + "THE END" + "b" * 52
    turns = [AgentTurn(tool="look", arguments={"what": "games"}, reply=huge),
             AgentTurn(tool="look", arguments=json.dumps({"what": "games", "note": "x" * 1_000_000})),
             AgentTurn(tool="t" * 1_000_000, arguments={})]
    db = str(tmp_path / "a.db")
    with Store(db) as store:
        run = new_run(store)
        asyncio.run(Controller(store, run.id, ListOperator(turns)).run_all())
        d0, d1, d2, *rest = store.aspire.aspire_decisions(run.id)
    assert len(huge) == 3_000_059
    assert d0.reply.startswith("aaa") and d0.reply.endswith("THE END" + "b" * 52)
    assert len(d0.reply) < MAX_REPLY_CHARS + 100 and d0.fault == "reply cut to 100,000 characters (was 3,000,059)"
    assert len(d1.arguments["raw"]) < 30_000 and d1.fault.startswith("arguments cut to")
    assert d1.outcome == "ok"  # the call itself was whole
    assert len(d2.tool) < 1_000 and d2.fault.startswith("tool name cut to")
    assert d2.outcome == "error"
    assert rest and all(d.fault is None for d in rest)
    code, out, _ = run_cli(capsys, "aspire", "--show", run.id, "--db", db)
    assert code == 0 and "reply cut to 100,000 characters (was 3,000,059)" in out
    briefing = {"goal": "g", "protocol": "final", "budget": {}, "base": "b", "requests": 0}
    sent = history_messages(briefing, [d0, d1, d2])
    assert max(len(m["content"]) for m in sent) < 2_500 and sum(len(m["content"]) for m in sent) < 10_000
    many = [replace(d0, idx=i, reply="r" * 5_000, result="x" * 5_000) for i in range(500)]
    sent = history_messages(briefing, many)
    assert sum(len(m["content"]) for m in sent) <= 48_000
    assert "earlier turn(s) are not repeated" in sent[1]["content"] and len(sent) > 10
