"""Replay and fork on the play screen: move through a stored episode, fork from a step, compare a fork
with its original. A mixin of PlayScreen (handlers by naming convention)."""

from __future__ import annotations

from typing import Optional

from textual.widgets import DataTable

from s3gym_tui.screens.dialogs import ForkDialog
from s3gym_tui.widgets.steps_table import StepsTable


class ReplayControls:
    """Needs the PlayScreen attributes: readonly, episode, steps, position, proposal and _goto/_show_step."""

    def action_prev_step(self) -> None:
        self._goto(self.position - 1)

    def action_next_step(self) -> None:
        self._goto(self.position + 1)

    def action_first_step(self) -> None:
        self._goto(0)

    def action_last_step(self) -> None:
        self._goto(len(self.steps))

    def on_data_table_row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.data_table.id != "steps":
            return
        if self.readonly:
            if event.cursor_row != min(self.position, len(self.steps) - 1):
                self._goto(event.cursor_row)
        elif self.proposal is None:
            self._show_step(event.cursor_row)

    def _fork_point(self) -> int:
        if self.readonly:
            return min(self.position, len(self.steps))
        return max(0, min(self.query_one(StepsTable).cursor_row, len(self.steps)))

    def action_fork(self) -> None:
        if self.episode is None:
            return
        at = self._fork_point()
        episode = self.episode
        runs = [(f"{r.id} · {r.config.pathway}", r.id) for r in self.app.store.list_runs(limit=200, damaged=[])
                if r.config.game == episode.game]

        def chosen(choice: Optional[dict]) -> None:
            if choice:
                from s3gym_tui.screens.play import PlayScreen

                self.app.push_screen(PlayScreen(model=choice["model"], pathway=choice["pathway"],
                                                source_run_id=choice["run_id"], fork_of=episode.id, fork_step=at))

        self.app.push_screen(ForkDialog(
            f"Fork {episode.id} before step {at} (keeps steps 0..{at - 1})" if at else
            f"Fork {episode.id} from its start", model=episode.model, pathway=episode.pathway,
            runs=runs, run_id=episode.run_id), chosen)

    def action_compare(self) -> None:
        if self.episode is None or not self.episode.fork_of:
            return
        try:
            self.app.open_compare(self.episode.fork_of, self.episode.id)
        except ImportError as exc:
            self.notify(f"The compare screen is not available yet ({exc}).", severity="warning")

