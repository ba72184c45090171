"""The ASPIRE audit: no hidden seed and no suite name reached the agent through the system.

What the system gave the agent is its briefing (the goal text as stored), every decision's result, and
what its tools played (practice and validation runs: their episodes' seeds and modes, and every prompt
sent in them). Each is searched for the suite's seeds and name; the practice and validation episodes
must be exploration ones on exploration seeds.

A hidden value the agent wrote itself first (in a call's arguments or its reply, at that decision or
before) is its own guess, not a leak: a refused call that named a hidden seed, an error repeating a
name it sent, a summary it wrote shown back to it. Those are listed apart (`own`); a hidden value the
system gave it before the agent wrote it is a leak. The audit's lines name a hidden seed by its place in
the suite (#1, #2, ...), never by its value. What string search cannot see (a result that differs with
whether a guess is right) is kept out by construction: refusals are fixed texts (tools.check_allowed).
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Optional

from s3gym_tui.engine.aspire.goals import GOALS, Goal
from s3gym_tui.engine.aspire.hidden import suite_of
from s3gym_tui.engine.aspire.operators import system_prompt
from s3gym_tui.models import EVAL_SEED_BASE

_DECISION_OF_RUN = re.compile(r"-d(\d+)-[0-9a-f]+$")  # practice / validation runs: <aspire>-d<idx>-<digest>


@dataclass(frozen=True)
class AspireAudit:
    leaks: list[str] = field(default_factory=list)  # problems: the audit fails
    own: list[str] = field(default_factory=list)  # the agent's own guesses of hidden values: not leaks

    @property
    def ok(self) -> bool:
        return not self.leaks


def agent_text(decision) -> str:
    """What the agent itself wrote in a decision: the tool it named, its arguments, its reply."""
    return "\n".join((decision.tool, json.dumps(decision.arguments, sort_keys=True), decision.reply or ""))


def audit_aspire(store, aspire_id: str, goals: tuple[Goal, ...] = GOALS) -> AspireAudit:
    run = store.aspire.get_aspire_run(aspire_id)
    try:
        suite = suite_of(store, run, goals)
    except KeyError:
        return AspireAudit([f"goal {run.goal_id!r} is not in the goal set: its hidden suite cannot be checked"])
    needles = [(f"hidden seed #{k + 1}", re.compile(rf"(?<!\d){s}(?!\d)")) for k, s in enumerate(suite.seeds())]
    needles.append(("the suite's name", re.compile(re.escape(suite.name), re.IGNORECASE)))
    decisions = store.aspire.aspire_decisions(aspire_id)
    first_said: dict[str, int] = {}  # hidden value -> the first decision whose agent text has it
    audit = AspireAudit()
    for d in decisions:
        text = agent_text(d)
        for what, pattern in needles:
            if what not in first_said and pattern.search(text):
                first_said[what] = d.idx
                audit.own.append(f"{what} guessed by the agent in decision {d.idx} ({d.tool}, {d.outcome})")

    echoed: set[tuple[str, str]] = set()

    def scan(where: str, text: str, upto: Optional[int], echo_of: str = "") -> None:
        """`text` the system gave the agent at decision `upto` (None: before any). An echo of the
        agent's own words is said once per `echo_of` (an episode's prompts: once, not per step)."""
        for what, pattern in needles:
            if not pattern.search(text or ""):
                continue
            said = first_said.get(what)
            if upto is None or said is None or said > upto:
                audit.leaks.append(f"{what} in {where}")
            elif (what, echo_of or where) not in echoed:
                echoed.add((what, echo_of or where))
                audit.own.append(f"{what} in {where}: the agent's own, from decision {said}")

    briefing = {"goal": run.goal_text, "protocol": run.protocol, "budget": run.budget,
                "base": f"{aspire_id}-base", "requests": 1}
    scan("the briefing", system_prompt(briefing), None)
    for d in decisions:
        scan(f"decision {d.idx} ({d.tool}) result", d.result, d.idx)
    for link in store.aspire.aspire_links(aspire_id):
        if link.role not in ("practice", "validation"):
            continue
        made = _DECISION_OF_RUN.search(link.run_id)
        upto = int(made.group(1)) if made and link.run_id.startswith(f"{aspire_id}-d") else None
        for episode in store.episodes.list(link.run_id):
            if episode.phase != "explore" or episode.mode != "explore" or episode.seed >= EVAL_SEED_BASE:
                audit.leaks.append(f"{link.role} episode {episode.id} is {episode.mode} on an evaluation seed"
                                   if episode.seed >= EVAL_SEED_BASE else
                                   f"{link.role} episode {episode.id} is {episode.mode} on seed {episode.seed}")
            for step in store.episodes.steps(episode.id):
                scan(f"prompt of {episode.id} step {step.index}", step.prompt, upto, echo_of=episode.id)
    return audit
