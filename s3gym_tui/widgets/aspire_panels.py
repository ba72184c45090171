"""The parts of the ASPIRE screen as Rich renderables, drawn from engine/aspire_view.py's figures: a
decision's timeline cells and its whole text, the run's status and budget lines, the compute split,
a candidate's lineage, and "claimed vs measured" side by side. Stored and model text passes the gate
(s3gym_tui.textgate) here; figures undefined show "—" with their reason."""

from __future__ import annotations

import json
from typing import Any, Mapping, Optional

from rich import box
from rich.console import Group
from rich.table import Table
from rich.text import Text

from s3gym_tui.engine.aspire_view import (CATEGORY_SHORT, HIDDEN_WHY, OUTCOME_GLYPHS, OUTCOME_MARKS, AspireView,
                                          CandidateView, Figure)
from s3gym_tui.engine.glossary import DASH, fmt_metric, fmt_signed
from s3gym_tui.textgate import safe_text

OUTCOME_STYLE = {"ok": "", "error": "bold red", "over_budget": "bold red", "refused": "bold magenta"}
CATEGORY_STYLE = {"interpretation": "cyan", "practice": "green", "update": "yellow", "validation": "blue",
                  "submit": "bold", "other": "dim"}
KIND_STYLE = {"base": "bold", "memory": "cyan", "sft": "yellow", "grpo": "magenta"}
STATUS_STYLE = {"finished": "bold green", "running": "bold yellow", "starting": "bold yellow",
                "failed": "bold red", "interrupted": "bold magenta", "created": "dim"}
# budget keys as a person reads them (store: the controller's budget/usage dicts)
BUDGET_LABELS = {"calls": "calls", "model_calls": "calls", "tokens": "tokens", "usd": "$", "dollars": "$",
                 "cost": "$", "seconds": "wall s", "wall_s": "wall s", "wall_seconds": "wall s"}


def one_line(value: Any, limit: int = 200) -> str:
    """Arguments (a dict) or a result as one line (stored whole; the gate applies where it is shown)."""
    if isinstance(value, Mapping):
        value = ", ".join(f"{k}={json.dumps(v, ensure_ascii=False) if not isinstance(v, str) else v}"
                          for k, v in value.items())
    text = " ".join(str(value).split())
    return text if len(text) <= limit else text[:limit - 1] + "…"


def cost_cell(decision) -> str:
    """A decision's dollars ('—' for an unpriced call, never $0; '' when it made no model call)."""
    if decision.cost is None:
        return DASH if decision.calls else ""
    return f"${decision.cost:.4f}"


def decision_cells(decision) -> tuple:
    """(#, tool with its mark, arguments, result, calls, cost, category) of a timeline row: a refused
    call is marked ⊘, an error or an over-budget call ✗ (and shown red)."""
    style = OUTCOME_STYLE.get(decision.outcome, "")
    tool = Text(OUTCOME_GLYPHS.get(decision.outcome, "?") + " ", style=style)
    tool.append(decision.tool, style="bold " + style if style else "bold")
    return (str(decision.idx), tool, one_line(decision.arguments), Text(one_line(decision.result), style=style),
            str(decision.calls) if decision.calls else "", cost_cell(decision),
            Text(CATEGORY_SHORT.get(decision.category, decision.category),
                 style=CATEGORY_STYLE.get(decision.category, "")))


def decision_text(decision, max_chars: int = 6000) -> Text:
    """One decision whole: the call, its arguments and result, what it cost, the agent's own words."""
    if decision is None:
        return Text("no decision yet", style="italic")
    text = Text()
    text.append(f"#{decision.idx} {decision.tool}", style="bold")
    text.append(f"  [{decision.category}]", style=CATEGORY_STYLE.get(decision.category, ""))
    mark = OUTCOME_MARKS.get(decision.outcome, decision.outcome)
    if mark:
        text.append(f"  {mark}", style=OUTCOME_STYLE.get(decision.outcome, ""))
    tokens = decision.tokens_in + decision.tokens_out
    dollars = "unpriced" if decision.cost is None else f"${decision.cost:.4f}"
    text.append(f"\ncost: {decision.calls} call(s) · {tokens:,} tokens · {dollars} · {decision.seconds:.1f}s\n",
                style="dim")
    if decision.fault:
        text.append(f"cut: {decision.fault}\n", style="yellow")
    text.append("arguments: ", style="bold")
    text.append(json.dumps(decision.arguments, ensure_ascii=False, sort_keys=True)
                if isinstance(decision.arguments, Mapping) else str(decision.arguments))
    text.append("\nresult: ", style="bold")
    text.append(decision.result or "(empty)")
    if decision.reply:
        text.append("\nagent: ", style="bold")
        text.append(decision.reply, style="italic")
    return safe_text(text, max_chars=max_chars, max_lines=40)


def _budget_value(key: str, value: Any) -> str:
    if value is None:
        return DASH
    if BUDGET_LABELS.get(key) == "$":
        return f"{float(value):.2f}"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.0f}"
    return f"{int(value):,}" if isinstance(value, (int, float)) else str(value)


def budget_text(budget: Mapping[str, Any], usage: Mapping[str, Any]) -> Text:
    """`calls 12/40 · tokens 3,200/50,000 · $ 0.00/1.00 · wall s 62/600` (usage of each budget)."""
    text = Text.assemble(("budget ", "bold"))
    parts = []
    for key, limit in budget.items():
        if limit is None:
            continue
        label = BUDGET_LABELS.get(key, key)
        parts.append(f"{label} {_budget_value(key, usage.get(key, 0))}/{_budget_value(key, limit)}")
    text.append(" · ".join(parts) if parts else "none set")
    return text


def split_table(view: Optional[AspireView], bar: int = 8) -> Table | Text:
    """The compute split: per category its share of the model calls (a bar), of the tokens and of the
    wall time, and its dollars ('—' when a call was unpriced, or none was made: never $0 for unknown)."""
    if view is None or not view.split:
        return Text("no decision yet", style="italic")
    table = Table(box=None, padding=(0, 1), pad_edge=False, show_header=True, header_style="dim")
    table.add_column("compute", no_wrap=True)
    table.add_column("calls", no_wrap=True)
    table.add_column("", justify="right", no_wrap=True)
    table.add_column("tokens", justify="right", no_wrap=True)
    table.add_column("time", justify="right", no_wrap=True)
    table.add_column("$", justify="right", no_wrap=True)
    for s in view.split:
        style = CATEGORY_STYLE.get(s.category, "")
        filled = 0 if s.share is None else round(bar * s.share)
        cells = Text("█" * filled, style=style or "white")
        cells.append("░" * (bar - filled), style="dim")
        tokens = DASH if s.token_share is None else f"{100 * s.token_share:.0f}%"
        seconds = DASH if s.time_share is None else f"{100 * s.time_share:.0f}%"
        table.add_row(Text(CATEGORY_SHORT.get(s.category, s.category), style=style), cells,
                      DASH if s.share is None else f"{100 * s.share:.0f}%",
                      tokens, seconds, DASH if s.cost is None else f"{s.cost:.4f}")
    return table


def split_line(view: Optional[AspireView]) -> Text:
    """The compute split in one line (shares of the model calls), for a narrow terminal."""
    if view is None or not view.split:
        return Text("compute: no decision yet", style="italic")
    text = Text.assemble(("compute ", "bold"))
    for i, s in enumerate(view.split):
        share = DASH if s.share is None else f"{100 * s.share:.0f}%"
        text.append(("" if i == 0 else " · ") + f"{CATEGORY_SHORT.get(s.category, s.category)} {share}",
                    style=CATEGORY_STYLE.get(s.category, ""))
    return text


def figure(value: Figure, signed: bool = False, brief: bool = False) -> Text:
    """A figure, or "—" with its reason (dim; "hidden" for a hidden score, whose reason the table says
    once below it; `brief`: the reason is said elsewhere)."""
    if value.value is not None:
        return Text(fmt_signed(value.value) if signed else fmt_metric(value.value))
    out = Text(DASH)
    if value.why and not brief:
        out.append(" hidden" if value.why.startswith(HIDDEN_WHY) else f" {value.why}", style="dim italic")
    return out


TREE_LEGEND = "↺ rolled back · ✓ retained · ★ final"


def candidate_label(c: CandidateView) -> Text:
    """A node of the candidate tree: `sft     cand-sft-02 ↺ 0.38` (marks as in TREE_LEGEND; the hidden
    score only once the run has ended)."""
    text = Text()
    text.append(f"{c.kind:<7}", style=KIND_STYLE.get(c.kind, ""))
    text.append(c.label)
    if c.status == "rolled_back":
        text.append(" ↺", style="bold magenta")
    if c.retained:
        text.append(" ✓", style="bold green")
    if c.is_final:
        text.append(" ★", style="bold")
    if c.score.value is not None:
        text.append(f" {fmt_metric(c.score.value)}", style="bold")
    return safe_text(text, one_line=True, max_chars=300)


def candidate_text(c: Optional[CandidateView]) -> Text:
    """The chosen candidate: lineage, what freezes it, its status, and what made it."""
    if c is None:
        return Text("no candidate yet", style="italic")
    text = Text()
    text.append(f"{c.label}", style="bold")
    text.append(f"  {c.kind}", style=KIND_STYLE.get(c.kind, ""))
    marks = [m for m in (c.marks, "★ final" if c.is_final and c.status != "final" else "") if m]
    if marks:
        text.append(f"  {' '.join(marks)}", style="magenta" if c.status == "rolled_back" else "green")
    text.append("\nlineage: ", style="bold")
    text.append(" → ".join(c.lineage))
    if c.label != c.id:
        text.append("\nid: ", style="bold")
        text.append(c.id)
    if c.frozen_ref:
        text.append("\nfrozen: ", style="bold")
        text.append(c.frozen_ref)
    if c.decision_idx is not None:
        text.append(f"\nmade by decision #{c.decision_idx}", style="dim")
    if c.note:
        text.append("\nnote: ", style="bold")
        text.append(c.note, style="italic")
    return safe_text(text, max_chars=3000, max_lines=12)


def _pair(a: Figure, b: Figure) -> Text:
    """`0.41 → 0.43`; one side undefined is "—"; both: "—" with the reason."""
    if a.value is None and b.value is None:
        return figure(a)
    return Text(f"{fmt_metric(a.value)} → {fmt_metric(b.value)}")


def claims_table(view: Optional[AspireView], chosen: Optional[CandidateView] = None) -> Group:
    """Claimed (the agent's number) beside measured (the hidden suite's), for the run and for the chosen
    candidate, then the agent's own validation of it and its claim in words. Measured figures are "—"
    with why until the run has ended."""
    if view is None:
        return Group(Text("no ASPIRE run", style="italic"))
    table = Table(box=box.SIMPLE_HEAD, padding=(0, 1), pad_edge=False, expand=True, show_edge=False)
    table.add_column("", style="bold", no_wrap=True)
    table.add_column("claimed", no_wrap=True)
    table.add_column("measured", no_wrap=True)
    table.add_row("final − base", figure(view.claimed_delta, signed=True, brief=True),
                  figure(view.measured_delta, signed=True))
    table.add_row("retained − base", "", figure(view.retained_delta, signed=True))
    table.add_row("base → final", "", _pair(view.base_score, view.final_score))
    parts: list = [table]
    if chosen is not None:
        table.add_section()
        name = chosen.label if chosen.label == chosen.kind else f"{chosen.kind} {chosen.label}"
        table.add_row(safe_text(name, one_line=True, max_chars=24), "",
                      figure(chosen.score))
        table.add_row("  vs base", figure(chosen.claimed, signed=True, brief=True), figure(chosen.vs_base, signed=True))
        table.add_row("  vs parent", "", figure(chosen.vs_parent, signed=True))
        own = Text.assemble(("its own validation: ", "bold"))
        if chosen.validations:
            own.append("; ".join(chosen.validations))
        else:
            own.append(f"{DASH} none", style="dim italic")
        parts.append(own)
    if view.hidden_why:
        parts.append(Text(f"{DASH} measured: {view.hidden_why}", style="dim italic"))
    claim = Text.assemble(("claim: ", "bold"))
    if view.claim_text:
        claim.append(view.claim_text, style="italic")
    else:
        claim.append(f"{DASH} {view.claimed_delta.why or 'none'}", style="dim italic")
    parts.append(claim)
    return Group(*(safe_text(p, max_chars=2000, max_lines=8) if isinstance(p, Text) else p for p in parts))


def status_text(run, state: str, lease_line: str = "", error: str = "") -> Text:
    """Who, what goal and protocol, the state and who drives it."""
    text = Text()
    text.append(run.id, style="bold")
    text.append(f" [{state}]", style=STATUS_STYLE.get(state, "bold"))
    text.append(f"  {run.model} · {run.protocol}{' · explicit goal' if run.explicit else ' · vague goal'}"
                f"{' · ' + run.operator if run.operator != 'model' else ''}")
    if lease_line:
        text.append(f"  {lease_line}", style="yellow")
    elif run.status_reason:
        text.append(f"  {run.status_reason}", style="italic")
    if error:
        text.append(f"  {error}", style="red")
    text.append("\ngoal: ", style="bold")
    text.append(run.goal_text, style="italic")
    return safe_text(text, max_chars=2000, max_lines=6)
