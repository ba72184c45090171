"""The credit view (`w` in Play and Compare): per step of an episode the TASPO weight as a bar around 1
(the uniform-credit line through the middle), the shift, A·w beside the uniform A, and the PI items that
aligned with the step, each linking to its evidence step in a sibling episode (Enter or a click opens
that episode at that step). From Compare, both sides. Credit not computed yet: the view says so and
offers to compute it (c) in a thread worker with progress; Escape or x cancels it."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import DataTable, OptionList, Static
from textual.widgets.option_list import Option
from textual.worker import get_current_worker

from s3gym_tui.messages import CreditComputed, CreditProgressed, StoreChanged
from s3gym_tui.screens.analysis_common import AnalysisScreen
from s3gym_tui.textgate import safe, safe_text
from s3gym_tui.widgets.credit_panel import CreditPanel
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.thread_work import thread_work

CREDIT_GROUP = "credit-compute"
NO_ITEM = "No PI item aligned with this step's pre-action history: w = 1, the uniform credit."


class CreditCancelled(Exception):
    """The person cancelled a credit computation (raised from its progress callback)."""


def compute_episode_credit(store, episode_id: str, scorer: Optional[str],
                           progress: Callable[[Optional[int], Optional[int], str], None]) -> Any:
    """The engine's computation of one episode's credit (siblings, PI from the successful ones,
    alignment, shifts, weights; stored). `progress` hears each stage and each scored step, and raises
    CreditCancelled to stop it between two of them (nothing of the credit is stored then)."""
    from s3gym_tui.engine.credit import compute_credit

    return compute_credit(store, episode_id, scorer=scorer, progress=progress)


class CreditScreen(AnalysisScreen):
    """One episode's credit, or two side by side (Compare)."""

    AUTO_FOCUS = ".credit-table"
    DEFAULT_CSS = """
    CreditScreen #credit-sides { height: 2fr; min-height: 8; }
    CreditScreen.-narrow #credit-sides { layout: vertical; }
    CreditScreen #credit-detail { height: 1fr; min-height: 6; border: round $primary-darken-2; }
    CreditScreen.-short #credit-detail { height: 6; }
    CreditScreen.-short.-narrow.-two CreditPanel .credit-more { display: none; }
    """
    BINDINGS = [
        Binding("c", "compute", "Compute credit", id="credit_compute"),
        Binding("x", "cancel_compute", "Cancel computing", id="credit_cancel"),
        Binding("o", "open_step", "Open this step", id="credit_open"),
        Binding("escape", "cancel_or_back", "Back", id="back"),
    ]

    def __init__(self, episode_ids: Sequence[str], at_step: Optional[int] = None) -> None:
        super().__init__(classes="-two" if len(episode_ids) > 1 else None)
        self.episode_ids = list(episode_ids)[:2]
        self.at_step = at_step  # the step in view where the view was opened (its row is highlighted)
        self.episodes: dict[str, Any] = {}
        self.credits: dict[str, Any] = {}  # episode id -> EpisodeCredit (absent: not computed)
        self.computing: dict[str, Any] = {}  # episode id -> its worker
        self.detail: list[tuple[str, int]] = []  # the evidence links shown, by option id ev<N>
        self.side_in_view = 0

    # ----- layout and loading -------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TitleBar()
        with Horizontal(id="credit-sides"):
            for n, _ in enumerate(self.episode_ids):
                yield CreditPanel("AB"[n] if len(self.episode_ids) > 1 else "", id=f"credit-{n}")
        yield OptionList(id="credit-detail")
        yield KeyHints()

    @property
    def panels(self) -> list[CreditPanel]:
        return list(self.query(CreditPanel))

    @property
    def busy(self) -> bool:
        return bool(self.computing)

    def on_mount(self) -> None:
        self.sub_title = "credit"
        for episode_id in self.episode_ids:
            self._load(episode_id)
        for panel in self.panels:
            self._move_to_step(panel, self.at_step)
        self._show_detail()

    def _panel_of(self, episode_id: str) -> Optional[CreditPanel]:
        return next((p for p in self.panels if p.episode_id == episode_id), None)

    def _load(self, episode_id: str) -> None:
        """Read the episode and its latest stored credit, and show it (or say it is missing)."""
        from s3gym_tui.engine.credit import episode_credit

        panel = self.panels[self.episode_ids.index(episode_id)]
        store = self.app.store
        try:
            episode = store.episodes.get_episode(episode_id)
        except Exception as exc:  # noqa: BLE001 - a missing episode is a sentence
            panel.title(None, episode_id)
            panel.show_missing(f"Cannot open episode {episode_id}: {exc}")
            return
        self.episodes[episode_id] = episode
        panel.title(episode, episode_id)
        try:
            credit = episode_credit(store, episode_id)
        except Exception as exc:  # noqa: BLE001
            panel.show_missing(f"Cannot read the credit of {episode_id}: {exc}")
            return
        if credit is None:
            self.credits.pop(episode_id, None)
            panel.show_missing(self._missing_text(episode))
        else:
            self.credits[episode_id] = credit
            panel.show(credit)

    @staticmethod
    def _missing_text(episode: Any) -> Text:
        text = Text()
        text.append("Credit not computed yet", style="bold")
        text.append(f" for {episode.id}: no weight, shift or PI item is known (not 0, not 1: undefined).\n")
        text.append("c computes it: ", style="bold")
        text.append(f"the siblings of {episode.game} {episode.mode} seed {episode.seed}, PI written by the "
                    f"analyzer from the successful ones, token shifts measured by the scorer, weights from "
                    f"them (stored, like `s3gym credit {episode.id}`). While it runs, Escape or x cancels it.")
        return text

    # ----- the highlighted step and its PI items --------------------------------------------
    def _move_to_step(self, panel: CreditPanel, step: Optional[int]) -> None:
        if step is None or panel.credit is None:
            return
        rows = [a.step for a in panel.credit.actions]
        if step in rows:
            panel.table.move_cursor(row=rows.index(step), animate=False)

    def _panel_in_view(self) -> CreditPanel:
        panels = self.panels
        focused = self.focused
        for n, panel in enumerate(panels):
            if focused is not None and panel in focused.ancestors_with_self:
                self.side_in_view = n
        return panels[min(self.side_in_view, len(panels) - 1)]

    @on(DataTable.RowHighlighted, ".credit-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        """The side in view shows its step's PI; from Compare, the other side follows to the same step."""
        panels = self.panels
        source = next((p for p in panels if p.table is event.data_table), None)
        if source is None or not event.data_table.has_focus:
            if source is panels[min(self.side_in_view, len(panels) - 1)]:
                self._show_detail()
            return
        self.side_in_view = panels.index(source)
        action = source.action_at_row(event.cursor_row)
        for other in panels:
            if other is not source and action is not None:
                self._move_to_step(other, action.step)
        self._show_detail()

    def on_descendant_focus(self, _event) -> None:
        before = self.side_in_view
        self._panel_in_view()
        if before != self.side_in_view:
            self._show_detail()

    def _show_detail(self) -> None:
        """The highlighted step's aligned PI items (requirement, condition) and their evidence links."""
        detail = self.query_one("#credit-detail", OptionList)
        panel = self.panels[min(self.side_in_view, len(self.panels) - 1)]
        side = f"{panel.side} · " if panel.side else ""
        options: list[Option] = []
        self.detail = []
        action = panel.action_at_row(panel.table.cursor_row) if panel.credit is not None else None
        if panel.credit is None:
            detail.border_title = f"{side}aligned PI"
            options.append(Option(Text("— (no credit computed for this episode)", style="dim italic"),
                                  disabled=True))
        elif action is None:
            detail.border_title = f"{side}aligned PI"
            options.append(Option(Text("—", style="dim"), disabled=True))
        else:
            detail.border_title = safe(f"{side}step {action.step}: aligned PI · Enter or a click opens the "
                                       f"evidence step", one_line=True)
            if not action.items:
                options.append(Option(Text(NO_ITEM, style="dim italic"), disabled=True))
            for item in action.items:
                head = Text("• ", style="cyan")
                head.append_text(safe_text(item.requirement, "bold", one_line=True, max_chars=300))
                head.append("\n  when: ", style="dim")
                head.append_text(safe_text(item.condition, one_line=True, max_chars=300))
                options.append(Option(head, disabled=True))
                if not item.evidence:
                    options.append(Option(Text("    (no evidence stored)", style="dim italic"), disabled=True))
                for episode_id, step in item.evidence:
                    link = Text("    → evidence: ", style="dim")
                    link.append_text(safe_text(episode_id, "underline", one_line=True, max_chars=120))
                    link.append(f" step {step}", style="underline")
                    link.append_text(self._evidence_action(episode_id, step))
                    options.append(Option(link, id=f"ev{len(self.detail)}"))
                    self.detail.append((episode_id, step))
        detail.clear_options()
        detail.add_options(options)

    def _evidence_action(self, episode_id: str, step: int) -> Text:
        """ ": <the action the sibling took there>" (read once per sibling), or nothing."""
        cache = self.__dict__.setdefault("_sibling_actions", {})
        if episode_id not in cache:
            try:
                cache[episode_id] = {s.index: s.action for s in self.app.store.episodes.steps(episode_id,
                                                                                    include_prompt=False)}
            except Exception:  # noqa: BLE001 - a link without its action is still a link
                cache[episode_id] = {}
        action = cache[episode_id].get(step)
        if action is None:
            return Text("")
        text = Text(": ", style="dim")
        text.append_text(safe_text(action, one_line=True, max_chars=60))
        return text

    @on(OptionList.OptionSelected, "#credit-detail")
    def _open_evidence(self, event: OptionList.OptionSelected) -> None:
        option_id = event.option.id or ""
        if not option_id.startswith("ev"):
            return
        episode_id, step = self.detail[int(option_id[2:])]
        self.app.open_episode(episode_id, at_step=step)

    @on(DataTable.RowSelected, ".credit-table")
    def _to_items(self, _event: DataTable.RowSelected) -> None:
        """Enter on a step: to its evidence links (the first one highlighted)."""
        detail = self.query_one("#credit-detail", OptionList)
        if not self.detail:
            self.notify("No evidence to open at this step.")
            return
        detail.focus()
        detail.highlighted = next(i for i in range(detail.option_count)
                                  if not detail.get_option_at_index(i).disabled)

    def action_open_step(self) -> None:
        """Open the episode in view at the highlighted step (its replay)."""
        panel = self._panel_in_view()
        action = panel.action_at_row(panel.table.cursor_row) if panel.credit is not None else None
        if panel.episode_id is None:
            return
        self.app.open_episode(panel.episode_id, at_step=None if action is None else action.step)

    # ----- computing ------------------------------------------------------------------------
    def action_compute(self) -> None:
        """Compute the credit of the episodes shown that have none (or, when all have, the side in
        view again). A model that cannot score a given completion (an API, the scripted players) is
        said so, and an open scorer model is offered (the embedded one first): the choice is recorded."""
        from s3gym_tui.engine.credit_score import DEFAULT_OPEN_SCORER, can_score, cannot_score_message
        from s3gym_tui.screens.dialogs import TextInputDialog

        wanted = self._to_compute()
        if not wanted:
            return
        models = sorted({self.episodes[e].model for e in wanted})
        unable = [m for m in models if not can_score(m)]
        if not unable:
            self._start(wanted, None)
            return

        def check(name: str) -> tuple[bool, str]:
            return (True, "") if can_score(name) else (False, cannot_score_message(name))

        def chosen(name: Optional[str]) -> None:
            if name and name.strip():
                self._start(wanted, name.strip())

        self.app.push_screen(TextInputDialog(
            "Score the shifts with an open model", DEFAULT_OPEN_SCORER,
            hint=f"{cannot_score_message(unable[0])}. Token shifts need a model whose weights we hold: the "
                 f"embedded model ({DEFAULT_OPEN_SCORER}) or a local Hugging Face directory (hf:<dir>). "
                 f"The scorer is recorded with the credit.", check=check), chosen)

    def _to_compute(self) -> list[str]:
        missing = [e for e in self.episode_ids if e in self.episodes and e not in self.credits
                   and e not in self.computing]
        if not missing:
            panel = self._panel_in_view()
            if panel.episode_id in self.computing:
                self.notify("Already computing: x cancels.")
            elif panel.episode_id in self.episodes:  # computed already: compute again on request
                missing = [panel.episode_id]
            else:
                self.notify("Nothing to compute here.")
        return missing

    def _start(self, episode_ids: list[str], scorer: Optional[str]) -> None:
        for episode_id in episode_ids:
            if episode_id in self.computing:
                continue
            panel = self._panel_of(episode_id)
            panel.show_missing(Text("Computing the credit…", style="italic"))
            panel.show_progress(None, None, "Computing the credit: finding the siblings…")
            self.computing[episode_id] = self._compute(episode_id, scorer)
        self.refresh_bindings()

    @thread_work(group=CREDIT_GROUP)
    def _compute(self, episode_id: str, scorer: Optional[str]) -> None:
        worker = get_current_worker()

        def progress(done: Optional[int], total: Optional[int], what: str = "") -> None:
            if worker.is_cancelled:
                raise CreditCancelled()
            self.post_message(CreditProgressed(episode_id, done, total, what))

        try:
            store = self.app.store.for_thread()
            try:
                compute_episode_credit(store, episode_id, scorer, progress)
            finally:
                store.close()
        except CreditCancelled:
            self.post_message(CreditComputed(episode_id, cancelled=True))
            return
        except Exception as exc:  # noqa: BLE001 - one line, never a crash
            self.post_message(CreditComputed(episode_id, error=" ".join(f"{exc}".split()) or type(exc).__name__))
            return
        self.post_message(CreditComputed(episode_id))

    def on_credit_progressed(self, message: CreditProgressed) -> None:
        panel = self._panel_of(message.episode_id)
        if panel is not None and message.episode_id in self.computing:
            counted = f" ({message.done}/{message.total})" if message.total else ""
            panel.show_progress(message.done, message.total, f"Computing the credit{counted}: {message.what}")

    def on_credit_computed(self, message: CreditComputed) -> None:
        self.computing.pop(message.episode_id, None)
        panel = self._panel_of(message.episode_id)
        if panel is None:
            return
        panel.end_progress()
        self._load(message.episode_id)
        self._move_to_step(panel, self.at_step)  # where the view was opened, as before computing
        if message.cancelled:
            self.notify("Credit computation cancelled: nothing was stored.")
        elif message.error:
            self.notify(message.error, title="Cannot compute the credit", severity="error", timeout=15)
            if message.episode_id not in self.credits:
                episode = self.episodes.get(message.episode_id)
                text = self._missing_text(episode) if episode is not None else Text()
                text.append("\n\nThe last attempt failed: ", style="bold red")
                text.append(safe(message.error, max_chars=600, max_lines=4))
                panel.show_missing(text)
        self._show_detail()
        self.refresh_bindings()

    def action_cancel_compute(self) -> None:
        if not self.computing:
            return
        for worker in list(self.computing.values()):
            worker.cancel()
        self.notify("Cancelling: the computation stops at its next step.")

    def action_cancel_or_back(self) -> None:
        if self.computing:
            self.action_cancel_compute()
        else:
            self.action_back()

    def on_store_changed(self, _message: StoreChanged) -> None:
        """Credit computed elsewhere (`s3gym credit`, another window): show it when this view had none."""
        for episode_id in self.episode_ids:
            if episode_id in self.episodes and episode_id not in self.credits and episode_id not in self.computing:
                self._load(episode_id)
                if episode_id in self.credits:
                    self._show_detail()

    def check_action(self, action: str, parameters: tuple) -> Optional[bool]:
        if action == "cancel_compute":
            return bool(self.computing)
        if action == "compute":
            return not self.computing
        return True
