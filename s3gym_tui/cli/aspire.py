"""`s3gym aspire`: self-directed improvement from a vague goal, judged on a hidden suite (issue 25)."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Optional

import typer

from s3gym_tui.cli.common import EXIT_CHECK_FAILED, EXIT_INTERRUPTED, DbOption, JsonOption, Stopped, UserError, \
    _store, cli, console, err
from s3gym_tui.textgate import safe_markup


def _fmt(value: Optional[float], digits: int = 3) -> str:
    return "—" if value is None else f"{value:.{digits}f}"


def decision_line(d) -> str:
    args = json.dumps(d.arguments, sort_keys=True) if d.arguments else "{}"
    mark = {"ok": "", "error": " [red]error[/]", "over_budget": " [yellow]over budget[/]",
            "refused": " [red]refused[/]"}[d.outcome]
    cut = f" [yellow]{safe_markup(d.fault, one_line=True)}[/]" if d.fault else ""
    return (f"{d.idx:>3} {safe_markup(d.tool, one_line=True, max_chars=60)} "
            f"{safe_markup(args, one_line=True, max_chars=160)}"
            f"{mark} -> {safe_markup(d.result, one_line=True, max_chars=160)} [dim]({d.category}, {d.calls} calls, "
            f"{d.seconds:.1f}s)[/]{cut}")


def goals_table() -> None:
    from s3gym_tui.engine.aspire.goals import GOALS

    for goal in GOALS:
        console.print(f"{goal.id:<15} {safe_markup(goal.text)}", soft_wrap=True)


def run_controller(store, aspire_id: str, operator, goals=None) -> None:
    """Drive (or resume) an ASPIRE run; Ctrl-C leaves it interrupted and resumable (exit 130)."""
    from s3gym_tui.engine.aspire.controller import Controller
    from s3gym_tui.engine.aspire.goals import GOALS
    from s3gym_tui.engine.llm import ModelUnavailable

    from s3gym_tui.engine.lease import driving_aspire
    from s3gym_tui.store.leases import RunBusy

    controller = Controller(store, aspire_id, operator, goals or GOALS,
                            on_decision=lambda d: console.print(decision_line(d), soft_wrap=True, highlight=False))
    try:
        with driving_aspire(store, aspire_id, "s3gym aspire"):  # the app follows it; a second driver is refused
            final = asyncio.run(controller.run_all())
    except RunBusy as exc:
        raise UserError(str(exc)) from None
    except KeyboardInterrupt:
        store.aspire.set_aspire_status(aspire_id, "interrupted", "interrupted (Ctrl-C)")
        err.print(f"ASPIRE run {safe_markup(aspire_id)} interrupted (Ctrl-C): stored data is intact")
        err.print(f"resume with: s3gym aspire --resume {safe_markup(aspire_id)}", highlight=False)
        raise typer.Exit(EXIT_INTERRUPTED)
    except ModelUnavailable as exc:
        store.aspire.set_aspire_status(aspire_id, "interrupted", f"model: {exc}")
        raise Stopped(f"ASPIRE run {aspire_id} stopped: {exc}", resume=aspire_id) from None
    print_outcome(store, final.id)


def print_outcome(store, aspire_id: str) -> None:
    run = store.aspire.get_aspire_run(aspire_id)
    scores = {s.purpose: s for s in store.aspire.hidden_scores(aspire_id)}
    claims = store.aspire.aspire_claims(aspire_id)
    console.print(f"ASPIRE run [bold]{safe_markup(run.id)}[/] {run.status} ({safe_markup(run.status_reason)}); "
                  f"goal {safe_markup(run.goal_id)}{' (explicit)' if run.explicit else ''}, protocol {run.protocol}",
                  soft_wrap=True)
    for purpose in ("base", "final", "retained"):
        s = scores.get(purpose)
        console.print(f"  hidden {purpose:<8} {_fmt(s.score if s else None)}  "
                      f"{safe_markup(s.candidate_id) if s else '—'}", soft_wrap=True)
    claim = claims[-1] if claims else None
    base, final = scores.get("base"), scores.get("final")
    measured = None if not base or not final or base.score is None or final.score is None else final.score - base.score
    console.print(f"  claimed delta {_fmt(claim.claimed_delta if claim else None)}, measured delta {_fmt(measured)}; "
                  f"claim: {safe_markup(claim.text, one_line=True) if claim else '—'}", soft_wrap=True)
    split = store.aspire.compute_split(aspire_id)
    total = sum(v["seconds"] for v in split.values()) or None
    parts = ", ".join(f"{k} {v['decisions']} ({v['seconds'] / total:.0%} of time)" if total else f"{k} {v['decisions']}"
                      for k, v in sorted(split.items()))
    console.print(f"  compute: {parts or '— (no decisions)'}", soft_wrap=True)


@cli.command()
def aspire(goal: Optional[str] = typer.Option(None, "--goal", help="A vague goal in words (mapped to the goal set)."),
           goal_id: Optional[str] = typer.Option(None, "--goal-id", help="A goal of the goal set (--list-goals)."),
           model: Optional[str] = typer.Option(None, "--model", "-m", help="The agent: a litellm model with tool "
                                               "calling, local/smollm2-135m (JSON replies) or `scripted` (offline plan)."),
           player: Optional[str] = typer.Option(None, "--player", help="The base candidate's model (default: the "
                                                "agent's; `scripted` plays each game's reference policy)."),
           protocol: str = typer.Option("final", "--protocol", help="final (no score before the end) | adaptive "
                                        "(a few aggregate-score requests, score-gated retention)."),
           explicit: bool = typer.Option(False, "--explicit", help="Explicit-goal control: the suite's games and metric named."),
           budget: str = typer.Option("", "--budget", help="calls=N,tokens=N,dollars=X,seconds=S,decisions=N"),
           step_cap: int = typer.Option(16, "--step-cap", min=1, max=64, help="Steps per episode the agent plays."),
           requests: int = typer.Option(3, "--requests", min=0, max=10, help="Adaptive: evaluation requests."),
           score_all: bool = typer.Option(True, "--score-all/--no-score-all", help="Hidden-score every candidate."),
           api_base: Optional[str] = typer.Option(None, "--api-base"),
           resume: Optional[str] = typer.Option(None, "--resume", help="Continue an interrupted ASPIRE run."),
           audit: Optional[str] = typer.Option(None, "--audit", help="Check that no hidden seed or suite name "
                                               "reached the agent of this ASPIRE run."),
           show: Optional[str] = typer.Option(None, "--show", help="Print a stored ASPIRE run's decision log."),
           list_goals: bool = typer.Option(False, "--list-goals", help="The goal set (vague texts only)."),
           as_json: bool = JsonOption,
           db: Optional[Path] = DbOption) -> None:
    """Self-directed improvement (ASPIRE): the agent practises, updates, validates and submits on its own;
    the controller judges its candidates on a hidden suite it never sees."""
    from s3gym_tui.engine.aspire.budget import Budget
    from s3gym_tui.engine.aspire.controller import Settings
    from s3gym_tui.engine.aspire.goals import goal_by_id, goal_for_text

    if list_goals:
        goals_table()
        return
    if audit or show:
        store = _store(db)
        target = audit or show
        if store.aspire.find_aspire_run(target) is None:
            raise UserError(f"no ASPIRE run {target!r}")
        if show:
            for d in store.aspire.aspire_decisions(target):
                console.print(decision_line(d), soft_wrap=True, highlight=False)
            print_outcome(store, target)
            return
        from s3gym_tui.engine.aspire.audit import audit_aspire

        found = audit_aspire(store, target)
        if as_json:
            sys.stdout.write(json.dumps({"aspire_run": target, "problems": found.leaks, "own": found.own}) + "\n")
        for p in found.leaks if not as_json else ():
            console.print(f"[red]leak:[/] {safe_markup(p, one_line=True)}", soft_wrap=True)
        if not found.ok:
            raise typer.Exit(EXIT_CHECK_FAILED)
        if not as_json:
            console.print(f"ASPIRE run {safe_markup(target)}: no hidden seed or suite name reached the agent",
                          soft_wrap=True)
            if found.own:
                console.print("the agent's own guesses (refused, or its own words shown back to it), not leaks:")
            for line in found.own:
                console.print(f"  {safe_markup(line, one_line=True)}", soft_wrap=True, highlight=False)
        return
    if resume:
        store = _store(db, write=True)
        run = store.aspire.find_aspire_run(resume)
        if run is None:
            raise UserError(f"no ASPIRE run {resume!r}")
        if run.status == "finished":
            raise UserError(f"ASPIRE run {resume} is finished")
        run_controller(store, run.id, make_operator(run.model, api_base))
        return
    if model is None:
        raise UserError("give --model (the agent), e.g. --model scripted")
    if protocol not in ("final", "adaptive"):
        raise UserError(f"--protocol {protocol!r}: final or adaptive")
    if (goal is None) == (goal_id is None):
        raise UserError("give --goal TEXT or --goal-id ID (one of them; --list-goals)")
    try:
        chosen = goal_by_id(goal_id) if goal_id else goal_for_text(goal or "")
    except KeyError:
        raise UserError(f"unknown goal id {goal_id!r} (--list-goals)") from None
    try:
        limits = Budget.parse(budget)
    except ValueError as exc:
        raise UserError(f"--budget: {exc}") from None
    text = chosen.explicit_text() if explicit else (goal or chosen.text)
    settings = Settings(player=player or model, step_cap=step_cap, requests=requests, score_all=score_all)
    store = _store(db, create=True, write=True)
    run = store.aspire.create_aspire_run(goal_id=chosen.id, goal_text=text, model=model, protocol=protocol,
                                         budget=limits.as_dict(),
                                         operator="scripted" if model == "scripted" else "model",
                                         explicit=explicit, settings=settings.__dict__)
    console.print(f"ASPIRE run [bold]{safe_markup(run.id)}[/]: {safe_markup(text)}", soft_wrap=True)
    run_controller(store, run.id, make_operator(model, api_base))


def make_operator(model: str, api_base: Optional[str] = None):
    """The agent; an api base started by the app comes without its credentials (in the environment)."""
    from s3gym_tui.engine.aspire.operators import ModelOperator, ScriptedOperator
    from s3gym_tui.secrets import with_credentials

    if model == "scripted":
        return ScriptedOperator()
    return ModelOperator(model, api_base=with_credentials(api_base))
