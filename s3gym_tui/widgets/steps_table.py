"""Per-step table: action, self-judged score next to the verifier reward, coloured by the step's
verdict (engine.judging.verdict) with its mark beside them; a self-score out of the game's step range
(engine.judging.out_of_range) carries the out-of-range mark, and the legend says what it means."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional, Sequence

from rich.segment import Segment
from rich.style import Style
from rich.text import Text
from textual import events
from textual.binding import Binding
from textual.geometry import Region, Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from s3gym_tui.engine.glossary import OUT_OF_RANGE_MARK, VERDICT_LABELS, VERDICT_MARKS
from s3gym_tui.engine.judging import verdict
from s3gym_games.prompt import format_score
from s3gym_tui.models import Step
from s3gym_tui.textgate import safe
from s3gym_tui.widgets.scrollbars import QuietScrollBar
from s3gym_tui.widgets.signals import follow, release
from s3gym_tui.widgets.text_view import set_virtual_size
from s3gym_tui.widgets.verdicts import legend, outside, verdict_colours

ACTOR_LABELS = {"model": "model", "human": "human", "human-edit": "edit"}
START_LABEL = "start"


def one_line(text: str) -> str:
    """Stored text as one line of single spaces, through the gate before it becomes a Rich Text (a
    Text drops BEL, backspace, VT and FF without a trace; the gate shows them: ␇ ␈ ␋ ␌)."""
    return " ".join(safe(text, one_line=True, max_chars=2000).split())


def clip(text: str, width: int) -> str:
    """One line of `width` cells at most, through the gate (every cell is drawn through here)."""
    text = safe(" ".join(str(text).split()), one_line=True, max_chars=max(width, 0) + 1)
    if width <= 0:
        return ""
    return text if len(text) <= width else text[: width - 1] + "…"


@dataclass(frozen=True)
class Column:
    key: str
    label: str
    width: int  # 0: takes the room left
    right: bool = False


S_WIDTH = 5  # the self-score column
BASE_COLUMNS = (Column("index", "#", 3, True), Column("s", "s", S_WIDTH, True), Column("r", "r", 5, True),
                Column("mark", "", 1), Column("verdict", "judged", 6), Column("action", "action", 0),
                Column("actor", "by", 5))
ORIGINAL = Column("original", "original", 16)
JUDGED_KEYS = ("s", "r", "verdict")  # the cells drawn in the verdict's colour
FIGURE_KEYS = ("index", "s", "r")  # figures: their columns widen to the widest one, the action gives way


def figures(step: Step) -> dict[str, str]:
    """The figures of a step's row as drawn."""
    return {"index": str(step.index), "s": format_score(step.self_score), "r": f"{step.reward:g}"}


class StepsTable(ScrollView, can_focus=True):
    """Row 0 is the start of the episode (the board before any step), row i + 1 is step i. With
    `original` steps (a fork's source), an extra column shows the source's action at the same index,
    so where the fork diverged is visible.

    A Line API widget: only the rows on screen are drawn, each row is cached, and moving the cursor
    or adding a step repaints just the rows that changed (a DataTable repaints and re-measures the
    whole table, which cost most of a step's time). The cursor moves with the keys, the wheel and the
    mouse; a move made by the person posts CursorMoved, a move made by the program does not."""

    SCROLLBAR_CLASS = QuietScrollBar
    BINDINGS = [
        Binding("up", "cursor(-1)", "Up", show=False),
        Binding("down", "cursor(1)", "Down", show=False),
        Binding("pageup", "page(-1)", "Page up", show=False),
        Binding("pagedown", "page(1)", "Page down", show=False),
    ]
    COMPONENT_CLASSES = {"steps-table--header", "steps-table--cursor", "steps-table--odd"}
    DEFAULT_CSS = """
    StepsTable { overflow-x: hidden; overflow-y: scroll; scrollbar-size-vertical: 1; }  /* always there: no relayout */
    StepsTable > .steps-table--header { text-style: bold; color: $text-primary; }
    StepsTable > .steps-table--odd { background: $foreground 4%; }
    StepsTable > .steps-table--cursor { background: $block-cursor-blurred-background; }
    StepsTable:focus > .steps-table--cursor { background: $block-cursor-background;
                                              color: $block-cursor-foreground; }
    """

    @dataclass
    class CursorMoved(Message):
        """The person moved the cursor to `row` (0 = start, i + 1 = step i)."""

        table: "StepsTable"
        row: int

        @property
        def control(self) -> "StepsTable":
            return self.table

    def __init__(self, *, id: Optional[str] = None, classes: Optional[str] = None) -> None:
        super().__init__(id=id, classes=classes)
        self._steps: list[Step] = []
        self._original: Optional[list[Step]] = None
        self.cursor_row = 0
        self._cache: dict[tuple, Strip] = {}
        self._cache_width = -1
        self._game: Optional[str] = None  # the episode's game and mode: the range its self-scores are checked against
        self._mode: Optional[str] = None
        self._outside = False  # some step's self-score is out of range: the legend says what the mark means
        self._figure_widths: dict[str, int] = {}  # the widest figure of each figure column so far

    def on_mount(self) -> None:
        self.border_title = "Steps: self-judged s vs verifier r"
        self._show_legend()
        follow(self, self.app.theme_changed_signal, lambda _theme: self._on_theme())
        self._update_virtual_size()

    def _on_theme(self) -> None:
        self._show_legend()
        self._repaint_all()

    def _out_of_range(self, step: Step) -> bool:
        return outside(self._game, self._mode, step.self_score)

    def _show_legend(self) -> None:
        if self.is_mounted:
            self.border_subtitle = legend(self.app, [(self._game, self._mode)] if self._outside else ())

    def on_unmount(self) -> None:
        release(self)  # a signal subscription would keep this widget alive

    # ----- public API -------------------------------------------------------------------
    @property
    def steps(self) -> list[Step]:
        return list(self._steps)

    @property
    def step_count(self) -> int:
        return len(self._steps)

    @property
    def row_count(self) -> int:
        """Rows including the start row."""
        return len(self._steps) + 1

    def set_steps(self, steps: Sequence[Step], original: Optional[Sequence[Step]] = None,
                  game: Optional[str] = None, mode: Optional[str] = None) -> None:
        """The episode's steps; with its `game` and `mode`, self-scores out of range are marked."""
        self._steps = list(steps)
        self._original = list(original) if original is not None else None
        self._game, self._mode = (game, mode) if game is not None and mode is not None else (None, None)
        self._outside = any(self._out_of_range(s) for s in self._steps)
        self._show_legend()
        self.cursor_row = min(self.cursor_row, len(self._steps))
        self._figure_widths = {}
        self._fit_figures(self._steps)
        self._repaint_all()
        self._update_virtual_size()

    def append_step(self, step: Step, follow: bool = True) -> None:
        """Add a row; with `follow` the cursor moves to it (repainting only the rows involved, or
        the view when it has to scroll to keep the new row in sight)."""
        self._steps.append(step)
        if not self._outside and self._out_of_range(step):
            self._outside = True
            self._show_legend()
        self._update_virtual_size()
        if self._fit_figures([step]):  # a wider figure: every row's columns move
            self._repaint_all()
        if follow:
            self.move_cursor(len(self._steps))
        else:
            self._refresh_row(len(self._steps))

    def move_cursor(self, row: int, scroll: bool = True) -> None:
        """Put the cursor on `row` (clamped) without posting CursorMoved."""
        row = max(0, min(int(row), len(self._steps)))
        old, self.cursor_row = self.cursor_row, row
        if old != row:
            self._refresh_row(old)
            self._refresh_row(row)
        if scroll:
            self._scroll_to_cursor()

    def select_index(self, step_index: int) -> None:
        """Put the cursor on step `step_index` (row step_index + 1)."""
        self.move_cursor(step_index + 1)

    def cell_text(self, row: int, key: str) -> Text:
        """The text of one cell (row 0 = start), as drawn."""
        return self._cells(row)[key]

    # ----- keys and mouse ----------------------------------------------------------------
    def _user_move(self, row: int) -> None:
        row = max(0, min(row, len(self._steps)))
        if row != self.cursor_row:
            self.move_cursor(row)
            self.post_message(self.CursorMoved(self, row))

    def action_cursor(self, delta: int) -> None:
        self._user_move(self.cursor_row + delta)

    def action_page(self, direction: int) -> None:
        self._user_move(self.cursor_row + direction * max(1, self._body_height() - 1))

    def _on_click(self, event: events.Click) -> None:
        y = event.y - self.gutter.top
        if y >= 1:
            self._user_move(int(self.scroll_offset.y) + y - 1)

    # ----- geometry ----------------------------------------------------------------------
    def _body_height(self) -> int:
        return max(1, self.scrollable_content_region.height - 1)

    def _update_virtual_size(self) -> None:
        set_virtual_size(self, Size(self.scrollable_content_region.width, len(self._steps) + 2))

    def _scroll_to_cursor(self) -> None:
        top = int(self.scroll_offset.y)
        body = self._body_height()
        if self.cursor_row < top:
            self.scroll_to(y=self.cursor_row, animate=False)
        elif self.cursor_row >= top + body:
            self.scroll_to(y=self.cursor_row - body + 1, animate=False)

    def _refresh_row(self, row: int) -> None:
        y = row - int(self.scroll_offset.y) + 1
        if 1 <= y <= self._body_height():
            self.refresh(Region(0, y, self.size.width, 1))

    def _repaint_all(self) -> None:
        self._cache.clear()
        self.refresh()

    def laid_out(self, previous: Size) -> None:
        # Called as a layout places the table, before that layout's frame (textual_patches; a Resize
        # handler would run after it, and its scrollbar update would cost a second frame). A new
        # size repaints the view anyway and render_line drops the row cache when the width changed:
        # only the scrollable size needs updating here.
        if self.is_mounted:
            self._update_virtual_size()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._cache.clear()

    # ----- drawing -----------------------------------------------------------------------
    def _fit_figures(self, steps: Sequence[Step]) -> bool:
        """Widen the figure columns to the widest figure of `steps`; True when one widened."""
        widened = False
        for step in steps:
            for key, text in self._figures(step).items():
                if len(text) > self._figure_widths.get(key, 0):
                    self._figure_widths[key] = len(text)
                    widened = True
        return widened

    def _columns(self, width: int) -> list[tuple[Column, int]]:
        """The columns that fit: in a narrow table `judged` (the mark and the colours tell it), then
        `by`, then `original` give their room to the action; the mark is always there. A figure column
        is as wide as its widest figure (a chess reward 0.166667): the action gives way, a figure is
        never cut."""
        columns = [Column(c.key, c.label, max(c.width, self._figure_widths.get(c.key, 0)), c.right)
                   if c.key in FIGURE_KEYS else c
                   for c in list(BASE_COLUMNS) + ([ORIGINAL] if self._original is not None else [])]
        for optional in ("verdict", "actor", "original"):
            fixed = sum(c.width + 1 for c in columns if c.width)
            if width - fixed - 1 >= 15:
                break
            columns = [c for c in columns if c.key != optional]
        fixed = sum(c.width + 1 for c in columns if c.width)
        rest = max(6, width - fixed - 1)
        return [(c, c.width or rest) for c in columns]

    def _cells(self, row: int) -> dict[str, Text]:
        if row == 0:
            cells = {"index": Text("", style="dim"), "s": Text("", style="dim"), "r": Text("", style="dim"),
                     "mark": Text(""), "verdict": Text("", style="dim"), "action": Text(f"({START_LABEL})", style="dim italic"),
                     "actor": Text("", style="dim")}
            if self._original is not None:
                cells["original"] = Text("")
            return cells
        step = self._steps[row - 1]
        colours = verdict_colours(self.app)
        kind = verdict(step.self_score, step.reward)
        style = colours[kind]
        action = Text(one_line(step.action) + ("" if step.valid else " ✗"), style="" if step.valid else "italic")
        shown = self._figures(step)
        outside = self._out_of_range(step)  # bold, with the mark after the (whole) number
        cells = {"index": Text(shown["index"]), "s": Text(shown["s"], style=f"bold {style}" if outside else style),
                 "r": Text(shown["r"], style=style), "mark": Text(VERDICT_MARKS[kind], style=f"bold {style}"),
                 "verdict": Text(VERDICT_LABELS[kind], style=f"bold {style}"), "action": action,
                 "actor": Text(ACTOR_LABELS.get(step.actor, step.actor))}
        if self._original is not None:
            if step.index < len(self._original):
                theirs = self._original[step.index].action
                same = theirs == step.action
                cells["original"] = Text(("= " if same else "≠ ") + one_line(theirs), style="dim" if same else "bold")
            else:
                cells["original"] = Text("–", style="dim")
        return cells

    def _figures(self, step: Step) -> dict[str, str]:
        """The row's figures as drawn: s carries the mark when it is out of the game's step range."""
        shown = figures(step)
        if self._out_of_range(step):
            shown["s"] += OUT_OF_RANGE_MARK
        return shown

    def _line(self, cells: dict[str, Text], width: int, base: Style, cursor: bool = False) -> Strip:
        """One row: each cell in its own style over the row's (plain, odd or cursor) style.

        A cell is one Text with one style (no spans), applied here. Text.render ignores a Text's own
        style (rich's console first turns it into a span, in Text.__rich_console__), so rendering
        the cells with it drew every s, r and verdict in the row's plain colour.

        On the cursor row the verdict colours would be unreadable on the cursor's background (dark
        red on blue in the light theme): s, r and the words take the cursor's colours and the mark
        is drawn as a chip, the cursor's background on the verdict's colour."""
        console = self.app.console
        segments: list[Segment] = [Segment(" ", base)]
        for column, w in self._columns(width):
            text = cells.get(column.key, Text(""))
            plain = clip(text.plain, w)
            own = console.get_style(text.style, default=Style.null()) if text.style else Style.null()
            if cursor and column.key in JUDGED_KEYS:
                own = Style(bold=True)
            elif cursor and column.key == "mark" and own.color is not None:
                own = Style(bold=True, color=base.bgcolor, bgcolor=own.color)
            pad = " " * (w - len(plain))
            if column.right:
                segments.append(Segment(pad, base))
            segments.append(Segment(plain, base + own))
            if not column.right:
                segments.append(Segment(pad, base))
            segments.append(Segment(" ", base))
        return Strip(segments).crop_extend(0, width, base)

    def render_line(self, y: int) -> Strip:
        width = self.scrollable_content_region.width
        if width != self._cache_width:
            self._cache.clear()
            self._cache_width = width
        if y == 0:
            key = ("header",)
            strip = self._cache.get(key)
            if strip is None:
                base = self.get_component_rich_style("steps-table--header")
                strip = self._line({col.key: Text(col.label) for col, _ in self._columns(width)}, width, base)
                self._cache[key] = strip
            return strip
        row = int(self.scroll_offset.y) + y - 1
        if row > len(self._steps):
            return Strip.blank(width, self.rich_style)
        key = (row, row == self.cursor_row, self.has_focus)
        strip = self._cache.get(key)
        if strip is None:
            if row == self.cursor_row:
                base = self.get_component_rich_style("steps-table--cursor")
            elif row % 2:
                base = self.get_component_rich_style("steps-table--odd")
            else:
                base = self.rich_style
            strip = self._line(self._cells(row), width, base, cursor=row == self.cursor_row)
            self._cache[key] = strip
        return strip

    def _on_focus(self, event: events.Focus) -> None:
        self._refresh_row(self.cursor_row)

    def _on_blur(self, event: events.Blur) -> None:
        self._refresh_row(self.cursor_row)
