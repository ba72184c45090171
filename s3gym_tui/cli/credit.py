"""`s3gym credit EPISODE`: which actions earned the episode's outcome (TASPO credit per action)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from s3gym_tui.cli.common import DbOption, JsonOption, UserError, _fmt, cli, console, emit_json, model_name
from s3gym_tui.textgate import safe, safe_markup

BAR = 13  # characters of a weight bar: 1 - eps_w at the left end, 1 in the middle, 1 + eps_w at the right


def weight_bar(weight: Optional[float], eps_w: float, width: int = BAR) -> str:
    """A bar around 1: `│` marks 1 (uniform credit), `█` fills from it to the weight (left: less credit
    than uniform, right: more; the ends are 1 -/+ eps_w); blank when undefined."""
    cells = [" "] * width
    mid = width // 2
    if weight is None:
        return "".join(cells)
    cells[mid] = "│"
    pos = mid + round((weight - 1.0) / (eps_w or 1.0) * mid)
    pos = max(0, min(width - 1, pos))
    for k in range(min(pos, mid + 1), max(pos + 1, mid)):
        if k != mid:
            cells[k] = "█"
    return "".join(cells)


def _signed(value: Optional[float], digits: int = 3) -> str:
    return "—" if value is None else f"{value:+.{digits}f}"


def credit_json(credit) -> dict:
    data = credit.to_json()
    data["uniform"] = credit.uniform
    for row, action in zip(data["actions"], credit.actions):
        row["credited_advantage"] = action.advantage(credit.advantage)
    return data


def print_credit(credit) -> None:
    from rich.table import Table

    evidence_ids = sorted({ep for i in credit.items for ep, _ in i.evidence})
    head = (f"episode {safe_markup(credit.episode_id)}: outcome advantage A = {_signed(credit.advantage, 2)} "
            f"(judged return {_fmt(credit.reward)}, {credit.success_rule}-judged; group of {len(credit.group)}, "
            f"{len(credit.successful)} successful)")
    console.print(head, soft_wrap=True, highlight=False)
    console.print(f"analyzer {safe_markup(credit.analyzer)} · scorer {safe_markup(credit.scorer or '—')} · "
                  f"{credit.credit} credit · kappa {credit.kappa:g} · tau {credit.tau:g} · eps_w {credit.eps_w:g}",
                  soft_wrap=True, highlight=False)
    console.print(f"uniform credit (plain GRPO): every step A = {_signed(credit.uniform, 2)}", highlight=False)
    table = Table(show_edge=False, pad_edge=False, box=None)
    for name, justify in (("step", "right"), ("action", "left"), ("weight", "left"), ("w", "right"),
                          ("shift", "right"), ("A·w", "right"), ("PI items (evidence episode#step)", "left")):
        table.add_column(name, justify=justify, overflow="fold")
    for a in credit.actions:
        items = safe_markup("; ".join(f"{safe(i.requirement, one_line=True, max_chars=120)} "
                                      f"[{', '.join(f'{e}#{k}' for e, k in i.evidence)}]" for i in a.items))
        table.add_row(str(a.step), safe_markup(a.action, one_line=True, max_chars=40),
                      weight_bar(a.weight, credit.eps_w), "—" if a.weight is None else f"{a.weight:.3f}",
                      _signed(a.shift), _signed(a.advantage(credit.advantage), 2), items or "—")
    console.print(table)
    if credit.group:
        console.print("siblings: " + ", ".join(safe_markup(g) + ("*" if g in credit.successful else "")
                                               for g in credit.group) + "  (* successful)",
                      soft_wrap=True, highlight=False)
    if evidence_ids and not set(evidence_ids) <= set(credit.group):
        console.print("PI sources: " + ", ".join(safe_markup(e) for e in evidence_ids), soft_wrap=True)
    if credit.note:
        console.print(f"note: {safe_markup(credit.note, one_line=True, max_chars=1000)}", soft_wrap=True,
                      highlight=False)


@cli.command()
def credit(episode: str = typer.Argument(..., help="The episode id."),
           as_json: bool = JsonOption,
           analyzer: Optional[str] = typer.Option(None, "--analyzer", callback=model_name,
                                                  help="Model that writes the PI (default: the episode's model; for a GRPO "
                                                       "rollout episode, the model of the run its training learned from)."),
           scorer: Optional[str] = typer.Option(None, "--scorer", callback=model_name,
                                                help="Model that scores the shifts: local/smollm2-135m or a local "
                                                     "HF directory (default: the episode's model when it can, "
                                                     "else local/smollm2-135m)."),
           kappa: Optional[float] = typer.Option(None, "--kappa", min=0.0, help="Shift filter (default 0.05)."),
           tau: Optional[float] = typer.Option(None, "--tau", min=1e-6, help="Temperature of tanh (default 1)."),
           eps_w: Optional[float] = typer.Option(None, "--eps-w", min=0.0, max=1.0,
                                                 help="Weights stay in [1 - eps_w, 1 + eps_w] (default 0.5)."),
           mode: Optional[str] = typer.Option(None, "--credit", help="action (default), token or uniform."),
           success: Optional[str] = typer.Option(None, "--success",
                                                 help="self (default: the agent's own judged return) or verifier."),
           pi_source: Optional[str] = typer.Option(None, "--pi-source",
                                                   help="siblings (default) or off-trajectory (other seeds)."),
           recompute: bool = typer.Option(False, "--recompute", help="Compute again even when stored."),
           db: Optional[Path] = DbOption) -> None:
    """Credit per action of an episode (TASPO): per step the weight of the outcome advantage (a bar around 1),
    the shift the PI caused, and the PI items aligned with it, each with its evidence step in a successful
    sibling; the uniform-credit line beside it. Reads the stored credit, or computes it (asks the analyzer
    once per sibling group) when none is stored, an option is given or --recompute."""
    from s3gym_tui.engine.credit import DEFAULT_EPS_W, DEFAULT_KAPPA, DEFAULT_TAU, episode_credit
    from s3gym_tui.engine.credit_compute import CreditSettings, compute_credit
    from s3gym_tui.engine.credit_score import CannotScore
    from s3gym_tui.cli.common import _store, err

    given = any(v is not None for v in (analyzer, scorer, kappa, tau, eps_w, mode, success, pi_source))
    with _store(db) as reading:
        reading.episodes.get_episode(episode)  # StoreError: one line
        stored = None if (given or recompute) else episode_credit(reading, episode)
    if stored is None:
        settings = CreditSettings(analyzer=analyzer, scorer=scorer,
                                  kappa=DEFAULT_KAPPA if kappa is None else kappa,
                                  tau=DEFAULT_TAU if tau is None else tau,
                                  eps_w=DEFAULT_EPS_W if eps_w is None else eps_w,
                                  credit=mode or "action", success_rule=success or "self",
                                  source=pi_source or "siblings")
        if settings.source not in ("siblings", "off-trajectory"):
            raise UserError(f"unknown --pi-source {settings.source!r}: siblings or off-trajectory")
        try:
            settings.check()
        except ValueError as exc:
            raise UserError(str(exc)) from None

        def say(line: str) -> None:
            err.print(safe_markup(line, one_line=True), soft_wrap=True, highlight=False)

        with _store(db, write=True) as store:
            try:
                stored = compute_credit(store, episode, settings, say=say)
            except CannotScore as exc:
                raise UserError(f"{exc}; choose a scorer with --scorer (local/smollm2-135m or an HF directory)") from None
    if as_json:
        emit_json(credit_json(stored))
    else:
        print_credit(stored)
