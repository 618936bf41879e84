"""Local echo (`slop_tui/ui/echo.py`): a key in the prompt or the group list is drawn at
once, in a frame of its own, even while Textual's next frame is held back."""

from __future__ import annotations

import re

from textual import events
from textual.app import App
from textual.widgets import TextArea

from slop_tui.ui.widgets.groups import GroupList
from slop_tui.ui.widgets.prompt import PromptInput
from tests.test_ui_groups import ListsApp, group, plan_for


class PromptApp(App):
    def compose(self):
        yield PromptInput(id="prompt", blink=False)


def recording(app: App) -> list[str]:
    """The text of every update written to the terminal from now on."""
    written: list[str] = []
    real = app._display

    def display(screen, renderable) -> None:
        if renderable is not None:
            written.append(renderable.render_segments(app.console))
        real(screen, renderable)

    app._display = display  # type: ignore[method-assign]
    return written


def hold_frames(app: App) -> list[int]:
    """Textual's frames stop (as while a long frame or a busy loop holds them);
    returns a list that counts the frames asked for meanwhile."""
    held: list[int] = []
    timer = app.screen._update_timer
    timer.pause()
    timer.resume = lambda: held.append(1)  # type: ignore[method-assign]
    # Pilot's pause() draws a frame itself (it calls this): held too.
    app.screen._on_timer_update = lambda: held.append(1)  # type: ignore[method-assign]
    return held


def plain(update: str) -> str:
    """An update's text without its escape sequences."""
    return re.sub(r"\x1b\[[0-9;]*[A-Za-z]", "", update)


async def focused_prompt(app: PromptApp, pilot) -> TextArea:
    area = app.query_one(PromptInput).area
    area.focus()
    await pilot.pause()
    return area


async def test_a_key_in_the_prompt_is_drawn_before_the_next_frame():
    app = PromptApp()
    async with app.run_test(size=(60, 10)) as pilot:
        area = await focused_prompt(app, pilot)
        written = recording(app)
        held = hold_frames(app)
        app._driver.process_message(events.Key("q", "q"))
        await pilot.pause()
        assert area.text == "q"
        assert len(written) == 1 and "q" in written[0]  # the echo, while frames are held
        app._driver.process_message(events.Key("z", "z"))
        await pilot.pause()
        assert area.text == "qz" and len(written) == 2 and "z" in written[1]
        assert held  # Textual asked for its frame meanwhile: it was held, not needed


async def test_keys_bound_to_actions_in_the_prompt_are_drawn_before_the_next_frame():
    """Backspace, delete and the arrows act through bindings, after the key event has
    gone up to the app: their change is drawn at once too, not by the held frame."""
    app = PromptApp()
    async with app.run_test(size=(60, 10)) as pilot:
        area = await focused_prompt(app, pilot)
        area.insert("abcxy")
        await pilot.pause()
        written = recording(app)
        held = hold_frames(app)
        app._driver.process_message(events.Key("backspace", None))
        await pilot.pause()
        assert area.text == "abcx"
        assert len(written) == 1 and "abcx " in plain(written[0])
        app._driver.process_message(events.Key("left", None))
        app._driver.process_message(events.Key("left", None))
        app._driver.process_message(events.Key("delete", None))
        await pilot.pause()
        assert area.text == "abx"
        assert "abx " in plain(written[-1])  # drawn while every frame was held
        assert held


async def focused_groups(app: ListsApp, pilot, n: int, highlighted: int) -> GroupList:
    groups = app.query_one(GroupList)
    rows = [group(i, prompt=f"task number {i}") for i in range(1, n + 1)]
    groups.load(rows, plan_for(rows, 3))
    groups.focus()
    groups.highlighted = highlighted
    await pilot.pause()
    return groups


async def up_while_frames_are_held(app: App, pilot) -> list[str]:
    """`up`, with Textual's frames held: what was written to the terminal."""
    written = recording(app)
    hold_frames(app)
    app._driver.process_message(events.Key("up", None))
    await pilot.pause()
    return written


async def test_moving_in_the_group_list_is_drawn_before_the_next_frame():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = await focused_groups(app, pilot, 8, 7)
        written = await up_while_frames_are_held(app, pilot)
        assert groups.highlighted == 6
        assert len(written) == 1
        assert "task number 7" in written[0] and "task number 8" in written[0]
        assert "task number 3" not in written[0]  # only the two lines that changed


async def test_nothing_is_drawn_out_of_turn_while_updates_are_batched():
    app = PromptApp()
    async with app.run_test(size=(60, 10)) as pilot:
        area = await focused_prompt(app, pilot)
        written = recording(app)
        with app.batch_update():
            app._driver.process_message(events.Key("q", "q"))
            await pilot.pause()
            assert area.text == "q" and written == []
        await pilot.pause()
        assert any("q" in w for w in written)  # the next frame shows it, as before


async def test_a_move_that_scrolls_the_group_list_draws_it_whole_at_once():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = await focused_groups(app, pilot, 60, 59)
        height = groups.scrollable_content_region.height
        top = round(groups.scroll_y)
        groups.highlighted = top  # the first line on screen
        await pilot.pause()
        assert round(groups.scroll_y) == top
        written = await up_while_frames_are_held(app, pilot)
        assert groups.highlighted == top - 1 and round(groups.scroll_y) == top - 1
        assert len(written) == 1
        # Every line on screen moved down one: all of them are drawn, the new top too.
        drawn = written[0]
        assert f"task number {top}" in drawn  # the new first line (index top - 1)
        assert f"task number {top - 1 + height}" in drawn  # the new last line


async def test_a_scroll_of_the_group_list_styles_only_the_rows_it_exposes():
    app = ListsApp()
    async with app.run_test(size=(80, 20)) as pilot:
        groups = await focused_groups(app, pilot, 60, 59)
        top = round(groups.scroll_y)
        groups.highlighted = top  # the first line on screen
        await pilot.pause()
        styled: list[int] = []  # the widget lines Textual's line styling renders
        cache = groups._styles_cache
        render_line = cache.render_line

        def counting(styles, y, *args, **kw):  # type: ignore[no-untyped-def]
            styled.append(y)
            return render_line(styles, y, *args, **kw)

        cache.render_line = counting  # type: ignore[method-assign]
        for step in range(1, 4):  # up past the top: the list scrolls a line each time
            await pilot.press("up")
            assert round(groups.scroll_y) == top - step
        # Each scroll styles the new top row (highlighted), the row the highlight left
        # and the border above them, not every visible line (there are 16).
        height = groups.scrollable_content_region.height
        assert height > 10 and len(styled) <= 3 * 3
        # What it shows is what a full repaint shows.
        shown = [strip.text for strip in groups.render_lines(groups.size.region)]
        cache.clear()
        assert [strip.text for strip in groups.render_lines(groups.size.region)] == shown
        assert f"task number {top - 2}" in shown[groups.content_offset.y]
