"""The ASPIRE audit: no hidden seed and no suite name reached the agent.

What the agent saw is its briefing (the goal text as stored), every decision's result, and what its
tools played (practice and validation runs: their episodes' seeds and modes, and every prompt sent in
them). Each is searched for the suite's seeds and name; the practice and validation episodes must be
exploration ones on exploration seeds. Returns the problems found (empty: clean)."""

from __future__ import annotations

import re

from s3gym_tui.engine.aspire.goals import GOALS, Goal, goal_by_id
from s3gym_tui.engine.aspire.operators import system_prompt
from s3gym_tui.models import EVAL_SEED_BASE


def audit_aspire(store, aspire_id: str, goals: tuple[Goal, ...] = GOALS) -> list[str]:
    run = store.get_aspire_run(aspire_id)
    try:
        suite = goal_by_id(run.goal_id, goals).suite
    except KeyError:
        return [f"goal {run.goal_id!r} is not in the goal set: its hidden suite cannot be checked"]
    needles = [(f"hidden seed {s}", re.compile(rf"(?<!\d){s}(?!\d)")) for s in suite.seeds()]
    needles.append((f"suite name {suite.name!r}", re.compile(re.escape(suite.name), re.IGNORECASE)))
    problems: list[str] = []

    def scan(where: str, text: str) -> None:
        for what, pattern in needles:
            if pattern.search(text or ""):
                problems.append(f"{what} in {where}")

    briefing = {"goal": run.goal_text, "protocol": run.protocol, "budget": run.budget,
                "base": f"{aspire_id}-base", "requests": 1}
    scan("the briefing", system_prompt(briefing))
    for d in store.aspire_decisions(aspire_id):
        scan(f"decision {d.idx} ({d.tool}) result", d.result)
    for link in store.aspire_links(aspire_id):
        if link.role not in ("practice", "validation"):
            continue
        for episode in store.episodes(link.run_id):
            if episode.phase != "explore" or episode.mode != "explore" or episode.seed >= EVAL_SEED_BASE:
                problems.append(f"{link.role} episode {episode.id} is {episode.mode} on seed {episode.seed}")
            for step in store.steps(episode.id):
                scan(f"prompt of {episode.id} step {step.index}", step.prompt)
    return problems
