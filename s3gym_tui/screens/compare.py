"""Compare two stored episodes side by side, stepped together: boards, actions, self-scores and
rewards aligned step by step, the first divergence, cumulative reward curves, and what each agent
had in context (raw history vs summary tips)."""

from __future__ import annotations

from typing import Optional

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal
from textual.widgets import Static

from s3gym_tui.engine.citations import cited, find, lacking
from s3gym_tui.engine.compare import (AlignedRow, align, context_at, cumulative_rewards, first_divergence,
                                      state_at)
from s3gym_tui.models import Episode, Step
from s3gym_tui.engine.judging import verdict
from s3gym_tui.screens.analysis_common import AnalysisScreen, fmt
from s3gym_tui.widgets.checkpoint_plot import Curve, CurvePlot
from s3gym_tui.widgets.compare_side import CITED_STYLE, CompareSide
from s3gym_tui.widgets.key_hints import KeyHints
from s3gym_tui.widgets.signals import follow, release
from s3gym_tui.widgets.fit_table import FitTable
from s3gym_tui.widgets.table import DataTable
from s3gym_tui.textgate import safe, safe_text
from s3gym_tui.widgets.title_bar import TitleBar
from s3gym_tui.widgets.verdicts import (judged_value, judgement_text, legend, mark_text, outside, range_note,
                                        range_note_text, self_score_value)

END_KEY = "end"
DIVERGENCE_STYLE = "bold red"
CONTEXT_CHARS = 20_000  # of a Hint Messages block shown per side (the newest part of a long history)
MAX_LACKING = 1  # rules the other side cited that a summary lacks, named under its step (the others counted)
MAX_ABSENT = 3  # cited steps the context shown does not hold, named under the reply


def side_label(episode: Episode) -> str:
    where = (f"eval x={episode.checkpoint}" if episode.phase == "eval" and episode.checkpoint is not None
             else episode.phase)
    return f"{episode.pathway} · {where} · seed {episode.seed}"


class CompareScreen(AnalysisScreen):
    """Two episodes stepped together with one key."""
    AUTO_FOCUS = "#cmp-table"  # focused as the screen mounts (focusing later restyles and repaints)

    DEFAULT_CSS = """
    CompareScreen #cmp-status { height: auto; padding: 0 1; background: $boost; }
    CompareScreen #cmp-sides { height: 1fr; min-height: 12; }
    CompareScreen #cmp-bottom { height: 12; min-height: 8; }  /* fit_to_size: the table's rows, at most 2/5 */
    CompareScreen #cmp-table { width: 3fr; border: round $primary-darken-2; }
    CompareScreen #cmp-curves { width: 2fr; border: round $primary-darken-2; min-height: 8; }
    CompareScreen.-narrow #cmp-curves { display: none; }
    /* a short terminal keeps the reply and its evidence: the aligned table below names the actions */
    CompareScreen.-short CompareSide BoardPanel { display: none; }
    CompareScreen.-short CompareSide .side-reply { max-height: 4; }
    CompareScreen.-short CompareSide .side-step { max-height: 3; }
    """
    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (100, "-wide")]

    BINDINGS = [
        Binding("n,right", "next", "Next step", id="compare_next", priority=True),
        Binding("p,left", "previous", "Previous", id="compare_previous", priority=True),
        Binding("g", "divergence", "First divergence", id="compare_divergence", priority=True),
        Binding("home", "first", "First step", id="compare_first", show=False, priority=True),
        Binding("end", "last", "Last step", id="compare_last", show=False, priority=True),
        Binding("m", "annotate", "Mark A", id="compare_mark_a"),
        Binding("M", "annotate_b", "Mark B", id="compare_mark_b", show=False),
        Binding("w", "credit", "Credit per action", id="compare_credit", show=False),  # in help and the palette
    ]

    def __init__(self, episode_a: str, episode_b: str, at_divergence: bool = False) -> None:
        super().__init__()
        self.episode_ids = (episode_a, episode_b)
        self.at_divergence = at_divergence  # open at the first divergence (the tour) instead of step 1
        self.episodes: tuple[Optional[Episode], Optional[Episode]] = (None, None)
        self.steps: tuple[list[Step], list[Step]] = ([], [])
        self.rows: list[AlignedRow] = []
        self.divergence: Optional[int] = None
        self.position = 0  # 0..len(rows); len(rows) is the end (final boards)

    def compose(self) -> ComposeResult:
        yield TitleBar()
        yield Static(id="cmp-status")
        with Horizontal(id="cmp-sides"):
            yield CompareSide("A", id="cmp-a")
            yield CompareSide("B", id="cmp-b")
        with Horizontal(id="cmp-bottom"):
            yield FitTable(id="cmp-table", cursor_type="row", zebra_stripes=True)
            yield CurvePlot("Cumulative reward", "step", "", legend="beside", id="cmp-curves")
        yield KeyHints()

    # ----- loading ------------------------------------------------------------------------
    def on_mount(self) -> None:
        self.sub_title = "compare"
        table = self.query_one("#cmp-table", DataTable)
        table.border_title = "Aligned steps: self-score s, verifier reward r"
        for label, key in (("#", "i"), ("A action", "a"), ("A s", "sa"), ("A r", "ra"), ("", "ja"),
                           ("B action", "b"), ("B s", "sb"), ("B r", "rb"), ("", "jb"), ("≠", "eq")):
            # a long action (chess: seven pieces' moves) is cut in the middle; the side shows it whole
            table.add_column(label, key=key, shorten=12 if key in ("a", "b") else 0)
        follow(self, self.app.theme_changed_signal, lambda _theme: self._restyle())
        self.query_one("#cmp-curves").border_title = "Cumulative reward (A vs B)"
        store = self.app.store
        loaded = []
        for episode_id in self.episode_ids:
            try:
                episode = store.episodes.get_episode(episode_id)
                loaded.append((episode, list(store.episodes.steps(episode_id, include_prompt=False))))
            except Exception as exc:  # noqa: BLE001 - a missing episode is a message
                self.notify(f"Cannot open episode {episode_id}: {exc}", severity="error")
                loaded.append((None, []))
        self.episodes = (loaded[0][0], loaded[1][0])
        self.steps = (loaded[0][1], loaded[1][1])
        game = next((e.game for e in self.episodes if e is not None), None)
        self.rows = align(*self.steps, game=game)
        self.divergence = first_divergence(*self.steps, game=game)
        table.border_subtitle = self._legend()
        self._fill_table()
        self._draw_curves()
        self.fit_to_size()
        table.focus()
        self.go(self.divergence if self.at_divergence and self.divergence is not None else 0)

    def _marks(self, episode_id: str) -> dict:
        """An episode's step annotations by index (read once per side)."""
        cache = self.__dict__.setdefault("_marks_of", {})
        if episode_id not in cache:
            try:
                cache[episode_id] = self.app.store.annotations.annotations_of_steps(episode_id)
            except Exception:  # noqa: BLE001 - annotations never stop a comparison
                cache[episode_id] = {}
        return cache[episode_id]

    def action_annotate(self) -> None:
        """Mark side A's step in view (B: the same key with shift)."""
        self._annotate(0)

    def action_credit(self) -> None:
        """Both sides' credit per action (screens/credit.py), at side A's step in view."""
        ids = [e.id for e in self.episodes if e is not None]
        if not ids:
            return
        steps = self.steps[0] if self.episodes[0] is not None else self.steps[1]
        at = steps[self.position].index if self.position < len(steps) else None
        self.app.open_credit(ids, at_step=at)

    def action_annotate_b(self) -> None:
        self._annotate(1)

    def _annotate(self, side: int) -> None:
        from s3gym_tui.screens.annotate_dialog import annotate

        episode, steps, k = self.episodes[side], self.steps[side], self.position
        if episode is None or k >= len(steps):
            self.notify("No step of that side here to mark.")
            return

        def done() -> None:
            self.__dict__.get("_marks_of", {}).pop(episode.id, None)
            self._render_sides()

        annotate(self, kind="step", title=f"Mark step {steps[k].index} of {episode.id}", episode_id=episode.id,
                 step_index=steps[k].index, done=done)

    def on_unmount(self) -> None:
        release(self)  # a signal subscription would keep this screen alive

    def on_resize(self) -> None:
        self.fit_to_size()

    def on_screen_resume(self) -> None:
        self.fit_to_size()  # the terminal may have been resized while Compare was below others

    def fit_to_size(self) -> None:
        """The aligned steps take the rows they need (at most 2/5 of the screen, at least 8): the two
        contexts above, what the comparison is about, get the rest (a tall terminal's rows went
        to an empty table before)."""
        if not self.is_mounted:
            return
        body = max(0, self.app.size.height - 3)  # the title, the status line and the footer
        rows = max(8, min(len(self.rows) + 4, body * 2 // 5))  # rows, the end row, header, border (2)
        bottom = self.query_one("#cmp-bottom")
        if bottom.styles.height is None or bottom.styles.height.value != rows:
            bottom.styles.height = rows

    def _restyle(self) -> None:
        """The theme changed: the verdict colours are the theme's, so redraw the cells and sides."""
        self.query_one("#cmp-table", DataTable).border_subtitle = self._legend()
        self._fill_table()
        self.go(self.position)

    def _outside(self, side: int, self_score: Optional[float]) -> bool:
        """The engine's decision: is this self-score of side A (0) or B (1) out of its game's step range?"""
        episode = self.episodes[side]
        return episode is not None and outside(episode.game, episode.mode, self_score)

    def _legend(self) -> Text:
        """The verdict legend; with a self-score out of range on either side, what its mark means."""
        marked = [(e.game, e.mode) for side, (e, steps) in enumerate(zip(self.episodes, self.steps))
                  if e is not None and any(self._outside(side, s.self_score) for s in steps)]
        return legend(self.app, marked)

    def _judged(self, side: int, action: Optional[str], self_score: Optional[float],
                reward: Optional[float]) -> tuple[Text | str, Text | str, Text | str]:
        """(s, r, mark) cells of one side: both values in the colour of the step's verdict, s with the
        out-of-range mark when it is."""
        if action is None:
            return "", "", ""
        kind = verdict(self_score, reward)
        return (self_score_value(self.app, self_score, kind, self._outside(side, self_score)),
                judged_value(self.app, reward, kind), mark_text(self.app, kind))

    def _fill_table(self) -> None:
        table = self.query_one("#cmp-table", DataTable)
        table.clear()
        for row in self.rows:
            first = row.index == self.divergence
            style = DIVERGENCE_STYLE if first else ""

            def cell(value: str, base: str = "") -> Text:
                return Text(value, style=style or base)

            mark = "" if row.equal else ("◆" if first else "≠")
            table.add_row(
                cell(str(row.index + 1)),
                cell(row.action_a if row.action_a is not None else "—"),
                *self._judged(0, row.action_a, row.self_a, row.reward_a),
                cell(row.action_b if row.action_b is not None else "—"),
                *self._judged(1, row.action_b, row.self_b, row.reward_b),
                cell(mark, "yellow"),
                key=f"s{row.index}")
        scores = [e.score if e else None for e in self.episodes]
        table.add_row(Text("end", style="bold"), Text("final score", style="dim"), "",
                      Text(fmt(scores[0]), style="bold"), "", Text("final score", style="dim"), "",
                      Text(fmt(scores[1]), style="bold"), "", "", key=END_KEY)

    def _draw_curves(self) -> None:
        curves = []
        for name, episode, steps in zip("AB", self.episodes, self.steps):
            if episode is None:
                continue
            ys = cumulative_rewards(steps)
            points = ((0, 0.0),) + tuple((i + 1, y) for i, y in enumerate(ys))
            curves.append(Curve(f"{name}: {episode.pathway}", points))
        self._curves = curves
        plot = self.query_one(CurvePlot)
        plot.show(curves, empty_text="no steps")
        plot.border_subtitle = plot.legend_line()

    # ----- stepping -----------------------------------------------------------------------
    @property
    def last_position(self) -> int:
        return len(self.rows)

    def go(self, position: int) -> None:
        """Show aligned step `position` on both sides (clamped to 0..end)."""
        self.position = max(0, min(position, self.last_position))
        table = self.query_one("#cmp-table", DataTable)
        if table.row_count and table.cursor_row != self.position:
            table.move_cursor(row=self.position, animate=False)
        self._render_sides()

    def action_next(self) -> None:
        self.go(self.position + 1)

    def action_previous(self) -> None:
        self.go(self.position - 1)

    def action_first(self) -> None:
        self.go(0)

    def action_last(self) -> None:
        self.go(self.last_position)

    def action_divergence(self) -> None:
        if self.divergence is None:
            self.notify("The two episodes took exactly the same actions: no divergence.")
            return
        self.go(self.divergence)

    @on(DataTable.RowHighlighted, "#cmp-table")
    def _row_highlighted(self, event: DataTable.RowHighlighted) -> None:
        if event.cursor_row != self.position:
            self.position = event.cursor_row
            self._render_sides()

    # ----- rendering ----------------------------------------------------------------------
    def _render_status(self) -> None:
        text = Text()
        k = self.position
        text.append("end of both episodes" if k >= self.last_position else f"step {k + 1} of {len(self.rows)}",
                    style="bold")
        if self.divergence is None:
            text.append("   identical actions throughout", style="green")
        else:
            text.append(f"   first divergence at step {self.divergence + 1}", style=DIVERGENCE_STYLE)
            if k == self.divergence:
                text.append("  ◀ here", style=DIVERGENCE_STYLE)
        scores = [e.score if e else None for e in self.episodes]
        text.append(f"   final A {fmt(scores[0])} · B {fmt(scores[1])}")
        self.query_one("#cmp-status", Static).update(text)

    def _render_sides(self) -> None:
        self._render_status()
        k = self.position
        cites = [cited(steps[k].reply) if k < len(steps) else cited(None) for steps in self.steps]
        for side_no, (name, episode, steps, widget_id) in enumerate(zip("AB", self.episodes, self.steps,
                                                                        ("#cmp-a", "#cmp-b"))):
            side = self.query_one(widget_id, CompareSide)
            if episode is None:
                side.border_title = f"{name}: missing"
                side.show(None, "episode not found", Text(""), "Context", Text(""))
                continue
            side.border_title = safe_text(f"{name} · {side_label(episode)} · score {fmt(episode.score)}", one_line=True)
            side.border_subtitle = safe_text(episode.id, one_line=True)
            try:
                game = state_at(episode, steps, k)
            except Exception as exc:  # noqa: BLE001
                game = None
                self.notify(f"Cannot rebuild board {name}: {exc}", severity="error")
            step_text = Text()
            if k < len(steps):
                step = steps[k]
                caption = f"before step {k + 1}"
                step_text.append(f"Step {k + 1}: ", style="bold")
                step_text.append(safe(step.action, one_line=True, max_chars=2000),  # gated: a Text drops BEL
                                 style=DIVERGENCE_STYLE if k == self.divergence else "bold")
                kind = verdict(step.self_score, step.reward)
                note = range_note(episode.game, episode.mode, step.self_score)
                step_text.append("   self ")
                step_text.append_text(self_score_value(self.app, step.self_score, kind, note is not None))
                step_text.append("  reward ")
                step_text.append_text(judged_value(self.app, step.reward, kind))
                step_text.append("  ")
                step_text.append_text(judgement_text(self.app, step.self_score, step.reward))
                if note is not None:
                    step_text.append("  ")
                    step_text.append_text(range_note_text(self.app, note))
                if step.actor != "model":
                    step_text.append(f"  ({step.actor})", style="magenta")
                marks = self._marks(episode.id).get(step.index, [])
                if marks:
                    step_text.append("  [" + ", ".join(safe(a.label, one_line=True) for a in marks) + "]",
                                     style="yellow")
            else:
                caption = f"final · after {len(steps)} steps"
                step_text.append(f"Episode over after {len(steps)} steps: score {fmt(episode.score)}",
                                 style="bold")
            own, other = cites[side_no], cites[1 - side_no]
            ctx = context_at(self.app.store, episode, min(k, max(len(steps) - 1, 0)), CONTEXT_CHARS, steps,
                             focus=own)
            if ctx.kind == "history":
                title = "Context: raw history (Hint Messages)"
            elif ctx.kind == "summary":
                title = "Context: summary tips (Hint Messages)"
            else:
                title = "Context: no Hint Messages"
            body = Text()
            if ctx.note:
                body.append(ctx.note + "\n", style="dim italic")
            lead = body.plain.count("\n")  # the context's first line in the panel
            body.append(ctx.text or "(nothing: the agent had no cross-episode experience)")
            found = find(ctx.text, own) if ctx.text else None
            missing = lacking(ctx.text, other) if ctx.kind == "summary" else []
            step_text.append_text(self._lacking(missing, "AB"[1 - side_no]))
            reply, reply_line = self._reply(steps[k].reply if k < len(steps) else None, own, found)
            side.show(game, caption, step_text, title, body, reply,
                      highlight=[lead + i for i in (found.lines if found else ())], reply_line=reply_line)
        self._draw_marker()

    def _reply(self, reply: Optional[str], own, found) -> tuple[Optional[Text], Optional[int]]:
        """The step's reply with its citations highlighted (and the cited steps the excerpt does not
        show), with the line of its first citation (scrolled to)."""
        if reply is None:
            return None, None
        text = Text(reply.strip("\n"))
        for start, end in own.spans:
            text.stylize(CITED_STYLE, start, end)
        first = own.spans[0][0] if own.spans else None
        line = text.plain.count("\n", 0, first) if first is not None else None
        for what in (found.absent if found else ())[:MAX_ABSENT]:
            text.append(f"\n({what} is not in the context shown)", style="dim italic")
        return text, line

    @staticmethod
    def _lacking(missing, other_name: str) -> Text:
        """Under a summary side's step: the rules the other side cited that this summary does not state."""
        text = Text()
        for gap in missing[:MAX_LACKING]:
            text.append(f"\n✗ not in this summary: {other_name}'s rule {gap.rule}", style="bold yellow")
            if gap.near:
                text.append(" (only other options for that situation)", style="yellow")
        if len(missing) > MAX_LACKING:
            text.append(f" (and {len(missing) - MAX_LACKING} more of {other_name}'s rules)", style="yellow")
        return text

    def _draw_marker(self) -> None:
        plot = self.query_one(CurvePlot)
        plot.show(getattr(self, "_curves", []), empty_text="no steps",
                  vline=min(self.position + 1, self.last_position) if self.rows else None)
        plot.border_subtitle = plot.legend_line()  # the legend off the data
