"""One episode's credit in the credit view: a line about the computation (the outcome advantage A, the
sibling group, analyzer and scorer, eps_w) over a table with a row per step (its weight as a bar
around 1 with the uniform-credit line through the middle, w, the shift d, A·w beside the uniform A,
the aligned PI items); or, when credit was never computed, a sentence that says so and offers it, and
a progress bar while it is computed. Every stored or model text passes the gate (the table gates its
cells; the rest goes through safe_text)."""

from __future__ import annotations

from typing import Any, Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.widgets import ProgressBar, Static

from s3gym_tui.engine.glossary import fmt_metric, fmt_signed
from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.credit_bar import bar_header, weight_bar
from s3gym_tui.widgets.fit_table import FitTable

BAR_WIDTHS = ((150, 21), (70, 15), (0, 11))  # (panel columns from, cells of a weight bar: odd, the line centred)


def credit_head(credit: Any) -> tuple[Text, Text]:
    """The lines over the table: (A and the reward it came from, the group) and (the parameters, the
    analyzer and the scorer, the note); the second gives way on a small screen."""
    main = Text()
    main.append("A ", style="bold")
    main.append(fmt_signed(credit.advantage), style="bold")
    judged = "self-judged" if credit.success_rule == "self" else credit.success_rule
    main.append(f" · return {fmt_metric(credit.reward)} ({judged})")
    main.append(f" · group of {len(credit.group)}, {len(credit.successful)} successful")
    more = Text(f"ε_w {credit.eps_w:g} · κ {credit.kappa:g} · τ {credit.tau:g} · {credit.credit}-level", style="dim")
    more.append(" · analyzer ", style="dim")
    more.append_text(safe_text(credit.analyzer or "—", one_line=True, max_chars=80))
    more.append(" · scorer ", style="dim")
    more.append_text(safe_text(credit.scorer or "— (no shift measured)", one_line=True, max_chars=80))
    if credit.note:
        more.append("\n")
        more.append_text(safe_text(credit.note, "italic", max_chars=400, max_lines=3))
    return main, more


LEGEND = "│ = w 1: uniform credit (GRPO) · right: more of A · left: less"


class CreditPanel(Vertical):
    """The credit of one episode (see the module docstring). `show(credit)` with an EpisodeCredit, or
    `show_missing(text)`; `show_progress(...)` while a computation runs."""

    DEFAULT_CSS = """
    CreditPanel { width: 1fr; height: 1fr; border: round $primary-darken-2; }
    CreditPanel .credit-head, CreditPanel .credit-more { height: auto; padding: 0 1; background: $boost; }
    CreditPanel .credit-missing { height: auto; padding: 1 1; }
    CreditPanel .credit-progress { height: 1; padding: 0 1; display: none; }
    CreditPanel .credit-progress Bar { width: 1fr; }
    CreditPanel .credit-table { height: 1fr; }
    CreditPanel.-missing .credit-table { display: none; }
    CreditPanel.-missing .credit-head, CreditPanel.-missing .credit-more { display: none; }
    CreditPanel.-computing .credit-progress { display: block; }
    CreditPanel .credit-missing { display: none; }
    CreditPanel.-missing .credit-missing { display: block; }
    """

    def __init__(self, side: str, *, id: Optional[str] = None) -> None:
        super().__init__(id=id)
        self.side = side  # "" (one episode) or "A" / "B" (Compare)
        self.credit: Any = None  # the EpisodeCredit shown, or None
        self.episode_id: Optional[str] = None

    def compose(self) -> ComposeResult:
        yield Static(classes="credit-head")
        yield Static(classes="credit-more")
        yield Static(classes="credit-missing")
        yield ProgressBar(classes="credit-progress", show_eta=False)
        yield FitTable(classes="credit-table", cursor_type="row", zebra_stripes=True)

    @property
    def table(self) -> FitTable:
        return self.query_one(".credit-table", FitTable)

    def title(self, episode: Any, episode_id: str) -> None:
        self.episode_id = episode_id
        where = "" if episode is None else f" · {episode.game} {episode.mode} seed {episode.seed} · {episode.pathway}"
        prefix = f"{self.side} · " if self.side else ""
        self.border_title = safe_text(f"{prefix}credit of {episode_id}{where}", one_line=True, max_chars=160)

    def _bar_width(self) -> int:
        width = self.size.width or self.app.size.width // (2 if self.side else 1)
        return next(cells for at, cells in BAR_WIDTHS if width >= at)

    def show(self, credit: Any, marks: Optional[dict] = None) -> None:
        """Fill the table with `credit`'s actions (marks: step index -> annotations, shown by the step)."""
        self.credit = credit
        self.set_class(False, "-missing")
        main, more = credit_head(credit)
        self.query_one(".credit-head", Static).update(main)
        self.query_one(".credit-more", Static).update(more)
        table = self.table
        table.clear(columns=True)
        width = self._bar_width()
        for label, key, drop, shorten in (("#", "i", 0, 0), ("action", "action", 0, 8),
                                          (bar_header(credit.eps_w, width), "bar", 0, 0), ("w", "w", 0, 0),
                                          ("shift d", "shift", 2, 0), ("A·w", "aw", 3, 0),
                                          ("uniform", "uniform", 4, 0), ("PI", "pi", 1, 0)):
            table.add_column(label, key=key, drop=drop, shorten=shorten)
        for action in credit.actions:
            items = len(action.items)
            table.add_row(
                str(action.step), action.action,
                weight_bar(action.weight, credit.eps_w, width),
                Text(fmt_metric(action.weight, 3), style="bold" if action.weight not in (None, 1.0) else "dim"),
                Text(fmt_signed(action.shift, 3) if action.shift is not None else "—",
                     style="" if action.shift is not None else "dim"),
                fmt_signed(action.advantage(credit.advantage)),
                Text(fmt_signed(credit.uniform), style="dim"),
                Text(f"{items} item{'s' * (items != 1)}" if items else "—", style="cyan" if items else "dim"),
                key=f"s{action.step}")
        if not credit.actions:
            table.add_row("", Text("no action stored", style="italic"), "", "", "", "", "", "", key="none")
        self.border_subtitle = LEGEND

    def on_fit_table_fitted(self, message: FitTable.Fitted) -> None:
        """The legend, and the columns a narrow panel leaves out."""
        message.stop()
        dropped = f" · not shown: {', '.join(message.dropped)}" if message.dropped else ""
        self.border_subtitle = (LEGEND if self.credit is not None else "") + dropped

    def show_missing(self, text: Text | str) -> None:
        """Credit not computed (or the episode is missing): a sentence, never a blank or a 0."""
        self.credit = None
        self.border_subtitle = ""
        self.set_class(True, "-missing")
        self.query_one(".credit-missing", Static).update(safe_text(text, max_chars=2000, max_lines=12))

    def show_progress(self, done: Optional[int], total: Optional[int], what: str) -> None:
        self.set_class(True, "-computing")
        bar = self.query_one(".credit-progress", ProgressBar)
        bar.update(total=total if total else None, progress=done or 0)
        self.query_one(".credit-missing", Static).update(safe_text(what, max_chars=400, max_lines=4))

    def end_progress(self) -> None:
        self.set_class(False, "-computing")

    def action_at_row(self, row: int) -> Any:
        """The ActionCredit of table row `row`, or None."""
        if self.credit is None or not (0 <= row < len(self.credit.actions)):
            return None
        return self.credit.actions[row]
