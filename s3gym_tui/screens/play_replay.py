"""Fork and compare on the play screen: branch a new episode after the step in view, or compare a
fork with its original. Opens screens through the app (no import of the play screen)."""

from __future__ import annotations

from typing import Optional

from s3gym_tui.screens.dialogs import FORK_AS_SOURCE, FORK_NO_EXPERIENCE, ForkDialog
from s3gym_tui.screens.play_support import PlayHost


def fork_experiences(store, episode) -> list[tuple[str, str]]:
    """The fork dialog's experience choices for `episode`: as the source (first, the default), none,
    then the runs of its game, each labelled with the state the fork would see (a borrow from a run
    the source stands in stops at the source's state). Plain text: the dialog gates it."""
    from s3gym_tui.engine.visibility import latest_x, vantage_of

    here = vantage_of(store, episode)
    where = f"run {here.run_id} at x={here.x}" if here.run_id else "no run"
    source = f"as the source: what it saw ({where})"
    choices = [(source, FORK_AS_SOURCE), ("no experience (chosen)", FORK_NO_EXPERIENCE)]
    for run in store.runs.list_runs(limit=200, damaged=[]):
        if run.config.game != episode.game:
            continue
        limit, latest = here.limit(run.id), latest_x(store, run.id)
        state = (f"x={min(limit, latest)}, no later than the source" if limit is not None
                 else f"its latest, x={latest}")
        choices.append((f"{run.id} · {run.config.pathway} · {state} (chosen)", f"run:{run.id}"))
    return choices


class ForkControls:
    """What `f` (fork here) and `C` (compare with the original) do for one play screen."""

    def __init__(self, screen: PlayHost) -> None:
        self.screen = screen

    def fork(self) -> None:
        """Fork after the steps in view: the board shown is the state the fork starts from. It sees
        what the source saw there unless the person chooses other experience (fork_experiences)."""
        screen = self.screen
        episode = screen.episode
        if episode is None:
            return
        at = screen.position
        app = screen.app

        def chosen(choice: Optional[dict]) -> None:
            if choice:
                app.open_play(model=choice["model"], pathway=choice["pathway"], source_run_id=choice["run_id"],
                              experience=choice["experience"], fork_of=episode.id, fork_step=at)

        title = (f"Fork {episode.id} after step {at - 1} (keeps steps 0..{at - 1})" if at else
                 f"Fork {episode.id} from its start")
        app.push_screen(ForkDialog(title, model=episode.model, pathway=episode.pathway,
                                   experiences=fork_experiences(app.store, episode), game=episode.game), chosen)

    def compare(self) -> None:
        episode = self.screen.episode
        if episode is None or not episode.fork_of:
            return
        self.screen.app.open_compare(episode.fork_of, episode.id)
