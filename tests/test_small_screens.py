"""Every pane and dialog is usable at 80x24: the right pane gives each part usable room
(one part at a time under the gauge, a visible switch naming all three, F9 and a click
to move between them), the sessions dialog shows every button and the first prompts,
the first-run panel keeps its button in sight and says there is more to read."""

from __future__ import annotations

from slop_tui.ui.widgets.anchors import ScratchpadEditor, StatePane
from slop_tui.ui.widgets.preview import ContextPreview
from slop_tui.ui.widgets.sideswitch import SideSwitch
from tests import test_app, test_snapshots
from tests.fakeserver import wait_for
from tests.test_app import started
from tests.test_app_actions import make_app, seed

project = test_app.project
snapshot_project = test_snapshots.project


def shown_parts(app) -> dict[str, int]:
    """Each side part's rows on screen (0: not drawn)."""
    return {
        name: app.query_one(f"#{name}").region.height for name in ("state", "scratchpad", "preview")
    }


async def test_at_80x24_each_side_part_gets_usable_rooms_one_at_a_time(project):
    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(pilot)
        await pilot.press("f8")  # the right pane (hidden below 110 columns)
        await pilot.pause()
        switch = app.query_one(SideSwitch)
        assert switch.region.height == 1 and "▸STATE" in str(switch.render())
        total = app.query_one("#gauge-total")
        assert total.region.height == 1 and str(total.render()).endswith("%")  # no wrap
        rooms = shown_parts(app)
        assert rooms["state"] >= 6 and rooms["scratchpad"] == rooms["preview"] == 0, rooms

        # F9 focuses the shown part; F9 again moves to the next one, which is drawn.
        await pilot.press("f9")
        await wait_for(pilot, lambda: app.query_one(StatePane).has_focus)
        await pilot.press("f9")
        await wait_for(pilot, lambda: app.query_one(ScratchpadEditor).area.has_focus)
        await pilot.pause()
        rooms = shown_parts(app)
        assert rooms["scratchpad"] >= 6 and rooms["state"] == 0, rooms
        await pilot.press(*"seen")
        await wait_for(pilot, lambda: "seen" in app.query_one(ScratchpadEditor).area.text)
        assert app.query_one(ScratchpadEditor).area.region.height > 0  # typed where seen

        # A click on a name shows that part; the wheel reaches it.
        text = str(switch.render())
        await pilot.click(SideSwitch, offset=(text.index("Preview") + 1, 0))
        await pilot.pause()
        rooms = shown_parts(app)
        assert rooms["preview"] >= 6 and rooms["scratchpad"] == 0, rooms
        assert app.query_one(ContextPreview).region.height >= 6


async def test_on_a_tall_terminal_all_three_parts_show_and_no_switch(project):
    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        assert app.query_one(SideSwitch).region.height == 0
        assert all(rows >= 3 for rows in shown_parts(app).values()), shown_parts(app)
        await pilot.press("f9")
        await wait_for(pilot, lambda: app.query_one(ScratchpadEditor).area.has_focus)


async def test_the_sessions_dialog_fits_80_columns_with_every_button_and_the_prompts(project):
    from textual.widgets import Button

    from slop_tui.ui.screens.dialogs import SessionScreen

    await seed(project, [("explain the parser's error recovery", "answer")])
    app = make_app(project)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(pilot)
        await pilot.press("f5")
        await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
        await pilot.pause()
        box = app.screen.query_one("#dialog").content_region
        for button in app.screen.query(Button):
            assert box.contains_region(button.region), (str(button.label), button.region, box)
        sessions = app.screen.query_one("#sessions")
        row = str(sessions.get_option_at_index(0).prompt)
        # The first prompt starts where the row still has room for a dozen of its
        # characters: readable, not `…`.
        assert row.index("explain") + 12 <= sessions.content_region.width, (row, sessions.size)


async def test_the_first_run_panel_keeps_its_button_in_sight_at_80x24(project):
    from textual.widgets import Button

    from slop_tui.ui.screens.firstrun import FirstRunScreen

    app = make_app(project)  # an empty project, no provider keys: the first-run panel
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, FirstRunScreen), timeout=15)
        await pilot.pause()
        await pilot.pause()
        button = app.screen.query_one("#demo", Button)
        assert app.screen.region.contains_region(button.region) and button.region.height > 0
        box = app.screen.query_one("DialogBox")
        assert box.max_scroll_y > 0  # the text is taller than the screen ...
        hint = str(app.screen.query_one("#firstrun-hint").render())
        assert "more below" in hint  # ... and the panel says so
        await pilot.click("#demo")
        await wait_for(pilot, lambda: not isinstance(app.screen, FirstRunScreen))


def test_every_gauge_line_fits_the_narrow_right_pane(snapshot_project):
    """The snapshots' session at 80x24 with the right pane opened: eight layers and a
    cached share, more gauge lines than rows. Each line takes its shortest form that
    fits (a scrollbar, when it appears, takes columns without a resize and the lines
    are fitted again): none wraps, no `%` lands on a line of its own."""
    import asyncio

    from tests.test_snapshots import prepare

    prepare(snapshot_project)  # writes the ledger in its own event loop

    async def body() -> None:
        app = snapshot_project.app()
        async with app.run_test(size=(80, 24)) as pilot:
            await started(pilot)
            await pilot.press("f8")
            gauge = app.query_one("#gauge")
            await wait_for(pilot, lambda: gauge.cached is not None and gauge.region.height > 0)
            await pilot.pause()
            await pilot.pause()
            gauge.background = (3, 12_345)  # background calls too, drawn on the next resize
            gauge._draw()
            await pilot.pause()
            for line in ("#gauge-total", "#gauge-cached", "#gauge-background"):
                shown = app.query_one(line)
                assert shown.region.height == 1, (line, str(shown.render()))
            assert str(app.query_one("#gauge-total").render()).endswith("%")

    asyncio.run(body())


async def test_the_provider_dialog_shows_its_buttons_at_80x24_with_a_notice(project):
    """A keyless provider highlighted (a two-line notice): the buttons are on screen
    without scrolling the dialog."""
    from slop_tui.ui.screens.dialogs import ProviderScreen

    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(pilot)
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ProviderScreen))
        dialog = app.screen
        names = [row[0] for row in dialog.choices]
        dialog.query_one("#providers").highlighted = names.index("gemini")
        notice = dialog.query_one("#notice")
        await wait_for(pilot, lambda: "no API key" in str(notice.render()))
        await pilot.pause()
        box = dialog.query_one("#dialog")
        assert box.max_scroll_y == 0, box.max_scroll_y
        for button in ("#switch", "#cancel"):
            region = dialog.query_one(button).region
            assert region.height >= 1 and box.region.contains_region(region), (button, region)


async def test_f3_and_f9_show_a_hidden_pane_before_taking_the_keyboard(project):
    """At 80x24 both side panes start hidden: F3 and F9 open theirs, so typing never
    goes to a list or an editor that is not drawn."""
    from slop_tui.ui.widgets.groups import GroupList

    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(pilot)
        groups = app.query_one(GroupList)
        assert groups.region.width == 0  # hidden at 80 columns
        await pilot.press("f3")
        await wait_for(pilot, lambda: groups.has_focus and groups.region.width > 0)
        await pilot.press("f9")
        await wait_for(pilot, lambda: app.query_one(StatePane).has_focus)
        await pilot.pause()
        assert app.query_one(StatePane).region.height >= 6
