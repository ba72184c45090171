"""Fork and compare on the play screen: branch a new episode after the step in view, or compare a
fork with its original. Opens screens through the app (no import of the play screen)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Optional

from s3gym_tui.screens.dialogs import ForkDialog

if TYPE_CHECKING:
    from s3gym_tui.screens.play import PlayScreen


class ForkControls:
    """What `f` (fork here) and `C` (compare with the original) do for one play screen."""

    def __init__(self, screen: "PlayScreen") -> None:
        self.screen = screen

    def fork(self) -> None:
        """Fork after the steps in view: the board shown is the state the fork starts from."""
        screen = self.screen
        episode = screen.episode
        if episode is None:
            return
        at = screen.position
        app = screen.app
        runs = [(f"{r.id} · {r.config.pathway}", r.id) for r in app.store.list_runs(limit=200, damaged=[])
                if r.config.game == episode.game]

        def chosen(choice: Optional[dict]) -> None:
            if choice:
                app.open_play(model=choice["model"], pathway=choice["pathway"], source_run_id=choice["run_id"],
                              fork_of=episode.id, fork_step=at)

        title = (f"Fork {episode.id} after step {at - 1} (keeps steps 0..{at - 1})" if at else
                 f"Fork {episode.id} from its start")
        app.push_screen(ForkDialog(title, model=episode.model, pathway=episode.pathway, runs=runs,
                                   run_id=episode.run_id, game=episode.game), chosen)

    def compare(self) -> None:
        episode = self.screen.episode
        if episode is None or not episode.fork_of:
            return
        self.screen.app.open_compare(episode.fork_of, episode.id)
