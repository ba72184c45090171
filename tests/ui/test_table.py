"""The app's DataTable keeps its render caches through a Resize to the size it is drawn at, and
is drawn right after a real resize."""

from __future__ import annotations

from textual.app import App, ComposeResult

from s3gym_tui.widgets.table import DataTable

from tests.ui.settle import settle


class TableApp(App):
    def compose(self) -> ComposeResult:
        yield DataTable(id="t")

    def on_mount(self) -> None:
        table = self.query_one(DataTable)
        table.add_columns("name", "value")
        for i in range(40):
            table.add_row(f"row {i}", str(i * i), key=str(i))


def _cells_rendered(table: DataTable, calls: list) -> None:
    original = table._render_cell

    def counting(*args, **kwargs):
        calls.append(args[:2])
        return original(*args, **kwargs)

    table._render_cell = counting


async def test_a_resize_to_the_drawn_size_keeps_the_cells_and_a_real_one_redraws():
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(pilot)
        table = app.query_one(DataTable)
        calls: list = []
        _cells_rendered(table, calls)
        count = table._update_count
        # the Resize a newly shown widget gets after its first frame: same size as drawn
        from textual import events

        table.post_message(events.Resize(table.outer_size, table.virtual_size, table.container_size))
        await settle(pilot)
        table.refresh()
        await settle(pilot)
        assert table._update_count == count  # the caches were kept ...
        assert calls == []  # ... so the repaint rendered no cell again

        await pilot.resize_terminal(90, 30)  # a real resize: drawn anew at the new size, rows right
        await settle(pilot)
        assert table.outer_size.width == 90
        lines = [table.render_line(y) for y in range(table.size.height)]
        assert {line.cell_length for line in lines} == {table.size.width}
        text = "\n".join(line.text for line in lines)
        assert "name" in text and "row 0" in text and "row 20" in text and "400" in text
        table.update_cell("3", table.ordered_columns[1].key, "new!")  # and a changed cell is drawn
        await settle(pilot)
        assert " row 3   new!" in [table.render_line(y).text[:13] for y in range(table.size.height)]


async def test_rows_added_after_the_first_frame_are_drawn_at_their_new_column_widths():
    """New rows widen their columns on idle (only the virtual size changes): the rows drawn before
    at the old widths must be drawn again, not kept from the cache."""
    app = TableApp()
    async with app.run_test(size=(60, 20)) as pilot:
        await settle(pilot)
        table = app.query_one(DataTable)
        table.add_row("a much longer name", "scripted/trust", key="long")  # the last row, off-screen
        [table.render_line(y) for y in range(table.size.height)]  # a frame drawn before the widths are measured
        await settle(pilot)
        lines = [table.render_line(y).text for y in range(table.size.height)]
        width = len("a much longer name")
        assert lines[0].startswith(" name" + " " * (width - len("name")) + "  value"), lines[0]
        assert lines[1].startswith(" row 0" + " " * (width - len("row 0")) + "  0"), lines[1]
