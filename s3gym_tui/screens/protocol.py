"""Protocol run: launch, watch, stop and resume a whole run (exploration episodes, checkpoints)."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical, VerticalScroll
from textual.widgets import Label, ProgressBar, Static

from s3gym_tui.engine.compare import state_at
from s3gym_tui.engine.judging import verdict
from s3gym_tui.models import Episode, Run, Step, Summary
from s3gym_tui.screens.analysis_common import AnalysisScreen, fmt
from s3gym_tui.widgets.verdicts import judged_value, judgement_text, range_note, range_note_text, self_score_value
from s3gym_tui.screens.live import LiveScreenMixin
from s3gym_tui.widgets.board import BoardPanel
from s3gym_tui.widgets.checkpoint_plot import Curve, CurvePlot
from s3gym_tui.textgate import safe_text
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.key_hints import KeyHints


def summary_sections(summary: Optional[Summary]) -> Text:
    """The retain / avoid / next sections of a summary version as styled text."""
    if summary is None:
        return Text("no summary yet", style="italic")
    text = Text()
    for label, body in (("Retain", summary.retain), ("Avoid", summary.avoid), ("Next", summary.next)):
        text.append(f"{label}: ", style="bold")
        text.append((body.strip() or "(empty)") + "\n")
    text.rstrip()
    return text


class ProtocolScreen(LiveScreenMixin, AnalysisScreen):
    """Follows a run through the store, whichever process drives it (a run started or resumed here is a
    process of its own: leaving the screen or the app does not stop it); r resumes, s stops."""

    DEFAULT_CSS = """
    ProtocolScreen #proto-status { height: auto; padding: 0 1; background: $boost; }
    ProtocolScreen #proto-progress { height: auto; padding: 0 1; }
    ProtocolScreen #proto-progress Label { width: auto; padding: 0 1 0 0; }
    ProtocolScreen #proto-check-label { margin-left: 2; }
    ProtocolScreen #proto-progress ProgressBar { width: 1fr; padding: 0 2 0 0; }
    ProtocolScreen #proto-progress ProgressBar Bar { width: 1fr; }
    ProtocolScreen #proto-main { height: 1fr; }
    ProtocolScreen #proto-left { width: 1fr; }
    ProtocolScreen #proto-right { width: 1fr; min-width: 30; }
    ProtocolScreen #proto-curve { height: 1fr; min-height: 10; border: round $primary-darken-2; }
    ProtocolScreen #proto-summary { height: auto; max-height: 14; border: round $primary-darken-2;
                                    scrollbar-gutter: stable; scrollbar-size-horizontal: 0; }
    /* room kept for the vertical bar: no re-wrap when it comes (with a horizontal size, Textual would
       also add a blank row to the auto height for the stable gutter) */
    ProtocolScreen #proto-summary-text { height: auto; padding: 0 1; }
    ProtocolScreen #proto-board { border: round $primary-darken-2; padding: 0 1; }
    ProtocolScreen #proto-step { height: auto; padding: 0 1; }
    ProtocolScreen.-short #proto-summary { max-height: 7; }
    ProtocolScreen.-narrow #proto-progress ProgressBar { display: none; }
    /* huge (200x50): curve, summary and live board side by side, each the full height */
    ProtocolScreen.-huge #proto-left { layout: horizontal; width: 2fr; }
    ProtocolScreen.-huge #proto-curve { width: 1fr; height: 1fr; }
    ProtocolScreen.-huge #proto-summary { width: 1fr; height: 1fr; max-height: 100%; }
    """
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide"), (170, "-huge")]
    VERTICAL_BREAKPOINTS = [(0, "-short"), (32, "-tall")]

    BINDINGS = [
        Binding("r", "resume", "Run/Resume", id="protocol_resume"),
        Binding("s,p", "stop", "Stop/pause", id="protocol_stop"),
        Binding("m", "summaries", "Summaries", id="protocol_summaries"),
        Binding("t", "report", "Report", id="protocol_report"),
    ]

    def __init__(self, run_id: str) -> None:
        super().__init__()
        self.run_id = run_id
        self.run: Optional[Run] = None
        self.points: dict[int, Optional[float]] = {}
        self.explore_done: set[str] = set()
        self.latest_summary: Optional[Summary] = None
        self.current_episode: Optional[Episode] = None  # the episode the board follows
        self.current_steps: list[Step] = []
        self._game = None  # the followed episode's game, stepped along with its steps
        self.error: Optional[str] = None
        self.lease = None  # the run's live lease: the process that drives it (this app's child or another)
        self._contract = None  # engine.contract.ContractWatch over the replies seen
        self._watched: set[tuple[str, int]] = set()

    # ----- layout -----------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static(id="proto-status")
        with Horizontal(id="proto-progress"):
            yield Label("Exploration", id="proto-explore-label")
            yield ProgressBar(id="proto-explore", show_eta=False, show_percentage=False)
            yield Label("Checkpoints", id="proto-check-label")
            yield ProgressBar(id="proto-checks", show_eta=False, show_percentage=False)
        with Horizontal(id="proto-main"):
            with Vertical(id="proto-left"):
                yield CurvePlot("Checkpoint mean score", "exploration episodes x", "score", legend="beside",
                                id="proto-curve")
                with VerticalScroll(id="proto-summary"):
                    yield Static(id="proto-summary-text")
            with VerticalScroll(id="proto-right"):
                yield BoardPanel(id="proto-board")
                yield Static(id="proto-step")
        yield KeyHints()

    def on_mount(self) -> None:
        self.query_one("#proto-curve").border_title = "Checkpoint curve"
        self.query_one("#proto-summary").border_title = "Latest summary"
        try:
            self.run = self.app.store.runs.get_run(self.run_id)
        except Exception as exc:  # noqa: BLE001 - a bad id or a broken store is a message, not a crash
            self.error = str(exc)
            self.notify(f"Cannot open run {self.run_id}: {exc}", severity="error")
            self._render_status()
            return
        self.sub_title = f"protocol · {self.run_id}"
        self._load_from_store()
        if self.run.status == "running" and self.lease is None and self.child is None:
            self.notify("This run was interrupted (its driver is gone): r resumes it.", severity="warning")

    def _load_from_store(self) -> None:
        with self.app.store.snapshot() as store:
            self.run = store.runs.get_run(self.run_id)
            lease = store.leases.lease(self.run_id)
            self.lease = lease if lease is not None and lease.alive() else None
            self.points = {c.x: c.mean for c in store.checkpoints.list(self.run_id)}
            episodes = store.episodes.list(self.run_id)
            self.explore_done = {e.id for e in episodes if e.phase == "explore" and e.status == "finished"}
            self.latest_summary = store.summaries.current_summary(self.run_id)
            if episodes:
                self._follow(episodes)
        self._render_all()

    def refresh_from_store(self) -> None:
        """Follow changes by any process: the driver (this app or another process), checkpoints,
        curated summaries, and, when another process drives the run, its current episode."""
        try:
            self._load_from_store()
        except Exception as exc:  # noqa: BLE001 - e.g. the run was deleted meanwhile
            self.error = str(exc)
            self._render_status()

    def _follow(self, episodes: list[Episode]) -> None:
        """Show the newest episode another driver works on, reading only its new steps."""
        newest = next((e for e in reversed(episodes) if e.status == "running"), episodes[-1])
        current = self.current_episode
        if current is None or current.id != newest.id:
            self._set_episode(newest)
            return
        if newest.n_steps > len(self.current_steps):
            fresh = [s for s in self.app.store.episodes.steps(newest.id, include_prompt=False)
                     if s.index >= len(self.current_steps)]
            for step in fresh:
                self._watch_step(step)
                self.current_steps.append(step)
                if self._game is not None:
                    self._game.step(step.action)
        self.current_episode = newest

    # ----- the run's process ---------------------------------------------------------------
    @property
    def running(self) -> bool:
        """A process drives the run right now (this app's child or any other: one mechanism)."""
        return self.lease is not None

    @property
    def child(self):
        """The process of this app that drives (or is starting to drive) this run, if any."""
        from s3gym_tui.screens.run_control import children

        return children(self.app).of_run(self.run_id)

    def action_resume(self) -> None:
        """Resume is its own key, after a dialog with what is left; opening a run never resumes it."""
        if self.run is None:
            return
        from s3gym_tui.screens.run_control import offer_resume

        self.refresh_from_store()
        offer_resume(self.app, self.run_id, started=lambda _child: self._render_status())

    def action_stop(self) -> None:
        from s3gym_tui.screens.run_control import stop_run

        self.refresh_from_store()
        stop_run(self.app, self.run_id)

    def action_summaries(self) -> None:
        self.app.open_summaries(self.run_id)

    def action_report(self) -> None:
        self.app.open_report([self.run_id])

    # ----- rendering --------------------------------------------------------------------
    def _set_episode(self, episode: Episode) -> None:
        self.current_episode = episode
        self.current_steps = list(self.app.store.episodes.steps(episode.id, include_prompt=False))
        for step in self.current_steps[-10:]:
            self._watch_step(step)
        try:
            self._game = state_at(episode, self.current_steps, len(self.current_steps))
        except Exception as exc:  # noqa: BLE001 - shown on the board instead
            self._game = None
            self.notify(f"Cannot rebuild the board of {episode.id}: {exc}", severity="error")
        if self.run is not None and self.run.config.pathway == "history" and self.is_mounted:
            self._render_summary()

    def _watch_step(self, step: Step) -> None:
        """Feed the reply-contract watch; the status line says when most recent replies do not parse."""
        key = (step.episode_id, step.index)
        if self.run is None or key in self._watched:
            return
        self._watched.add(key)
        if self._contract is None:
            from s3gym_tui.engine.contract import ContractWatch

            self._contract = ContractWatch(self.run.config.model)
        before = self._contract.warning
        self._contract.add(step)
        if bool(self._contract.warning) != bool(before):
            self._render_status()

    @property
    def contract_warning(self) -> Optional[str]:
        return self._contract.warning if self._contract is not None else None

    def _render_all(self) -> None:
        self._render_status()
        self._render_progress()
        self._render_curve()
        self._render_summary()
        self._render_episode()

    def _render_status(self) -> None:
        status = self.query_one("#proto-status", Static)
        if self.run is None:
            status.update(safe_text(f"Run {self.run_id}: {self.error or 'not found'}", style="bold red"))
            return
        cfg = self.run.config
        child = self.child
        if self.running:
            state = "running"
        elif child is not None:
            state = "starting"
        elif self.run.status == "running":
            state = "interrupted"
        else:
            state = self.run.status
        text = Text()
        text.append(f"{self.run.id}", style="bold")
        text.append(f"  {cfg.game} · {cfg.pathway} · {cfg.model}  ")
        style = {"running": "bold yellow", "starting": "bold yellow", "finished": "bold green",
                 "failed": "bold red", "stopped": "bold magenta",
                 "interrupted": "bold magenta"}.get(state, "bold")
        text.append(f"[{state}]", style=style)
        if self.lease is not None:
            mine = " (started by this app)" if child is not None and child.pid == self.lease.pid else ""
            text.append(f"  driven by {self.lease.describe()}{mine} · following it live (s: stop it)",
                        style="yellow")
        elif child is not None:
            text.append(f"  PID {child.pid} is starting (s: stop it)", style="yellow")
        elif state in ("stopped", "failed", "created", "interrupted"):
            if self.run.status_reason and not self.error:
                text.append(f"  {self.run.status_reason}", style="italic")
            text.append("  press r to resume", style="dim")
        if self.error:
            text.append(f"  {self.error}", style="red")
        if self.contract_warning:
            text.append(f"\n⚠ {self.contract_warning}", style="bold yellow")
        status.update(safe_text(text, max_chars=4000))  # ids, models, stop reasons, errors

    def _render_progress(self) -> None:
        if self.run is None:
            return
        cfg = self.run.config
        total_x, total_c = cfg.explore_episodes, len(cfg.checkpoints())
        done_x, done_c = len(self.explore_done), len(self.points)
        self.query_one("#proto-explore-label", Label).update(f"Exploration {done_x}/{total_x}")
        self.query_one("#proto-check-label", Label).update(f"Checkpoints {done_c}/{total_c}")
        self.query_one("#proto-explore", ProgressBar).update(total=max(total_x, 1),
                                                             progress=done_x if total_x else 1)
        self.query_one("#proto-checks", ProgressBar).update(total=max(total_c, 1), progress=done_c)

    def _render_curve(self) -> None:
        if self.run is None:
            return
        points = tuple((x, self.points.get(x)) for x in self.run.config.checkpoints() if x in self.points)
        self.query_one(CurvePlot).show([Curve(self.run.config.pathway, points)],
                                       empty_text="no checkpoint yet")

    def _render_summary(self) -> None:
        box = self.query_one("#proto-summary")
        if self.run is not None and self.run.config.pathway != "summary" and self.latest_summary is None:
            box.border_title = "Experience"
            self.query_one("#proto-summary-text", Static).update(safe_text(self._experience_text()))
            return
        s = self.latest_summary
        box.border_title = "Latest summary" if s is None else safe_text(
            f"Summary v{s.version} · {s.author}{' · pinned' if s.pinned else ''}", one_line=True)
        self.query_one("#proto-summary-text", Static).update(safe_text(summary_sections(s)))

    def _experience_text(self) -> Text:
        """What the followed episode carries over, for runs without summaries."""
        pathway = self.run.config.pathway if self.run else "none"
        episode = self.current_episode
        if pathway != "history":
            return Text(f"the {pathway} pathway carries no experience between episodes", style="italic")
        if episode is None:
            return Text("History ICL: raw previous exploration episodes under Hint Messages", style="italic")
        text = Text("History ICL: ", style="bold")
        text.append(f"{episode.id} sees {len(episode.history_episode_ids)} previous exploration "
                    f"episode(s) raw")
        if episode.history_cut:
            text.append(f"; {episode.history_cut} older dropped for the budget", style="yellow")
        return text

    def _render_episode(self) -> None:
        board = self.query_one(BoardPanel)
        info = self.query_one("#proto-step", Static)
        episode = self.current_episode
        if episode is None:
            board.show_message("no episode yet", "Current episode")
            info.update("")
            return
        steps = self.current_steps
        where = (f"explore #{episode.index + 1}" if episode.phase == "explore"
                 else f"eval x={episode.checkpoint} #{episode.index + 1}")
        if self._game is not None:
            board.show_game(self._game, f"{where} · seed {episode.seed} · step {len(steps)}")
        else:
            board.show_message("cannot rebuild the board", "Current episode")
        text = Text()
        if steps:
            last = steps[-1]
            text.append("Last action: ", style="bold")
            text.append(f"{last.action}\n")
            kind = verdict(last.self_score, last.reward)
            note = range_note(episode.game, episode.mode, last.self_score)
            text.append("Self-score ", style="bold")
            text.append_text(self_score_value(self.app, last.self_score, kind, note is not None))
            text.append("  vs reward ", style="bold")
            text.append_text(judged_value(self.app, last.reward, kind))
            text.append("  ")
            text.append_text(judgement_text(self.app, last.self_score, last.reward))
            if note is not None:  # on the same line: the live screen's layout does not move
                text.append("  ")
                text.append_text(range_note_text(self.app, note))
        else:
            text.append("no step yet", style="italic")
        if episode.status != "running":
            text.append(f"\nEpisode {episode.status}: score {fmt(episode.score)}", style="bold")
        info.update(safe_text(text, max_chars=2000))
