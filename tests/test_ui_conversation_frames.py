"""What keeps the conversation pane's frames short: a live answer that stays a
few widgets, room below it, pages mounted a group per frame from blocks built ahead,
and the two fixes to Textual's layout pass (`slop_tui/ui/textual_fixes.py`).

bench/tui.py measures the times; these tests check the mechanisms do what they claim.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.scroll_view import ScrollView
from textual.widgets import Markdown

from slop_tui.events import TextChunk, TurnStarted
from slop_tui.records import NewMessage
from slop_tui.ui import textual_fixes
from slop_tui.ui.collector import CollectorPacing
from slop_tui.ui.widgets import blocks, conversation
from slop_tui.ui.widgets.blocks import GroupBlock, LiveAnswer, block_starts
from slop_tui.ui.widgets.conversation import ConversationView, live_step
from tests.fakeserver import wait_for
from tests.test_ui_conversation import SIZE, ConvApp, bulk_groups
from tests.workspace_fixtures import open_workspace


@pytest.fixture
async def ws(tmp_path: Path):
    workspace = await open_workspace(tmp_path)
    yield workspace
    await workspace.close()


async def test_a_long_streamed_answer_stays_a_few_widgets_and_keeps_room_below(ws) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        gid = (await ws.ledger.append_user(ws.session, "a long one")).group_id
        await view.show_event(TurnStarted(group_id=gid))
        chunks = []
        for i in range(400):
            chunk = f"word{i} " + ("\n\n" if i % 20 == 19 else "")
            if i == 200:
                chunk = "\n\n## A heading\n\n- item one\n- item two\n\n"
            chunks.append(chunk)
            await view.show_event(TextChunk(text=chunk))
            if i % 100 == 99:
                await pilot.pause(0.3)  # past the stream's pace: another append
        answer = view.live_block.live_answer
        await wait_for(pilot, lambda: "word399" in answer.source)
        await pilot.pause(0.3)  # the paced stream's last append
        # 20 paragraphs, a heading and a list streamed in a few appends: one widget, no
        # children; the finished blocks rendered once, only the open one again.
        assert not answer.children and not app.query(Markdown)
        assert len(answer.settled.parts) >= 3
        assert answer.source == "".join(chunks)
        width = answer.content_size.width
        text = "\n".join(strip.text for strip in answer.settled.rendered(width))
        assert "word0" in text and "A heading" in text and "item two" in text
        assert "word399" not in text and "word399" in answer.open_text  # still open
        shown = "\n".join(strip.text for strip in answer.rendered(width))
        assert "word0" in shown and "word399" in shown  # the widget draws both
        assert answer.room > len(answer.rendered(width))  # blank room below the text
        assert answer.outer_size.height >= answer.room
        # Following the text's last line, two lines per update: the view moves a third of
        # the pane at a time, and the room below the text stays off screen.
        scrolls, heights = set(), set()
        for i in range(12):
            await view.show_event(TextChunk(text=f"\n\nline {i}"))
            await pilot.pause(0.25)  # past the stream's pace: one append each
            scrolls.add(view.scroll_y)
            heights.add(answer.outer_size.height)
            end = view._live_end(answer)
            bottom = view.scroll_y + view.scrollable_content_region.height
            step = live_step(view.scrollable_content_region.height)
            assert end is not None and bottom - step <= end <= bottom
            assert view.scroll_y < view.max_scroll_y
        assert len(scrolls) <= 4 and len(heights) <= 2
        chunks += [f"\n\nline {i}" for i in range(12)]
        await view.show_event(TextChunk(text="\n\nthe end"))
        await ws.ledger.append(
            ws.session, gid, [NewMessage(role="assistant", content="".join(chunks) + "\n\nthe end")]
        )
        await view.end_turn()
        await pilot.pause()
        assert answer.room == 0  # the room goes with the stream
        await pilot.pause()
        assert answer.outer_size.height == len(answer.rendered(answer.content_size.width))
        assert "the end" in answer.source and view.scroll_y == view.max_scroll_y


async def test_a_settled_part_renders_like_a_history_answer(ws) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        await view.begin_turn(None, "q")
        await view.show_event(TextChunk(text="first **bold** paragraph\n\nsecond"))
        answer = view.live_block.live_answer
        await wait_for(pilot, lambda: bool(answer.settled.parts))
        settled = answer.settled
        assert settled.parts == ["first **bold** paragraph"]
        lines = settled.rendered(30)
        assert [s.text.rstrip() for s in lines] == ["first bold paragraph"]
        assert any(seg.style and seg.style.bold for seg in lines[0])  # Markdown, not raw text
        assert answer.open_text == "second"
        shown = [s.text.rstrip() for s in answer.rendered(30)]
        assert shown == ["first bold paragraph", "", "second"]
        await view.end_turn()


async def test_ctrl_u_mounts_a_page_a_group_per_frame_from_prepared_blocks(ws) -> None:
    gids = await bulk_groups(ws, 60)
    app = ConvApp(page_size=5)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        view.focus()
        # Built ahead once the first screen is drawn: the next two pages, answers rendered.
        await wait_for(pilot, lambda: len(view._prepared) == 10, timeout=30)
        await pilot.pause()
        first = view.mounted_group_ids[0]
        page = gids[gids.index(first) - 5 : gids.index(first)]
        assert set(page) <= set(view._prepared)
        prepared = {g: view._prepared[g] for g in page}
        for block in prepared.values():
            assert all(a._lines is not None for a in block.answers())
        seen: list[int] = []  # the mounted groups at each layout of the view
        arrange = view.arrange

        def arrange_and_count(size, optimal=False):  # type: ignore[no-untyped-def]
            seen.append(len(view.mounted_group_ids))
            return arrange(size, optimal)

        view.arrange = arrange_and_count  # type: ignore[method-assign]
        frames: list[tuple[float, int]] = []  # (scroll, groups mounted) of each frame drawn
        display = app._display

        def display_and_note(screen, renderable) -> None:  # type: ignore[no-untyped-def]
            if renderable is not None:
                frames.append((view.scroll_y, len(view.mounted_group_ids)))
            display(screen, renderable)

        app._display = display_and_note  # type: ignore[method-assign]
        top, mounted = view.scroll_y, len(view.mounted_group_ids)
        assert view._tops[view.block(first)] < top  # above the pane: the key scrolls to it
        await pilot.press("ctrl+u")
        await wait_for(
            pilot, lambda: view.mounted_group_ids[0] == page[0] and not view._paging, timeout=30
        )
        # The key's frame: the oldest group brought to the top, drawn before the page's
        # first mount (a layout of the whole screen) joins it.
        key_frame = next(n for y, n in frames if y < top)
        assert key_frame == mounted
        # The very blocks built ahead were mounted, one a frame (never all at once).
        assert all(view.block(g) is prepared[g] for g in page)
        assert len(set(seen)) >= 3
        ids = view.mounted_group_ids
        assert ids == gids[gids.index(ids[0]) : gids.index(ids[0]) + len(ids)]
        # The old boundary is at the top of the pane, the new groups above it.
        await pilot.pause()
        assert view.block(first).region.y == view.region.y


async def test_end_after_ctrl_u_pages_mounts_the_newest_groups_without_rendering_them_again(
    ws, monkeypatch
) -> None:
    """The newest groups a ctrl+u page unmounts keep their answers' rendered lines in the
    view: End builds them again without rendering (Rich, in a thread, where the next
    key would wait for the interpreter lock)."""
    await bulk_groups(ws, 60)
    # The whole bound mounted at the load (not just the groups that fill two screens).
    monkeypatch.setattr(conversation, "FILL_SCREENS", 100)
    app = ConvApp(initial_blocks=15, page_size=5, max_blocks=15)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        assert len(view.mounted_group_ids) == 15
        view.focus()
        await wait_for(pilot, lambda: len(view._prepared) == 10, timeout=30)
        n = len(view.group_ids)
        for _ in range(2):
            view.action_load_older()
            await wait_for(pilot, lambda: not view._paging and not view._queued[True], timeout=30)
        assert view._hi <= n - 10  # the newest groups unmounted by the pages
        rendered: list[str] = []
        render = blocks.answer_lines

        def counted(look, source, width):  # type: ignore[no-untyped-def]
            rendered.append(source)
            return render(look, source, width)

        monkeypatch.setattr(blocks, "answer_lines", counted)
        await view.action_newest()
        await wait_for(
            pilot, lambda: not view._paging and view._lo <= n - view.page_size, timeout=30
        )
        await pilot.pause()
        answers = [a for g in view.mounted_group_ids for a in view.block(g).answers()]
        assert len(answers) >= view.page_size
        assert all(a.is_mounted and a.region.height > 0 for a in answers)
        assert not {a.shown + a._note() for a in answers} & set(rendered)


async def test_the_pages_a_key_shows_are_styled_ahead_in_slices_a_scroll_drops(
    ws, monkeypatch
) -> None:
    monkeypatch.setattr(conversation, "STYLE_AHEAD_SLICE_S", 0.0)  # a widget a slice
    await bulk_groups(ws, 60)
    app = ConvApp(page_size=5)
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        await app.workers.wait_for_complete()
        await pilot.pause()
        if view.styler.timer is not None:
            view.styler.timer.stop()  # styled here, by hand
        above = [b for b in view.query(GroupBlock) if view._tops[b] < view.scroll_y]
        widgets = [w for b in above for w in (b, *b.walk_children()) if w.outer_size.area]
        for widget in widgets:
            widget._styles_cache.clear()
        assert view.styler.style_ahead() > 0
        # One widget styled; the others are left to the next slices, a frame apart.
        assert view.styler.queue and view.styler.timer is not None
        await wait_for(pilot, lambda: not view.styler.queue, timeout=30)
        assert all(not textual_fixes.lines_to_style(w) for w in widgets)
        # A scroll drops what is left: the view moved, the pages to style are others.
        for widget in widgets:
            widget._styles_cache.clear()
        view.styler.style_ahead()
        assert view.styler.queue
        view.scroll_to(y=view.scroll_y - 3, animate=False, immediate=True)
        assert not view.styler.queue


async def _loaded_counting_styles(app, pilot, ws) -> tuple[ConversationView, list[int]]:
    """The view loaded and its first styling ahead done; each styling from then on
    appends to the list."""
    view = app.query_one(ConversationView)
    await view.load(ws.history())
    await app.workers.wait_for_complete()
    await wait_for(pilot, lambda: view.styler.timer is None)
    styled: list[int] = []
    style_ahead = view.styler.style_ahead
    view.styler.style_ahead = lambda: styled.append(1) or style_ahead()  # type: ignore[method-assign]
    return view, styled


async def test_the_styling_ahead_waits_on_one_timer_while_the_view_moves(ws) -> None:
    """Every layout and scroll of the view puts the styling ahead off; one timer waits
    (made anew at each, it cost every streamed frame a task), and it styles once the
    view has been still for STYLE_AHEAD_DELAY."""
    await bulk_groups(ws, 60)
    app = ConvApp(page_size=5)
    async with app.run_test(size=SIZE) as pilot:
        view, styled = await _loaded_counting_styles(app, pilot, ws)
        timers: list[float] = []
        set_timer = view.set_timer
        view.set_timer = lambda delay, *a, **k: timers.append(delay) or set_timer(delay, *a, **k)  # type: ignore[method-assign]
        for _ in range(50):  # a layout or a scroll each: one timer
            view.styler.later()
        assert len(timers) == 1 and view.styler.timer is not None
        for _ in range(4):  # moving for twice the delay: put off, not styled
            await pilot.pause(conversation.STYLE_AHEAD_DELAY / 2)
            view.styler.later()
        assert not styled
        await wait_for(pilot, lambda: bool(styled), timeout=5)
        assert len(styled) == 1


async def test_the_styling_ahead_waits_for_the_side_panes_of_the_start(ws) -> None:
    """After the first frame the side panes are filled and shown (the screen the user
    waits for): the styling ahead (20-35 ms) waits until they are, then styles once."""
    await bulk_groups(ws, 60)
    app = ConvApp(page_size=5)
    async with app.run_test(size=SIZE) as pilot:
        view, styled = await _loaded_counting_styles(app, pilot, ws)
        view.screen.side_panes_filled = False  # as the workspace's screen, while filling
        view.styler.later()
        await pilot.pause(conversation.STYLE_AHEAD_DELAY * 4)
        assert not styled and view.styler.timer is not None  # still waiting
        view.screen.side_panes_filled = True
        await wait_for(pilot, lambda: bool(styled), timeout=5)
        await pilot.pause(conversation.STYLE_AHEAD_DELAY * 2)
        assert len(styled) == 1


async def test_textual_fixes_skip_only_repeated_work(ws) -> None:
    textual_fixes.install()
    textual_fixes.install()  # once is enough; twice changes nothing
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
        compositor = app.screen._compositor
        compositor._full_map_invalidated = True
        app.screen._refresh_layout()
        assert compositor._full_map_invalidated is False  # reflow built the full map
        view = app.query_one(ConversationView)
        probe = ScrollView()
        await view.mount(probe)
        await pilot.pause()
        calls = []
        probe._scroll_update = lambda size: calls.append(size)  # type: ignore[method-assign]
        args = (probe.outer_size, probe.virtual_size, probe.container_size)
        probe._size_updated(*args)
        probe._size_updated(*args)
        assert len(calls) <= 1  # the same inputs twice: the second call has nothing to do
        probe.virtual_size = probe.virtual_size.with_height(probe.virtual_size.height + 50)
        probe._size_updated(*args)
        assert calls, "a changed content size must still update the scrollbars"
        assert isinstance(LiveAnswer().BLANK, bool)


def test_block_starts_marks_every_top_level_block_an_open_fence_is_one():
    text = "para one\nstill one\n\n- a\n- b\n\n## head\n\n```py\nx = 1\n\ny = 2\n"
    assert block_starts(text) == [0, 3, 6, 8]  # the unclosed fence runs to the end
    assert block_starts("") == []


async def first_words_streamed(pilot, view: ConversationView, ws):  # type: ignore[no-untyped-def]
    """`ws`'s session loaded, a turn begun and "first words" streamed into its live
    answer, past the stream's pace; returns the live answer."""
    await view.load(ws.history())
    await view.begin_turn(None, "q")
    await view.show_event(TextChunk(text="first"))
    answer = view.live_block.live_answer
    await wait_for(pilot, lambda: answer.source == "first")
    await pilot.pause(0.3)  # laid out at its text's height: the next append keeps room
    await view.show_event(TextChunk(text=" words"))
    await wait_for(pilot, lambda: answer.source == "first words")
    await pilot.pause(0.3)
    return answer


async def streamed_on_a_stopped_clock(app, pilot, ws):  # type: ignore[no-untyped-def]
    """`first_words_streamed`, then the app's collector (ui/collector.py, which notes
    every key) on a stopped clock: a key noted stays "just now" until the test moves
    it. Returns the view, the live answer, the clock and the collector."""
    view = app.query_one(ConversationView)
    answer = await first_words_streamed(pilot, view, ws)
    clock = [0.0]
    pace = app.collector = CollectorPacing(lambda: clock[0])
    return view, answer, clock, pace


async def test_a_streamed_update_waits_for_a_keys_frame_a_bounded_time(ws, monkeypatch) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view, answer, clock, pace = await streamed_on_a_stopped_clock(app, pilot, ws)
        monkeypatch.setattr(blocks, "KEY_FIRST_S", 30.0)
        pace.note_input()  # a key, just now
        await view.show_event(TextChunk(text=" more"))
        await pilot.pause(0.5)  # past the stream's pace
        assert answer.source == "first words"  # the key's frame first
        await view.show_event(TextChunk(text=" and more"))
        clock[0] += 60.0  # long after the key
        await wait_for(pilot, lambda: answer.source == "first words more and more")
        # Keys that keep coming hold each update KEY_FIRST_S at most.
        monkeypatch.setattr(blocks, "KEY_FIRST_S", 0.2)
        await pilot.pause(0.3)
        pace.note_input()
        await view.show_event(TextChunk(text=" still"))
        await wait_for(pilot, lambda: answer.source.endswith(" still"), timeout=30)
        assert pace.input_within(0.2)


async def test_a_key_that_comes_while_an_update_renders_is_drawn_first(ws, monkeypatch) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view, answer, clock, pace = await streamed_on_a_stopped_clock(app, pilot, ws)
        clock[0] = 60.0  # no key for a minute: the update starts at once
        render = blocks._render_live
        rendered = []

        def render_while_a_key_comes(*args):  # type: ignore[no-untyped-def]
            pace.note_input()  # a key, while Rich renders in its thread
            rendered.append(1)
            return render(*args)

        monkeypatch.setattr(blocks, "_render_live", render_while_a_key_comes)
        monkeypatch.setattr(blocks, "KEY_FIRST_S", 30.0)
        await view.show_event(TextChunk(text=" more"))
        await wait_for(pilot, lambda: bool(rendered))
        await pilot.pause(0.3)
        assert answer.source == "first words"  # rendered, not shown: the key's frame first
        clock[0] += 60.0  # long after the key
        await wait_for(pilot, lambda: answer.source == "first words more")
        drawn = "".join(answer.render_line(y).text for y in range(answer.text_height))
        assert "first words more" in drawn
        await view.end_turn()


async def test_the_room_below_a_streamed_answer_grows_ever_more_rarely(ws) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        answer = await first_words_streamed(pilot, view, ws)
        screen = SIZE[1]
        rooms = []
        for used in range(0, 4000, 5):  # the text grows, five lines an update
            answer._keep_room(used)
            assert used + screen <= answer.room  # a screen at least is always below it
            if not rooms or rooms[-1] != answer.room:
                rooms.append(answer.room)
        # 4,000 lines (100 screens): grown by four screens, then by half the text, so
        # the screen is laid out again a dozen times, not once every three screens.
        assert rooms[1] - rooms[0] >= 3 * screen
        assert len(rooms) <= 12
        await view.end_turn()


async def test_an_append_inside_the_room_repaints_the_answer_without_a_layout(ws) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        answer = await first_words_streamed(pilot, view, ws)
        arranged: list[int] = []
        arrange = view.arrange

        def counting(*args, **kw):
            arranged.append(1)
            return arrange(*args, **kw)

        view.arrange = counting  # type: ignore[method-assign]
        height = answer.outer_size.height
        await view.show_event(TextChunk(text=" and more words"))
        await wait_for(pilot, lambda: answer.source.endswith("more words"))
        await pilot.pause(0.1)
        # The same height (the text grew inside the room): no layout, only a repaint.
        assert answer.outer_size.height == height and not arranged
        drawn = "".join(answer.render_line(y).text for y in range(height))
        assert "first words and more words" in drawn
        # Past the room (four screens), the answer grows: the screen is laid out again.
        assert answer.room >= SIZE[1]
        await view.show_event(TextChunk(text="\n\nline\n\n" * 100))
        await wait_for(pilot, lambda: answer.source.count("line") == 100)
        await pilot.pause(0.1)
        assert arranged and answer.outer_size.height > height
        await view.end_turn()


async def test_a_streamed_state_keeps_its_lines_as_a_history_answer_does(ws) -> None:
    app = ConvApp()
    async with app.run_test(size=SIZE) as pilot:
        view = app.query_one(ConversationView)
        await view.load(ws.history())
        gid = (await ws.ledger.append_user(ws.session, "state please")).group_id
        await view.show_event(TurnStarted(group_id=gid))
        text = "Done it.\n\n### STATE\nGoal: ship it\nContext: the demo\nNext: tests\n"
        for piece in (text[:20], text[20:45], text[45:]):  # cut mid-section and mid-line
            await view.show_event(TextChunk(text=piece))
            await pilot.pause(0.3)  # past the stream's pace: one append per piece
        answer = view.live_block.live_answer
        await wait_for(pilot, lambda: answer.source == text)
        rows = [s.text.strip() for s in answer.rendered(60)]
        for line in ("Goal: ship it", "Context: the demo", "Next: tests"):
            assert line in rows, rows  # each on its own row, not one run-on paragraph
        assert "Done it." in rows
        await view.end_turn()
