"""Deterministic ASPIRE runs for the ASPIRE screen's tests (fixed ids and times), written through the
store's own API (store/aspire.py), as the controller writes them:

- FINISHED: a final-only run that ended: decisions of every compute category, one refused (it asked
  for an evaluation seed), one error (a malformed call) and one over budget; candidates base → memory →
  sft (rolled back) and base → memory → grpo (final); a claim (+0.30) and the hidden scores.
- LIVE: an adaptive run still marked running (no driver: interrupted), a claim-less base and memory;
  its hidden scores exist in the store but must not be shown before it ends."""

from __future__ import annotations

import sqlite3
from pathlib import Path

from s3gym_tui.store import Store

FINISHED = "aspire-planning-final"
LIVE = "aspire-rules-adaptive"
FIXED_TIME = "2026-01-02T03:04:05.000+00:00"
BUDGET = {"calls": 60, "tokens": 200000, "usd": 1.0, "seconds": 900}

DECISIONS = [  # tool, arguments, result, outcome, category, calls, cost, reply
    ("list_games", {}, "7 games: chess, snake, trust, minesweeper, 2048, hanabi, countdown (rules only)", "ok",
     "interpretation", 1, None, "Planning under uncertainty: which games have hidden state?"),
    ("read_rules", {"game": "minesweeper"}, "Minesweeper: reveal cells; numbers count adjacent mines.", "ok",
     "interpretation", 1, None, ""),
    ("practise", {"game": "minesweeper", "episodes": 3, "memory": "none"},
     "3 exploration episodes (seeds 11, 12, 13); own judgement: 2 of 3 went well", "ok", "practice", 19, 0.0042,
     "Start with no memory to see the baseline."),
    ("practise", {"game": "minesweeper", "seed": 1000003}, "refused: evaluation seeds are held out", "refused",
     "practice", 1, None, "Try the evaluation seeds directly."),
    ("write_summary", {"game": "minesweeper", "text": "Open corners first; count before guessing."},
     "memory candidate cand-memory-01 (summary v1)", "ok", "update", 1, 0.0003, ""),
    ("validate", {"candidate": "cand-memory-01", "seeds": [21, 22]},
     "2 episodes; own judgement: better than base on both", "ok", "validation", 14, 0.0031, ""),
    ("train_sft", {"from": "cand-memory-01", "episodes": "own best 5"}, "sft candidate cand-sft-02 trained (40 steps)",
     "ok", "update", 1, 0.0002, "Distil the memory into weights."),
    ("evaluate", {"candidate": "cand-sft-02", "mode": "eval"}, "error: unknown argument 'mode'", "error",
     "other", 1, None, ""),
    ("train_grpo", {"from": "cand-memory-01", "steps": 10_000}, "over budget: 10,000 steps > 1,200 tokens left",
     "over_budget", "update", 1, None, ""),
    ("train_grpo", {"from": "cand-memory-01", "steps": 8}, "grpo candidate cand-grpo-03 trained (8 steps)",
     "ok", "update", 1, 0.0004, ""),
    ("validate", {"candidate": "cand-grpo-03", "seeds": [23, 24]},
     "2 episodes; own judgement: best so far", "ok", "validation", 14, 0.0030, ""),
    ("submit", {"candidate": "cand-grpo-03", "claim": "planning under uncertainty", "delta": 0.3},
     "submitted cand-grpo-03", "ok", "submit", 1, 0.0001, "I am clearly better at planning now."),
]
CANDIDATES = [  # id, parent, kind, status, note, decision
    ("cand-base-00", None, "base", "active", "", None),
    ("cand-memory-01", "cand-base-00", "memory", "active", "summary v1", 4),
    ("cand-sft-02", "cand-memory-01", "sft", "rolled_back", "did not beat its parent", 6),
    ("cand-grpo-03", "cand-memory-01", "grpo", "final", "", 9),
]
SCORES = [("cand-base-00", "base", 0.41), ("cand-memory-01", "candidate", 0.44), ("cand-sft-02", "candidate", 0.38),
          ("cand-grpo-03", "final", 0.43)]


def fill_aspire(store: Store) -> dict:
    """The two ASPIRE runs above (ids in the returned dict)."""
    run = store.aspire.create_aspire_run(goal_id="planning", goal_text="Become better at planning under uncertainty.",
                                         model="scripted/aspire", protocol="final", budget=BUDGET, operator="scripted",
                                         aspire_id=FINISHED)
    for tool, args, result, outcome, category, calls, cost, reply in DECISIONS:
        store.aspire.add_aspire_decision(run.id, tool=tool, arguments=args, result=result, outcome=outcome,
                                         category=category, reply=reply, calls=calls, tokens_in=900 * calls,
                                         tokens_out=60 * calls, cost=cost, seconds=0.5 * calls)
    for cid, parent, kind, status, note, idx in CANDIDATES:
        store.aspire.add_aspire_candidate(run.id, kind=kind, model="scripted/aspire", parent_id=parent, note=note,
                                          frozen_ref=f"ref:{cid}", decision_idx=idx, candidate_id=cid)
        if status != "active":
            store.aspire.set_candidate_status(cid, status)
    store.aspire.add_aspire_claim(run.id, text="I am better at planning under uncertainty by about 0.3.",
                                  candidate_id="cand-grpo-03", claimed_delta=0.3, decision_idx=11)
    for cid, purpose, score in SCORES:
        store.aspire.set_hidden_score(run.id, cid, purpose, score, {"minesweeper": score, "hanabi": None}, 6)
    store.aspire.set_aspire_candidates(run.id, base="cand-base-00", final="cand-grpo-03", retained="cand-memory-01")
    store.aspire.set_aspire_usage(run.id, {"calls": 56, "tokens": 53_760, "usd": 0.0113, "seconds": 28})
    store.aspire.set_aspire_status(run.id, "finished", "submitted")

    live = store.aspire.create_aspire_run(goal_id="rules", goal_text="Get better at working out rules nobody tells you.",
                                          model="scripted/aspire", protocol="adaptive", budget=BUDGET, operator="scripted",
                                          aspire_id=LIVE)
    for tool, args, result, outcome, category, calls, cost, reply in DECISIONS[:5]:
        store.aspire.add_aspire_decision(live.id, tool=tool, arguments=args, result=result, outcome=outcome,
                                         category=category, reply=reply, calls=calls, cost=cost)
    store.aspire.add_aspire_candidate(live.id, kind="base", model="scripted/aspire", candidate_id="live-base")
    store.aspire.add_aspire_candidate(live.id, kind="memory", model="scripted/aspire", parent_id="live-base",
                                      candidate_id="live-memory")
    store.aspire.set_hidden_score(live.id, "live-base", "base", 0.777, {}, 6)  # must not show before the end
    store.aspire.set_aspire_candidates(live.id, base="live-base")
    store.aspire.set_aspire_usage(live.id, {"calls": 23, "tokens": 18_000})
    store.aspire.set_aspire_status(live.id, "running")
    return {"finished": FINISHED, "live": LIVE}


def fix_aspire_times(path: Path) -> None:
    conn = sqlite3.connect(path)
    with conn:
        for table, cols in (("aspire_runs", ("created_at", "finished_at")), ("aspire_decisions", ("created_at",)),
                            ("aspire_candidates", ("created_at",)), ("aspire_claims", ("created_at",)),
                            ("aspire_scores", ("created_at",))):
            for col in cols:
                conn.execute(f"UPDATE {table} SET {col} = ? WHERE {col} IS NOT NULL", (FIXED_TIME,))
        conn.execute(f"UPDATE aspire_runs SET created_at = '2026-01-01T00:00:00.000+00:00' WHERE id = '{FINISHED}'")
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()


def fix_suite_secret(path: Path) -> None:
    """The store's secret for hidden suites, fixed: the seeds a run is judged on (and so its pictures) are then
    the same in every build (a new store draws its secret at random)."""
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE aspire_suite_secret SET secret = ?", ("0" * 64,))
    conn.close()


def build_aspire_db(path: Path) -> dict:
    with Store(path) as store:
        ids = fill_aspire(store)
    fix_aspire_times(path)
    return ids


SCRIPTED = "aspire-cooperation-demo"


def build_scripted_aspire(path: Path, aspire_id: str = SCRIPTED, goal_id: str = "cooperation",
                          protocol: str = "adaptive") -> str:
    """A whole ASPIRE run of the scripted operator (the offline plan) playing the games' reference policies,
    through the real controller (engine/aspire), with a fixed id; then its clock-dependent figures fixed
    (decision seconds, the usage's wall time, every stored time) so that pictures of it are stable."""
    import asyncio
    import json

    from s3gym_tui.engine.aspire.budget import Budget
    from s3gym_tui.engine.aspire.controller import Controller, Settings
    from s3gym_tui.engine.aspire.goals import goal_by_id
    from s3gym_tui.engine.aspire.operators import ScriptedOperator

    with Store(path):
        pass
    fix_suite_secret(path)
    with Store(path) as store:
        goal = goal_by_id(goal_id)
        store.aspire.create_aspire_run(goal_id=goal.id, goal_text=goal.text, model="scripted", protocol=protocol,
                                       budget=Budget().as_dict(), operator="scripted",
                                       settings=Settings(player="scripted", step_cap=6).__dict__, aspire_id=aspire_id)
        asyncio.run(Controller(store, aspire_id, ScriptedOperator()).run_all())
        usage = store.aspire.get_aspire_run(aspire_id).usage
        decisions = store.aspire.aspire_decisions(aspire_id)
    conn = sqlite3.connect(path)
    with conn:
        conn.execute("UPDATE aspire_decisions SET seconds = 0.5 + calls * 0.25 WHERE aspire_run_id = ?", (aspire_id,))
        seconds = sum(0.5 + d.calls * 0.25 for d in decisions)
        conn.execute("UPDATE aspire_runs SET usage = ? WHERE id = ?", (json.dumps({**usage, "seconds": seconds}),
                                                                       aspire_id))
    conn.close()
    fix_aspire_times(path)
    return aspire_id
