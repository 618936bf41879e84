"""A group's header and a tool's title take the plan's marks and tier labels (the side
panes' frame of a start, every plan after): a label that fits on the lines the text had
repaints it without arranging the conversation again; one that wraps onto another line
lays it out, so nothing below it is drawn over."""

from __future__ import annotations

import contextlib

from textual import widget as textual_widget
from textual.app import App
from textual.containers import Vertical

from slop_tui.ui.widgets.blocks import GroupBlock, ToolBlock


class Blocks(App):
    CSS = "Vertical { width: 40; height: auto; }"

    def compose(self):
        with Vertical(id="column"):
            block = GroupBlock(7, "a question")
            block.message_count = 2
            yield block


def counting_arrangements(monkeypatch) -> list[object]:
    """The containers arranged afresh (an arrangement not taken from the cache)."""
    arranged: list[object] = []
    real = textual_widget.arrange

    def arrange(widget, *args, **kwargs):
        arranged.append(widget)
        return real(widget, *args, **kwargs)

    monkeypatch.setattr(textual_widget, "arrange", arrange)
    return arranged


@contextlib.asynccontextmanager
async def group_block_shown():
    """The app with its group block laid out: (the pilot, the block)."""
    async with Blocks().run_test(size=(60, 12)) as pilot:
        await pilot.pause()
        yield pilot, pilot.app.query_one(GroupBlock)


async def test_a_mark_that_fits_its_header_repaints_it_without_a_layout(monkeypatch) -> None:
    arranged = counting_arrangements(monkeypatch)
    async with group_block_shown() as (pilot, block):
        app = pilot.app
        header = block.query_one(".group-header")
        assert header.size.height == 1
        arranged.clear()
        block.set_mark("● window")
        await pilot.pause()
        assert "● window" in str(header.render())
        assert block not in arranged and app.query_one("#column") not in arranged
        assert header.size.height == 1


async def test_a_label_that_wraps_lays_the_block_out_again(monkeypatch) -> None:
    arranged = counting_arrangements(monkeypatch)
    async with group_block_shown() as (pilot, block):
        tool = ToolBlock("read_file")
        tool.ok, tool.line_count = True, 3  # as a stored result sets them
        await block.mount(tool)
        tool.finish_without_result()
        await pilot.pause()
        title = tool.query_one("ToolTitle")
        assert title.size.height == 1 and "3 lines" in str(title.render())
        prompt_top = block.children[1].region.y
        arranged.clear()
        tool.set_tier("elided to its first and last lines")
        await pilot.pause()
        assert title.size.height == 2  # wrapped: laid out again, the block taller
        assert block in arranged
        assert block.children[1].region.y == prompt_top  # what is above it stays
        assert tool.region.height >= 2
