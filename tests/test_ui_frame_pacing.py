"""How soon and how much the screen is drawn: the frame timer's pacing, one layout per
size change, a scroll's repaint, page keys (slop_tui/ui/textual_fixes.py, echo.py)."""

from __future__ import annotations

import asyncio
import time
from contextlib import asynccontextmanager

import pytest
from rich.segment import Segment
from textual import _time
from textual._compositor import ChopsUpdate, LayoutUpdate
from textual._styles_cache import StylesCache
from textual.app import App
from textual.containers import VerticalScroll
from textual.geometry import Size
from textual.strip import Strip
from textual.timer import EventTargetGone, Timer
from textual.widget import Widget
from textual.widgets import Static

from slop_tui.events import TextChunk
from slop_tui.ui import textual_fixes
from slop_tui.ui.widgets import blocks, conversation
from slop_tui.ui.widgets.blocks import GroupBlock
from slop_tui.ui.widgets.conversation import ConversationView
from tests.fakeserver import wait_for
from tests.test_ui_conversation import LOADED, SIZE, ConvApp, bulk_groups, ws  # noqa: F401 -- fixture
from tests.test_ui_conversation_frames import first_words_streamed


@pytest.fixture(autouse=True)
def whole_slices(monkeypatch):
    """These tests page through a slice of `initial_blocks` groups: a load mounts all of
    them, not only those that fill two screens."""
    monkeypatch.setattr(conversation, "FILL_SCREENS", 100)


INTERVAL = 0.1


class ClockedTimer:
    """What `Timer._run` reads of a timer, on a clock that only moves when told."""

    def __init__(self, clock: list[float], slow_first_tick: float) -> None:
        self._repeat = None
        self._interval = INTERVAL
        self._skip = True
        self._reset = False
        self._active = asyncio.Event()
        self._active.set()
        self.clock = clock
        self.slow = slow_first_tick
        self.ticks: list[float] = []

    async def _tick(self, *, next_timer: float, count: int) -> None:
        self.ticks.append(self.clock[0])
        if len(self.ticks) == 1:
            self.clock[0] += self.slow  # the frame this tick drew took that long
        elif len(self.ticks) == 2:
            raise EventTargetGone()  # ends the timer's loop


def run_clocked(run, monkeypatch, slow: float) -> ClockedTimer:
    clock = [100.0]

    async def sleep(seconds: float) -> None:
        clock[0] += seconds

    monkeypatch.setattr(_time, "get_time", lambda: clock[0])
    monkeypatch.setattr(_time, "sleep", sleep)
    timer = ClockedTimer(clock, slow)
    asyncio.run(run(timer))
    return timer


def test_a_late_timer_ticks_at_the_next_point_of_its_grid(monkeypatch):
    textual_fixes.install()
    assert Timer._run is textual_fixes._run_on_the_next_tick
    # The first tick's work ran 2.5 intervals: the next tick is at the next point of
    # the grid, half an interval later, not one and a half.
    timer = run_clocked(textual_fixes._run_on_the_next_tick, monkeypatch, 2.5 * INTERVAL)
    first, second = timer.ticks
    waited = second - (first + 2.5 * INTERVAL)
    assert 0 < waited <= INTERVAL
    assert abs(waited - 0.5 * INTERVAL) < 1e-9
    # On time: every interval, as before.
    timer = run_clocked(textual_fixes._run_on_the_next_tick, monkeypatch, 0.0)
    assert abs(timer.ticks[1] - timer.ticks[0] - INTERVAL) < 1e-9


def count_reflows(app: App) -> list[int]:
    reflows: list[int] = []
    compositor = app.screen._compositor
    reflow = compositor.reflow

    def counting(*args, **kw):  # type: ignore[no-untyped-def]
        reflows.append(1)
        return reflow(*args, **kw)

    compositor.reflow = counting  # type: ignore[method-assign]
    return reflows


def on_each_frame(app: App, record) -> None:  # type: ignore[no-untyped-def]
    """Call `record(renderable)` for every frame the app writes (None: nothing)."""
    display = app._display

    def recording(screen, renderable) -> None:  # type: ignore[no-untyped-def]
        record(renderable)
        display(screen, renderable)

    app._display = recording  # type: ignore[method-assign]


def tops_in_each_frame(app: App, view: ConversationView, block: Widget) -> list[int | None]:
    """`block`'s top from the view's top in every frame the app writes from now on (None:
    not laid out)."""
    tops: list[int | None] = []
    on_each_frame(
        app,
        lambda frame: (
            frame is not None
            and tops.append(None if block not in view._tops else view._tops[block] - view.scroll_y)
        ),
    )
    return tops


async def loaded_and_focused(app: App, pilot, workspace) -> ConversationView:  # type: ignore[no-untyped-def]
    view = app.query_one(ConversationView)
    await view.load(workspace.history())
    view.focus()
    await pilot.pause(0.3)
    return view


async def test_a_growing_live_answer_lays_the_screen_out_once(ws) -> None:  # noqa: F811
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        answer = await first_words_streamed(pilot, view, ws)
        reflows = count_reflows(app)
        height = answer.outer_size.height
        # Past the room kept below the text: the answer, its group and the view grow.
        await view.show_event(TextChunk(text="\n\nline\n\n" * 100))
        await wait_for(pilot, lambda: answer.source.count("line") == 100)
        await pilot.pause(0.3)
        assert answer.outer_size.height > height
        assert len(reflows) == 1  # each size change asked for a second one before
        await view.end_turn()


def test_changed_lines_run_from_the_first_difference_to_the_longer_end() -> None:
    a, b, c = Strip([Segment("a")]), Strip([Segment("b")]), Strip([Segment("c")])
    assert blocks.changed_lines([a, b], [a, b]) is None
    assert blocks.changed_lines([a, b], [a, Strip([Segment("b")])]) is None  # equal lines
    assert blocks.changed_lines([a, b], [a, c]) == (1, 2)
    assert blocks.changed_lines([a, b], [a, b, c]) == (2, 3)  # a line added
    assert blocks.changed_lines([a, b, c], [a, c]) == (1, 3)  # shorter: the last line blanked
    assert blocks.changed_lines([], [a]) == (0, 1)


def screen_rows(app) -> list[str]:  # type: ignore[no-untyped-def]
    """The screen's text as the compositor draws it now, from the widgets' kept lines."""
    return ["".join(seg.text for seg in strip) for strip in app.screen._compositor.render_strips()]


async def test_a_streamed_update_repaints_only_the_lines_it_changed(ws) -> None:  # noqa: F811
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        answer = await first_words_streamed(pilot, view, ws)
        await view.show_event(TextChunk(text=" of a paragraph.\n\nAnd the open one:"))
        await wait_for(pilot, lambda: answer.source.endswith("open one:"))
        await pilot.pause(0.3)
        top = answer.content_region.y  # the first paragraph's line on screen
        rows: list[set[int]] = []

        def record(update) -> None:  # type: ignore[no-untyped-def]
            assert not isinstance(update, LayoutUpdate)  # no full frame
            if isinstance(update, ChopsUpdate):
                rows.append({y for y, _x1, _x2 in update.spans})

        on_each_frame(app, record)
        words = [f"word{i}" for i in range(40)]  # wraps over several lines
        for word in words:
            await view.show_event(TextChunk(text=f" {word}"))
            await wait_for(pilot, lambda word=word: answer.source.endswith(word))
            await pilot.pause(0.02)
        await pilot.pause(0.3)
        # Every update was drawn, and none painted the finished paragraph again.
        assert rows and all(top not in drawn for drawn in rows)
        # What the screen shows is the answer's text, every word in its place.
        region = answer.content_region
        shown = [row[region.x : region.right].rstrip() for row in screen_rows(app)]
        width = region.width
        expected = [strip.text.rstrip() for strip in answer.rendered(width)]
        assert shown[region.y : region.y + len(expected)] == expected
        text = " ".join(expected)
        assert "first words of a paragraph." in text
        assert " ".join(words) in " ".join(text.split())
        await view.end_turn()


async def test_a_page_key_jumps_at_once_and_repaints_only_the_pane(ws) -> None:  # noqa: F811
    await bulk_groups(ws, 30)
    app = ConvApp(initial_blocks=15)
    async with app.run_test(size=SIZE) as pilot:
        view = await loaded_and_focused(app, pilot, ws)
        assert view.max_scroll_y > 2 * view.scrollable_content_region.height
        updates: list[object] = []
        on_each_frame(app, updates.append)
        app.screen._refresh_layout()  # a full layout, as a streamed update makes one
        page = view.scrollable_content_region.height
        before = view.scroll_y
        del updates[:]
        await pilot.press("pageup")
        # A jump of a page (no animation under way), drawn in a frame of its own.
        assert view.scroll_y == before - page
        assert not app.animator.is_being_animated(view, "scroll_y")
        drawn = [u for u in updates if u is not None]
        assert drawn and isinstance(drawn[0], ChopsUpdate)
        # The lines that moved were drawn, not the whole screen over again (a scroll
        # right after a full layout was a full update before).
        assert not any(isinstance(u, LayoutUpdate) for u in drawn)
        region = view.region
        lines = {y for u in drawn if isinstance(u, ChopsUpdate) for y, _x1, _x2 in u.spans}
        assert set(range(region.y, region.bottom)) <= lines
        await pilot.press("pagedown")
        assert view.scroll_y == before


class PanedConvApp(ConvApp):
    """The conversation under a line of its own (as the workspace has panes beside it)."""

    CSS = "#banner { height: 1; }"

    def compose(self):  # type: ignore[no-untyped-def]
        yield Static("a pane beside the conversation", id="banner")
        yield from super().compose()


def off_screen_group(view: ConversationView) -> GroupBlock:
    top = round(view.scroll_y)
    bottom = top + view.scrollable_content_region.height
    return next(
        block
        for block, block_top in view._tops.items()
        if isinstance(block, GroupBlock)
        and (block_top + block.outer_size.height < top or block_top > bottom)
    )


async def test_a_page_key_after_a_block_off_screen_was_redrawn_repaints_only_the_pane(
    ws,  # noqa: F811
) -> None:
    """A block redrawn off screen (late syntax highlighting does it) makes Textual rebuild
    its map of every widget; that forgot what was on screen, and the next page key
    repainted the whole screen, the panes beside the conversation included."""
    await bulk_groups(ws, 40)
    app = PanedConvApp(initial_blocks=15)
    async with app.run_test(size=SIZE) as pilot:
        view = await loaded_and_focused(app, pilot, ws)
        banner = app.query_one("#banner")
        pane = set(range(view.region.y, view.region.bottom))
        updates: list[object] = []
        on_each_frame(app, updates.append)
        # After a full layout, and after a scroll: the two ways the map of what is on
        # screen is made.
        for before in ("layout", "scroll"):
            if before == "layout":
                app.screen._refresh_layout()
            else:
                await pilot.press("pageup")
            await wait_for(pilot, lambda: view.styler.timer is None)
            await pilot.pause()
            # A block off screen redrawn, then its place read (as re-rendering it does).
            block = off_screen_group(view)
            block.refresh()
            await pilot.pause()
            assert block.region.y not in pane
            del updates[:]
            top = view.scroll_y
            await pilot.press("pageup")
            assert view.scroll_y < top
            drawn = [u for u in updates if u is not None]
            assert drawn and not any(isinstance(u, LayoutUpdate) for u in drawn), before
            rows = {y for u in drawn if isinstance(u, ChopsUpdate) for y, _x1, _x2 in u.spans}
            assert rows <= pane and banner.region.y not in rows, before


async def test_a_block_off_screen_repainted_keeps_the_map_a_page_key_reads(
    ws,  # noqa: F811
    monkeypatch,
) -> None:
    """A widget already placed and repainted off screen (a reply streaming below the pane
    while the user reads above it) leaves Textual's map of every widget as it is: the
    next page key's frame does not rebuild it."""
    await bulk_groups(ws, 40)
    app = PanedConvApp(initial_blocks=15)
    async with app.run_test(size=SIZE) as pilot:
        view = await loaded_and_focused(app, pilot, ws)
        await pilot.press("pageup")
        await wait_for(pilot, lambda: view.styler.timer is None)  # the map rebuilt
        await pilot.pause()
        compositor = app.screen._compositor
        assert not compositor._full_map_invalidated
        rebuilt: list[int] = []
        full_map = textual_fixes._full_map

        def counting(self):  # type: ignore[no-untyped-def]
            rebuilt.append(1)
            return full_map.fget(self)

        monkeypatch.setattr(textual_fixes, "_full_map", property(counting))
        block = off_screen_group(view)
        block.refresh()  # a repaint, no layout
        await pilot.pause()
        assert not compositor._full_map_invalidated
        top = view.scroll_y
        await pilot.press("pageup")
        assert view.scroll_y < top
        assert not rebuilt


class WrapApp(App):
    """A wrapped paragraph over a view anchored to its bottom, under a hidden banner."""

    CSS = "#banner { display: none; } #banner.-shown { display: block; height: 3; }"

    def compose(self):
        yield Static("", id="banner")
        yield Static("short", id="para")
        with VerticalScroll(id="log"):
            for i in range(60):
                yield Static(f"line {i}")


async def test_a_widget_the_reflow_resizes_is_laid_out_once() -> None:
    textual_fixes.install()
    app = WrapApp()
    async with app.run_test(size=(40, 20)) as pilot:
        await pilot.pause(0.1)
        reflows = count_reflows(app)
        para = app.query_one("#para", Static)
        para.update("a paragraph long enough to wrap onto several lines of forty cells " * 2)
        await pilot.pause(0.3)
        assert para.size.height > 1  # the reflow gave it its new height...
        assert len(reflows) == 1  # ...and its size change asked for a second one before


async def test_an_anchored_view_made_shorter_stays_at_its_bottom() -> None:
    textual_fixes.install()
    app = WrapApp()
    async with app.run_test(size=(40, 20)) as pilot:
        log = app.query_one("#log", VerticalScroll)
        log.anchor()
        await pilot.pause(0.2)
        assert log.scroll_y == log.max_scroll_y > 0
        app.query_one("#banner").add_class("-shown")  # the view loses 3 rows
        await pilot.pause(0.3)
        # Textual's anchor reads the previous height while it arranges: laid out once
        # more, the last line is still the view's last.
        assert log.scroll_y == log.max_scroll_y
        region = log.scrollable_content_region
        bottom, _ = app.screen.get_widget_at(region.x, region.bottom - 1)
        assert bottom is log.children[-1]


async def test_a_long_session_is_first_laid_out_once(ws) -> None:  # noqa: F811
    """Older groups than those mounted: the view will scroll, so its scrollbar is in the
    first layout (finding it afterwards laid the screen out a second time). Loaded as
    the command's first screen is: frames held until the pane is filled."""
    await bulk_groups(ws, 30)
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await pilot.pause(0.1)
        textual_fixes.hold_frames(app)
        await view.load(ws.history())
        await pilot.pause(0.2)  # every message the load caused handled; nothing drawn
        reflows = count_reflows(app)
        textual_fixes.release_frames(app)
        await pilot.pause(0.3)
        assert view.show_vertical_scrollbar and view.max_scroll_y > 0
        assert len(reflows) == 1
        assert view.scroll_y == view.max_scroll_y  # at the newest, as before


async def settled_screenshot(app: App, pilot, timeout: float = 20.0) -> str:  # type: ignore[no-untyped-def]
    """The screen once two screenshots 0.3 s apart agree: under load the timers and
    workers a key started may still be drawing after a fixed pause."""
    deadline = time.monotonic() + timeout
    shot = app.export_screenshot()
    while True:
        await pilot.pause(0.3)
        again = app.export_screenshot()
        if again == shot or time.monotonic() > deadline:
            return again
        shot = again


async def second_layout_changes_nothing(app: App, pilot) -> None:  # type: ignore[no-untyped-def]
    """What one layout drew is what a second layout of every widget draws."""
    once = await settled_screenshot(app, pilot)
    for widget in app.screen.walk_children(with_self=True):
        widget.refresh(layout=True)
    assert await settled_screenshot(app, pilot) == once


async def test_the_workspace_needs_no_second_layout(tmp_path) -> None:
    """The rule the one-pass reflow relies on (textual_fixes), held by every pane of
    the workspace: at start, after the side panes are toggled, a resize and the
    error banner."""
    from tests.test_app_actions import make_app, seed

    answer = "Done: **bold**, a list\n\n- one\n- two\n\n```python\nx = 1\n```\n\n### STATE\nGoal: g"
    await seed(tmp_path, [(f"prompt {i} " + "word " * 30, answer) for i in range(12)])
    app = make_app(tmp_path)
    async with app.run_test(size=(140, 44)) as pilot:
        from tests.test_app import started

        await started(pilot)
        await second_layout_changes_nothing(app, pilot)
        await pilot.press("f8")
        await second_layout_changes_nothing(app, pilot)
        await pilot.press("f8", "f7")
        await second_layout_changes_nothing(app, pilot)
        await pilot.press("f7")
        await pilot.resize_terminal(100, 34)
        await second_layout_changes_nothing(app, pilot)
        app.workspace_screen.show_banner("openai: 401 Unauthorized: the API key was rejected.")
        await second_layout_changes_nothing(app, pilot)


@asynccontextmanager
async def oldest_above_the_pane(workspace, app):  # type: ignore[no-untyped-def]
    """`app` over 60 groups, loaded and focused, its oldest mounted group above the pane."""
    await bulk_groups(workspace, 60)
    async with app.run_test(size=SIZE) as pilot:
        view = await loaded_and_focused(app, pilot, workspace)
        oldest = view.block(view.mounted_group_ids[0])
        assert view._tops[oldest] < view.scroll_y
        yield app, pilot, view, oldest


async def test_ctrl_u_brings_the_oldest_group_to_the_top_in_the_keys_frame(ws) -> None:  # noqa: F811
    async with oldest_above_the_pane(ws, ConvApp(page_size=5)) as (app, pilot, view, oldest):
        top = view._tops[oldest]
        drawn: list[float] = []  # the view's scroll in each frame written
        on_each_frame(app, lambda frame: frame is not None and drawn.append(view.scroll_y))
        mounted = view.mounted_group_ids
        view.action_load_older()
        for _ in range(20):  # the key's own work, then the frame drawn at once
            if drawn:
                break
            await asyncio.sleep(0)
        # Scrolled and drawn before the page's first group is mounted (that comes in
        # frames of its own, above it, and moves nothing on screen).
        assert drawn and drawn[0] == top and view.mounted_group_ids[: len(mounted)] == mounted
        await wait_for(pilot, lambda: view.mounted_group_ids[0] != mounted[0] and not view._paging)
        await pilot.pause()
        assert oldest.region.y == view.region.y  # still at the top, the page above it


async def test_ctrl_u_with_a_layout_pending_draws_its_scroll_first_and_the_layout_next(
    ws,  # noqa: F811
) -> None:
    """A layout asked for since the last frame (a page's mount, the markers' counts) is
    not laid out in the key's frame: the scroll is drawn at once in the places the last
    layout gave, the whole screen laid out in the next frame."""
    async with oldest_above_the_pane(ws, PanedConvApp(page_size=5)) as (app, pilot, view, oldest):
        top = view._tops[oldest]
        banner = app.query_one("#banner", Static)
        banner.update("a pane beside the conversation, its text changed")  # a layout
        for _ in range(50):
            if app.screen._layout_required:
                break
            await asyncio.sleep(0)
        assert app.screen._layout_required
        reflows = count_reflows(app)
        frames: list[tuple[float, int]] = []  # (the view's scroll, reflows so far) a frame
        on_each_frame(
            app, lambda frame: frame is not None and frames.append((view.scroll_y, len(reflows)))
        )
        view.action_load_older()
        assert frames and frames[0] == (top, 0)  # drawn at once, nothing laid out
        await wait_for(pilot, lambda: len(reflows) > 0)  # the layout, next
        await wait_for(pilot, lambda: not view._paging)
        await pilot.pause()
        assert oldest.region.y == view.region.y  # still at the top, the page above it
        assert "changed" in str(banner.render())


def lines_styled_per_frame(monkeypatch) -> list[tuple[object, int]]:
    """(widget, lines styled) for every widget drawn from now on: the lines its draw had
    to style (not in its styles cache), as `textual_fixes.lines_to_style` counts them."""
    drawn: list[tuple[object, int]] = []
    render_widget = StylesCache.render_widget

    def counting(self, widget, crop):  # type: ignore[no-untyped-def]
        missing = set(textual_fixes.lines_to_style(widget)) & set(crop.line_range)
        drawn.append((widget, len(missing)))
        return render_widget(self, widget, crop)

    monkeypatch.setattr(StylesCache, "render_widget", counting)
    return drawn


def in_groups(widget: object) -> bool:
    return isinstance(widget, Widget) and any(
        isinstance(node, GroupBlock) for node in (widget, *widget.ancestors)
    )


async def test_a_page_up_finds_the_page_above_styled_while_the_view_was_still(
    ws,  # noqa: F811
    monkeypatch,
) -> None:
    await bulk_groups(ws, 40)
    app = ConvApp(initial_blocks=15)
    async with app.run_test(size=SIZE) as pilot:
        view = await loaded_and_focused(app, pilot, ws)
        page = view.scrollable_content_region.height
        assert view.max_scroll_y > 3 * page
        # A scroll first: Textual lets its full map go, which styling ahead rebuilds.
        await pilot.press("pageup")
        await wait_for(pilot, lambda: view.styler.timer is None)  # still: styled ahead
        await pilot.pause()
        top = round(view.scroll_y)
        above = [
            block
            for block, block_top in view._tops.items()
            if isinstance(block, GroupBlock)
            and block_top < top
            and block_top + block.outer_size.height > top - page
        ]
        assert above
        for block in above:
            assert not textual_fixes.lines_to_style(block)
            assert not any(textual_fixes.lines_to_style(w) for w in block.walk_children())
        drawn = lines_styled_per_frame(monkeypatch)
        updates: list[object] = []
        on_each_frame(app, updates.append)
        await pilot.press("pageup")
        assert view.scroll_y == top - page
        # The key's frame drew the groups' lines from their caches; and only the pane
        # (styling ahead rebuilt Textual's full map, and kept its map of the screen).
        assert any(in_groups(w) for w, _ in drawn)
        assert sum(n for w, n in drawn if in_groups(w)) == 0
        frames = [u for u in updates if u is not None]
        assert frames and not any(isinstance(u, LayoutUpdate) for u in frames)
        region = view.region
        rows = {y for u in frames if isinstance(u, ChopsUpdate) for y, _x1, _x2 in u.spans}
        assert rows <= set(range(region.y, region.bottom))


async def test_ctrl_u_finds_the_oldest_groups_pane_styled(ws, monkeypatch) -> None:  # noqa: F811
    await bulk_groups(ws, 60)
    app = ConvApp(initial_blocks=15, page_size=5)
    async with app.run_test(size=SIZE) as pilot:
        view = await loaded_and_focused(app, pilot, ws)
        await wait_for(pilot, lambda: view.styler.timer is None)
        await pilot.pause()
        oldest = view.block(view.mounted_group_ids[0])
        assert view._tops[oldest] < view.scroll_y - view.scrollable_content_region.height
        assert not textual_fixes.lines_to_style(oldest)
        drawn = lines_styled_per_frame(monkeypatch)
        view.action_load_older()
        for _ in range(20):  # the key's own frame, drawn at once
            if any(w is oldest for w, _ in drawn):
                break
            await asyncio.sleep(0)
        assert any(w is oldest for w, _ in drawn)
        assert sum(n for w, n in drawn if in_groups(w)) == 0
        await wait_for(pilot, lambda: not view._paging)


@asynccontextmanager
async def long_pages(workspace):  # type: ignore[no-untyped-def]
    """80 groups in an app whose pages (12 groups, a frame each) take a while to mount,
    loaded and focused."""
    await bulk_groups(workspace, 80)
    app = ConvApp(initial_blocks=15, page_size=12, max_blocks=40)
    async with app.run_test(size=SIZE) as pilot:
        yield app, pilot, await loaded_and_focused(app, pilot, workspace)


async def test_ctrl_u_while_a_page_is_mounted_brings_its_oldest_group_up_at_once(
    ws,  # noqa: F811
) -> None:
    async with long_pages(ws) as (app, pilot, view):
        lo = view._lo
        view.action_load_older()  # a page of 12, a group per frame
        await wait_for(pilot, lambda: view._lo <= lo - 2 and view._paging, timeout=10)
        block = view._oldest_block()
        top = view._tops[block]
        assert top < view.scroll_y  # mounted above the group the page holds at the top
        drawn: list[bool] = []  # each frame: is that group at the top?
        held: list[bool] = []  # each frame while the first page is still mounted
        on_each_frame(
            app,
            lambda frame: (
                frame is not None
                and (
                    drawn.append(view._tops.get(block) == view.scroll_y),
                    view._queued[True] and held.append(view._tops.get(block) == view.scroll_y),
                )
            ),
        )
        mounted = view._lo
        view.action_load_older()  # pressed before the page is all mounted
        assert view._lo == mounted and view._paging  # the key mounts nothing itself
        # The group is at the top in the first frame drawn after the key. Its top may
        # have moved by then: the page under way mounts groups above it.
        await wait_for(pilot, lambda: bool(drawn), timeout=10)
        assert drawn[0], drawn
        # Held at the top while the rest of that page is mounted above it; the page
        # queued by the key follows.
        await wait_for(pilot, lambda: not view._paging and not view._queued[True], timeout=20)
        assert view._lo < mounted - 1
        assert len(held) > 1 and all(held)


async def test_ctrl_u_right_after_a_group_is_mounted_draws_it_at_the_top_at_once(
    ws,  # noqa: F811
) -> None:
    """The key comes between a page's mount of a group (its batch closed) and that
    group's layout: the key draws that layout itself, the group at the top, before
    anything queued after it (a streamed chunk, the page's next mount) runs, and
    without waiting for the rest of the page (a frame per group)."""
    async with long_pages(ws) as (app, pilot, view):
        lo = view._lo
        view.action_load_older()  # a page of 12, a group per frame
        block = None
        end = time.monotonic() + 10
        while time.monotonic() < end:  # a group of it mounted, not laid out, no batch open
            oldest = view._oldest_block()
            if view._paging and view._lo < lo - 1 and oldest not in view._tops:
                if not app._batch_count:
                    block = oldest
                    break
            await asyncio.sleep(0)
        assert block is not None and view._paging
        tops = tops_in_each_frame(app, view, block)
        view.action_load_older()
        assert tops[:1] == [0], tops  # drawn by the key, before it returned
        # Held there while the rest of the page is mounted above it.
        await wait_for(pilot, lambda: not view._paging and not view._queued[True], timeout=20)
        assert view._lo < lo - 12


async def test_ctrl_u_while_a_mount_holds_the_batch_draws_its_scroll_when_it_closes(
    ws,  # noqa: F811
) -> None:
    """The key comes while a page's mount holds a batch open (no frame may be drawn):
    its scroll is drawn as the batch closes, before the layout the mount asks for, not
    in the frame timer's next frame with that whole layout."""
    async with long_pages(ws) as (app, pilot, view):
        lo = view._lo
        view.action_load_older()  # a page of 12, a group per frame
        await wait_for(pilot, lambda: view._lo <= lo - 2 and view._paging, timeout=10)
        mount = view.mount
        reflows = count_reflows(app)
        pressed: list[tuple[GroupBlock, int]] = []  # the group, the reflows before the key

        def mount_with_a_key(*widgets, **kw):  # type: ignore[no-untyped-def]
            if not pressed and app._batch_count:
                block = view._oldest_block()
                if block in view._tops and view._tops[block] < view.scroll_y:
                    pressed.append((block, len(reflows)))
                    view.action_load_older()  # inside the mount's batch: cannot draw
            return mount(*widgets, **kw)

        view.mount = mount_with_a_key  # type: ignore[method-assign]
        frames: list[tuple[int, bool]] = []  # each frame after the key: reflows, at the top

        def record(frame) -> None:  # type: ignore[no-untyped-def]
            if frame is not None and pressed:
                block, before = pressed[0]
                frames.append((len(reflows) - before, view._tops.get(block) == view.scroll_y))

        on_each_frame(app, record)
        await wait_for(pilot, lambda: bool(frames), timeout=10)
        assert frames[0] == (0, True), frames
        await wait_for(pilot, lambda: not view._paging and not view._queued[True], timeout=20)


def blocks_in_order(view: ConversationView) -> list[int | None]:
    """The settled groups mounted in the view, top to bottom, by group id."""
    return [b.group_id for b in view.children if isinstance(b, GroupBlock) and not b.live]


async def test_end_while_a_page_mounts_a_group_then_ctrl_u_shows_the_oldest_group_at_once(
    ws,  # noqa: F811
) -> None:
    """End (the newest groups mounted anew) comes while a ctrl+u page is mounting one of
    its groups, a reply streaming: the group that page was mounting does not join the
    new slice (the slice, the blocks and the screen agree), and the next ctrl+u brings
    the oldest group of the new slice to the top in its own frame."""
    await bulk_groups(ws, 80)
    app = ConvApp(initial_blocks=15, page_size=12, max_blocks=15)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await first_words_streamed(pilot, view, ws)
        view.focus()
        await wait_for(pilot, lambda: not view._paging, timeout=LOADED)  # the shedding
        mount = view.mount
        ended: list[asyncio.Task[None]] = []

        def mount_while_end_runs(*widgets, **kw):  # type: ignore[no-untyped-def]
            mounting = mount(*widgets, **kw)
            paging = kw.get("after") is view._older and view._paging
            if ended or not paging or view._hi == len(view.group_ids):
                return mounting
            # End, handled while this group of the page is being mounted (the newest
            # groups trimmed by the page): its own slice is mounted before this group's
            # mount completes.
            ended.append(asyncio.ensure_future(view.action_newest()))

            async def after_end() -> None:
                await ended[0]
                await mounting

            return after_end()

        view.mount = mount_while_end_runs  # type: ignore[method-assign]
        view.action_load_older()  # a page of 12, a group per frame
        await wait_for(pilot, lambda: bool(ended) and ended[0].done(), timeout=LOADED)
        view.mount = mount  # type: ignore[method-assign]
        n = len(view.group_ids)
        # The page stops; End's own page of older groups follows it.
        await wait_for(
            pilot,
            lambda: (
                not view._paging
                and (
                    view._lo <= n - view.page_size
                    or blocks_in_order(view) != view.mounted_group_ids
                )
            ),
            timeout=LOADED,
        )
        await pilot.pause(0.2)
        # The slice is the newest groups, every one of them mounted, in order, and nothing
        # else: the page's group mounted meanwhile is not in it.
        assert view._hi == n
        assert blocks_in_order(view) == view.mounted_group_ids
        assert all(view.block(g) is not None for g in view.mounted_group_ids)
        # ctrl+u: the oldest mounted group at the top in the key's own frame.
        oldest = view._oldest_block()
        assert oldest is not None
        tops = tops_in_each_frame(app, view, oldest)
        view.action_load_older()
        for _ in range(20):
            if tops:
                break
            await asyncio.sleep(0)
        assert tops[:1] == [0], tops
        await wait_for(pilot, lambda: not view._paging and not view._queued[True], timeout=LOADED)
        assert blocks_in_order(view) == view.mounted_group_ids


async def test_a_page_key_draws_its_scroll_and_scrollbar_in_one_frame_and_one_layout(
    ws,  # noqa: F811
) -> None:
    """The scroll and its scrollbar in the key's frame; after it, no second layout of the
    same scroll and no frame of the scrollbar alone (`textual_fixes.scroll_frame_now`)."""
    await bulk_groups(ws, 30)
    app = ConvApp(initial_blocks=15)
    async with app.run_test(size=SIZE) as pilot:
        view = await loaded_and_focused(app, pilot, ws)
        await wait_for(pilot, lambda: view.styler.timer is None)  # still: nothing pending
        compositor = app.screen._compositor
        scrolls: list[int] = []
        reflow_visible = compositor.reflow_visible

        def counting(*args, **kw):  # type: ignore[no-untyped-def]
            scrolls.append(1)
            return reflow_visible(*args, **kw)

        compositor.reflow_visible = counting  # type: ignore[method-assign]
        updates: list[object] = []
        on_each_frame(app, updates.append)
        bar = view.vertical_scrollbar.region
        rows_before = list(view.vertical_scrollbar.bar_rows())
        before = view.scroll_y
        await pilot.press("pageup")
        await pilot.pause(0.1)
        assert view.scroll_y < before
        drawn = [u for u in updates if u is not None]
        assert len(drawn) == 1 and isinstance(drawn[0], ChopsUpdate)
        assert len(scrolls) == 1
        columns = {(y, x1) for y, x1, _x2 in drawn[0].spans}
        assert any(x1 <= bar.x for _y, x1 in columns)
        # The bar's rows the scroll changed (ui/widgets/scrollbar.py repaints no other).
        rows_after = view.vertical_scrollbar.bar_rows()
        changed = {bar.y + y for y, row in enumerate(rows_after) if row != rows_before[y]}
        assert changed
        assert {y for y, x1, x2 in drawn[0].spans if x1 <= bar.x < x2} >= changed


async def test_preparing_the_next_pages_reads_no_map_of_the_screen(
    ws,  # noqa: F811
    monkeypatch,
) -> None:
    """The width the next pages are rendered at comes from the answers' last layout: a
    map a layout left to be rebuilt is not rebuilt by the preparation, between frames."""
    await bulk_groups(ws, 40)
    app = PanedConvApp(initial_blocks=15)
    async with app.run_test(size=SIZE) as pilot:
        view = await loaded_and_focused(app, pilot, ws)
        answer = next(a for b in view._blocks.values() for a in b.answers())
        width = answer.content_size.width
        assert width > 0
        compositor = app.screen._compositor
        rebuilt: list[int] = []
        full_map = textual_fixes._full_map

        def counting(self):  # type: ignore[no-untyped-def]
            if self._full_map_invalidated:
                rebuilt.append(1)
            return full_map.fget(self)

        monkeypatch.setattr(textual_fixes, "_full_map", property(counting))
        compositor._full_map_invalidated = True  # as a frame's layout leaves it
        assert view._answer_width() == width
        assert not rebuilt
        # An answer mounted and not laid out yet (no size) is passed over: its width
        # less its padding is no width to render at.
        monkeypatch.setattr(answer, "_size", Size(0, 0))
        assert view._answer_width() == width
