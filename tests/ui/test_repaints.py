"""Repaints that change nothing are not made, and the ones made draw what Textual would draw.

- A scrollbar is repainted only when its cells change (widgets/scrollbars.py), and its cells are
  those of Textual's own scrollbar in the same state.
- A border title or subtitle change repaints the border line only (LinesView.set_border).
- A layout that makes a scrollbar appear is settled before its frame, and a widget that asks for a
  layout on every size still gets its frame (widgets/textual_patches.py, patches 1 and 2)."""

from __future__ import annotations

from rich.text import Text
from textual.app import App, ComposeResult
from textual.containers import VerticalScroll
from textual.screen import Screen
from textual.scrollbar import ScrollBar
from textual.widget import Widget
from textual.widgets import Static

from benchmarks._screen import ScreenCells
from s3gym_tui.widgets.scrollbars import QuietScrollBar
from s3gym_tui.widgets.textual_patches import SETTLE_PASSES
from s3gym_tui.widgets.text_view import TextView

from tests.ui.frames import record_frames
from tests.ui.settle import settle


class PlainTextView(TextView):
    """A TextView with Textual's own scrollbars, to compare with."""
    SCROLLBAR_CLASS = ScrollBar


def _text(n: int) -> list[Text]:
    return [Text(f"line {i}") for i in range(n)]


class ViewApp(App):
    CSS = "TextView { height: 10; width: 30; border: round white; }"

    def __init__(self, view_class=TextView) -> None:
        super().__init__()
        self.view_class = view_class

    def compose(self) -> ComposeResult:
        yield self.view_class(id="v")

    def on_mount(self) -> None:
        self.query_one("#v").show(_text(200))


def _cells(app, frames: list) -> ScreenCells:
    cells = ScreenCells(app.console)
    for _, update in frames:
        cells.apply(update)
    return cells


def _count_calls(obj, name: str) -> list:
    calls: list = []
    original = getattr(obj, name)

    def counted(*args, **kwargs):
        calls.append(args)
        return original(*args, **kwargs)

    setattr(obj, name, counted)
    return calls


def _bar_cells(app, cells: ScreenCells) -> dict:
    region = app.query_one("#v").vertical_scrollbar.region
    return {(x - region.x, y - region.y): cells.cells.get((x, y))
            for y in range(region.y, region.bottom) for x in range(region.x, region.right)}


async def test_a_scrollbar_whose_cells_do_not_change_is_not_repainted_and_one_that_moves_is():
    app = ViewApp()
    async with app.run_test(size=(40, 14)) as pilot:
        frames = record_frames(app)
        await settle(pilot)
        view = app.query_one("#v", TextView)
        bar = view.vertical_scrollbar
        assert isinstance(bar, QuietScrollBar) and bar.display
        drawn = _count_calls(bar, "render_line")
        view.show(_text(201))  # a one-row thumb over 201 lines: the same cells as over 200
        await settle(pilot)
        assert not drawn, f"{len(drawn)} lines of an unchanged scrollbar were drawn again"
        before = _bar_cells(app, _cells(app, frames))
        view.scroll_to(y=100, animate=False)
        await settle(pilot)
        assert drawn, "the scrollbar was not drawn again when its thumb moved"
        assert _bar_cells(app, _cells(app, frames)) != before


async def test_the_quiet_scrollbar_draws_the_cells_of_textuals_scrollbar():
    shown = []
    for view_class in (TextView, PlainTextView):
        app = ViewApp(view_class)
        async with app.run_test(size=(40, 14)) as pilot:
            frames = record_frames(app)
            await settle(pilot)
            view = app.query_one("#v")
            assert isinstance(view.vertical_scrollbar, QuietScrollBar) == (view_class is TextView)
            view.show(_text(260))
            view.scroll_to(y=37, animate=False)
            await settle(pilot)
            still = _bar_cells(app, _cells(app, frames))
            view.vertical_scrollbar.mouse_over = True  # the hover colours
            await settle(pilot)
            shown.append((still, _bar_cells(app, _cells(app, frames))))
    (quiet_still, quiet_hover), (plain_still, plain_hover) = shown
    assert quiet_still == plain_still
    assert quiet_hover == plain_hover
    assert quiet_hover != quiet_still


async def test_a_border_text_change_repaints_only_its_line():
    app = ViewApp()
    async with app.run_test(size=(40, 14)) as pilot:
        frames = record_frames(app)
        await settle(pilot)
        view = app.query_one("#v", TextView)
        region = view.region
        lines = _count_calls(view._styles_cache, "render_line")

        def row(y: int) -> str:
            cells = _cells(app, frames)
            return "".join(cells.cells[(x, y)][0] for x in range(region.x, region.right))

        view.set_border(subtitle="step 2")
        await settle(pilot)
        assert "step 2" in row(region.bottom - 1)
        assert len(lines) == 1, f"{len(lines)} lines drawn for a subtitle"
        lines.clear()
        view.set_border(title="Prompt", subtitle="step 2")  # the subtitle is the same: only the title
        await settle(pilot)
        assert "Prompt" in row(region.y) and len(lines) == 1
        lines.clear()
        view.border_subtitle = "step 3"  # Textual's way: the whole widget
        await settle(pilot)
        assert len(lines) == region.height


class BarScreen(Screen):
    DEFAULT_CSS = "BarScreen #box { height: 8; }"

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="box"):
            yield Static("\n".join(f"row {i}" for i in range(30)))


class Restless(Widget):
    """Asks for a layout every time it is given a size (its first 20 sizes)."""
    sized = 0

    def _size_updated(self, size, virtual_size, container_size, layout=True):
        Restless.sized += 1
        if Restless.sized <= 20:
            self.refresh(layout=True)
        return super()._size_updated(size, virtual_size, container_size, layout)

    def render(self) -> str:
        return "restless"


class RestlessScreen(Screen):
    def compose(self) -> ComposeResult:
        yield Restless()


class ScreensApp(App):
    def on_mount(self) -> None:
        self.push_screen(Screen())


async def test_a_scrollbar_a_layout_makes_appear_is_in_that_layouts_frame():
    app = ScreensApp()
    async with app.run_test(size=(40, 14)) as pilot:
        await settle(pilot)
        frames = record_frames(app)
        screen = BarScreen()
        app.push_screen(screen)
        await settle(pilot)
        drawn = [update for shown, update in frames if shown is screen]
        cells = ScreenCells(app.console)
        cells.apply(drawn[0])
        first = dict(cells.cells)
        for update in drawn[1:]:
            cells.apply(update)
        bar = screen.query_one("#box").vertical_scrollbar
        assert bar.display
        column = [(bar.region.x, y) for y in range(bar.region.y, bar.region.bottom)]
        assert [first.get(xy) for xy in column] == [cells.cells.get(xy) for xy in column], \
            "the scrollbar came in a later frame"


async def test_a_widget_asking_for_a_layout_on_every_size_still_gets_its_frame(monkeypatch):
    per_layout: list[int] = []  # sizes given to the widget in each layout (its passes included)
    depth = [0]
    original = Screen._refresh_layout

    def counted(self, size=None, scroll=False):
        top, before = not depth[0], Restless.sized
        depth[0] += 1
        try:
            return original(self, size, scroll)
        finally:
            depth[0] -= 1
            if top and isinstance(self, RestlessScreen):
                per_layout.append(Restless.sized - before)

    monkeypatch.setattr(Screen, "_refresh_layout", counted)
    app = ScreensApp()
    async with app.run_test(size=(40, 14)) as pilot:
        await settle(pilot)
        Restless.sized = 0
        screen = RestlessScreen()
        app.push_screen(screen)
        for _ in range(30):
            await pilot.pause()
        assert "restless" in "".join(strip.text for strip in screen._compositor.render_strips())
        assert max(per_layout) == 1 + SETTLE_PASSES  # settled twice, then drawn
        assert Restless.sized > 20  # the requests it still made were laid out after the frame
