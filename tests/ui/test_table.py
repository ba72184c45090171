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
