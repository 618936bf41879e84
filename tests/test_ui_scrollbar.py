"""The line-by-line scrollbar (ui/widgets/scrollbar.py): Textual's cells, fewer rows
repainted."""

from __future__ import annotations

import asyncio

from textual.app import App, ComposeResult
from textual.containers import Horizontal
from textual.geometry import Region, Size
from textual.scroll_view import ScrollView
from textual.scrollbar import ScrollBar

from slop_tui.ui.widgets.conversation import ConversationView
from slop_tui.ui.widgets.groups import GroupList
from slop_tui.ui.widgets.scrollbar import LineScrollBar, LineScrollBars


class Plain(ScrollView):
    DEFAULT_CSS = "Plain { width: 1fr; height: 1fr; }"


class Lined(LineScrollBars, Plain):
    pass


class TwoBars(App[None]):
    CSS = "Lined { scrollbar-size-vertical: 2; } Plain.wide { scrollbar-size-vertical: 2; }"

    def compose(self) -> ComposeResult:
        with Horizontal():
            yield Plain()
            yield Lined()


def cells(bar: ScrollBar) -> list[list[tuple[str, object]]]:
    """The bar's rows as its next frame draws them: (text, style) per segment."""
    width, height = bar.size
    strips = bar.render_lines(Region(0, 0, width, height))
    return [[(s.text, s.style) for s in strip] for strip in strips]


def test_the_panes_that_scroll_at_every_key_take_the_line_scrollbar() -> None:
    assert issubclass(ConversationView, LineScrollBars)
    assert issubclass(GroupList, LineScrollBars)


def test_same_cells_as_textuals_bar_for_positions_sizes_and_hover() -> None:
    async def run() -> None:
        app = TwoBars()
        async with app.run_test(size=(60, 30)) as pilot:
            plain, lined = app.query_one(Plain), app.query_one(Lined)
            plain.styles.scrollbar_size_vertical = 2
            checked = 0
            for height in (7, 20, 29):
                for virtual in (height + 1, 3 * height, 500, 20_000):
                    for view in (plain, lined):
                        view.styles.height = height
                        view.virtual_size = Size(20, virtual)
                    await pilot.pause()
                    top = max(0, virtual - height)
                    for y in sorted({0, 1, top // 3, top // 2, top - 1, top}):
                        for view in (plain, lined):
                            view.scroll_to(y=y, animate=False, immediate=True)
                        await pilot.pause()
                        a, b = plain.vertical_scrollbar, lined.vertical_scrollbar
                        assert isinstance(b, LineScrollBar)
                        assert a.size == b.size and a.size.height == height
                        assert b.position == a.position
                        for over in (False, True):
                            a.mouse_over = b.mouse_over = over
                            assert cells(b) == cells(a), (height, virtual, y, over)
                            checked += 1
                        a.mouse_over = b.mouse_over = False
            assert checked > 60

    asyncio.run(run())


def test_a_scroll_repaints_only_the_rows_that_change() -> None:
    async def run() -> None:
        app = TwoBars()
        async with app.run_test(size=(60, 30)) as pilot:
            plain, lined = app.query_one(Plain), app.query_one(Lined)
            for view in (plain, lined):
                view.virtual_size = Size(20, 4000)
            await pilot.pause()
            for view in (plain, lined):
                view.scroll_to(y=2000, animate=False, immediate=True)
            await pilot.pause()
            assert plain.scroll_y == lined.scroll_y == 2000
            for view in (plain, lined):  # both drawn: nothing pending
                view.vertical_scrollbar.render_lines(Region(0, 0, *view.vertical_scrollbar.size))
            before = {v: cells(v.vertical_scrollbar) for v in (plain, lined)}
            dirty = {}
            for view in (plain, lined):
                bar = view.vertical_scrollbar
                bar._styles_cache._dirty_lines.clear()
                view.scroll_to(y=1970, animate=False, immediate=True)
                dirty[view] = set(bar._styles_cache._dirty_lines)
            changed = {
                y
                for y, (old, new) in enumerate(
                    zip(before[lined], cells(lined.vertical_scrollbar), strict=True)
                )
                if old != new
            }
            assert changed  # the thumb moved
            assert dirty[plain] == set(range(plain.vertical_scrollbar.size.height))
            assert dirty[lined] == changed
            assert len(dirty[lined]) <= 3
            # And the frame after it shows the same bar as Textual's.
            await pilot.pause()
            assert cells(lined.vertical_scrollbar) == cells(plain.vertical_scrollbar)

    asyncio.run(run())
