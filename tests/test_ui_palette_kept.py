"""The kept command palette: one palette per app, shown again at every opening.

What the user sees of it must be what a palette made anew shows: an empty field (or
exactly what was typed since ctrl+p), the commands true to the app's state now, the
theme the app has now, a live theme preview that Esc undoes.
"""

from __future__ import annotations

import asyncio

from textual.command import CommandInput, CommandList, CommandPalette

from slop_tui.ui.app import SlopApp
from slop_tui.ui.palette import (
    PALETTE_SCREEN,
    THEME_PREFIX,
    SlopCommands,
    SlopPalette,
    build_ahead,
    kept_palette,
)
from slop_tui.ui.textual_fixes import mount_ahead
from slop_tui.ui.themes import DEFAULT_THEME
from tests.fakeserver import wait_for
from tests.test_app import project, started
from tests.test_ui_palette import SlowDiscovery, _PaletteApp

__all__ = ["project"]  # the fixture, used by the test of the real app


class _KeptApp(_PaletteApp):
    """Opens its one kept palette, as SlopApp does; its actions can change."""

    def __init__(self) -> None:
        super().__init__()
        self.actions = [("Drop or restore group", "Soft-drop the selected group.", self._drop)]

    def palette_actions(self):
        return list(self.actions)

    def action_command_palette(self) -> None:
        if not CommandPalette.is_open(self):
            self.push_screen(kept_palette(self))


def _discovered(app) -> list[str]:
    """The text of every option a palette made anew lists for an empty field."""
    provider = SlopCommands(app.screen)
    entries = provider.entries_now()
    assert entries is not None
    return [f"{entry.title}\n{entry.help}" for entry in entries]


def _listed(command_list: CommandList) -> list[str]:
    return [option.prompt.plain for option in command_list.options]


async def _open(pilot, app) -> SlopPalette:
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, SlopPalette))
    return app.screen


async def _open_listed(pilot, app) -> tuple[SlopPalette, CommandList]:
    palette = await _open(pilot, app)
    command_list = palette.query_one(CommandList)
    await wait_for(
        pilot,
        lambda: command_list.visible and _listed(command_list) == _discovered(app),
    )
    return palette, command_list


async def _close(pilot, app) -> None:
    await pilot.press("escape")
    await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def _built_ahead(pilot, app) -> SlopPalette:
    """The app's palette built ahead (`build_ahead`), running and settled, not shown."""
    await build_ahead(app)
    palette = app.get_screen(PALETTE_SCREEN)
    await wait_for(pilot, lambda: palette.is_running)
    await pilot.pause()
    return palette


def _shows_no_stale_hits(app, command_list: CommandList) -> bool:
    """The list is hidden, or it lists what a search of the empty field lists now."""
    return not command_list.visible or _listed(command_list) == _discovered(app)


async def test_the_same_palette_is_shown_again_not_composed_anew():
    app = _KeptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        first, _ = await _open_listed(pilot, app)
        field = first.query_one(CommandInput)
        await _close(pilot, app)
        assert first.is_running  # kept, mounted, while hidden
        again, command_list = await _open_listed(pilot, app)
        assert again is first
        assert again.query_one(CommandInput) is field  # not composed again
        assert app.get_screen(PALETTE_SCREEN) is first


async def test_a_kept_palette_never_shows_the_last_query_or_its_hits():
    app = _KeptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        palette, command_list = await _open_listed(pilot, app)
        field = palette.query_one(CommandInput)
        await pilot.press(*"export")
        await wait_for(pilot, lambda: any(t.startswith("/export") for t in _listed(command_list)))
        await _close(pilot, app)
        await pilot.press("ctrl+p")
        # From the first frame on: the field empty, the list hidden or true to now.
        assert field.value == ""
        assert _shows_no_stale_hits(app, command_list)
        for _ in range(20):
            await pilot.pause(0.01)
            assert field.value == ""
            assert _shows_no_stale_hits(app, command_list)
        await wait_for(pilot, lambda: command_list.visible)
        assert _listed(command_list) == _discovered(app)
        assert command_list.highlighted == 0


async def test_a_command_chosen_then_the_palette_opened_again_lists_every_command():
    app = _KeptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        palette, command_list = await _open_listed(pilot, app)
        await pilot.press(*"undo")
        await wait_for(pilot, lambda: "/undo" in _listed(command_list)[0])
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.ran == ["/undo"])
        again, command_list = await _open_listed(pilot, app)
        assert again is palette
        assert again.query_one(CommandInput).value == ""


async def test_keys_typed_as_the_palette_opens_land_in_its_field():
    app = _KeptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_listed(pilot, app)
        await _close(pilot, app)
        await pilot.press("ctrl+p", *"undo")  # no pause between the open and the keys
        palette = app.screen
        assert isinstance(palette, SlopPalette)
        field = palette.query_one(CommandInput)
        command_list = palette.query_one(CommandList)
        await wait_for(pilot, lambda: command_list.visible and command_list.option_count > 0)
        assert field.value == "undo"
        assert _listed(command_list)[0].startswith("/undo")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.ran == ["/undo"])


async def test_the_commands_listed_follow_the_apps_state_between_openings():
    app = _KeptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_listed(pilot, app)
        await _close(pilot, app)
        app.actions.append(("Fold every group", "A new action.", app._drop))
        app.theme = "slop-light"
        await pilot.pause()
        _, command_list = await _open_listed(pilot, app)  # waits for the list of now
        listed = _listed(command_list)
        assert listed[1] == "Fold every group\nA new action."
        light = next(text for text in listed if text.startswith(THEME_PREFIX + "slop-light"))
        assert "(current)" in light
        await pilot.press(*"fold every")
        await wait_for(pilot, lambda: _listed(command_list)[0].startswith("Fold every group"))


async def test_a_kept_palette_takes_the_theme_chosen_while_it_was_hidden():
    app = _KeptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        palette, _ = await _open_listed(pilot, app)
        dark_box = palette.query_one("#--container").styles.background
        await _close(pilot, app)
        app.theme = "slop-light"
        await pilot.pause()
        await _open_listed(pilot, app)
        light_box = palette.query_one("#--container").styles.background
        assert light_box != dark_box
        assert palette.styles.background == app.screen_stack[0].styles.background


async def test_theme_preview_and_escape_work_at_every_opening():
    app = _KeptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        for _ in range(3):
            palette, command_list = await _open_listed(pilot, app)
            palette.query_one(CommandInput).value = "theme slop-light"
            await wait_for(pilot, lambda: app.theme == "slop-light")
            await _close(pilot, app)
            await wait_for(pilot, lambda: app.theme == DEFAULT_THEME)
        providers = palette._providers
        assert len(providers) == 1  # started again at each opening, not made anew
        palette, command_list = await _open_listed(pilot, app)
        assert palette._providers == providers
        palette.query_one(CommandInput).value = "theme slop-high-contrast"
        await wait_for(
            pilot, lambda: _listed(command_list)[0].startswith(THEME_PREFIX + "slop-high")
        )
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.chosen == ["slop-high-contrast"])
        await pilot.pause(0.5)
        assert app.theme == "slop-high-contrast"  # chosen: not undone at the hiding


async def test_the_first_frame_of_an_opening_does_not_wait_for_the_search():
    app = _KeptApp()
    app.COMMANDS = {SlowDiscovery}
    SlowDiscovery.released = asyncio.Event()
    async with app.run_test(size=(100, 30)) as pilot:
        SlowDiscovery.released.set()
        palette, command_list = await _open_listed(pilot, app)
        await pilot.press(*"zz")  # hits that are not the discovery's: searched again
        await _close(pilot, app)
        SlowDiscovery.released = asyncio.Event()
        await pilot.press("ctrl+p")
        field = palette.query_one(CommandInput)
        await wait_for(pilot, lambda: app.screen is palette and field.region.height > 0)
        assert not command_list.visible  # the last query's hits: hidden, not shown
        await pilot.press(*"undo")
        SlowDiscovery.released.set()
        await wait_for(pilot, lambda: command_list.visible and command_list.option_count > 0)
        assert field.value == "undo"
        assert _listed(command_list)[0].startswith("/undo")


async def test_built_ahead_the_first_opening_shows_the_palette_built():
    app = _KeptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        palette = await _built_ahead(pilot, app)
        field = palette.query_one(CommandInput)
        assert not isinstance(app.screen, CommandPalette)  # built, not shown
        assert field.size.width > 0  # and laid out at the app's size
        assert app.theme == DEFAULT_THEME
        opened, command_list = await _open_listed(pilot, app)
        assert opened is palette and opened.query_one(CommandInput) is field
        await pilot.press(*"undo", "enter")
        await wait_for(pilot, lambda: app.ran == ["/undo"])


async def test_the_app_keeps_one_palette_and_builds_it_while_the_user_pauses(project):
    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await wait_for(
            pilot,
            lambda: (
                app.is_screen_installed(PALETTE_SCREEN)
                and app.get_screen(PALETTE_SCREEN).is_running
                and bool(app.get_screen(PALETTE_SCREEN).query(CommandList))  # composed
            ),
            timeout=30,
        )
        built = app.get_screen(PALETTE_SCREEN)
        command_list = built.query_one(CommandList)
        for _ in range(2):
            await pilot.press("ctrl+p")
            await wait_for(pilot, lambda: app.screen is built)
            field = built.query_one(CommandInput)
            await pilot.press(*"context show")
            await wait_for(
                pilot,
                lambda: (
                    command_list.visible and _listed(command_list)[0].startswith("/context show")
                ),
            )
            assert field.value == "context show"
            await _close(pilot, app)


async def test_built_ahead_the_first_opening_lays_nothing_out():
    """Its first frame is drawn from the layout made ahead, as a later opening's is."""
    app = _KeptApp()
    app.COMMANDS = {SlowDiscovery}
    SlowDiscovery.released = asyncio.Event()
    async with app.run_test(size=(100, 30)) as pilot:
        palette = await _built_ahead(pilot, app)
        command_list = palette.query_one(CommandList)
        laid_out: list[bool] = []
        refresh_layout = palette._refresh_layout

        def counting(size=None, scroll=False):  # type: ignore[no-untyped-def]
            laid_out.append(palette._layout_required)
            return refresh_layout(size, scroll)

        palette._refresh_layout = counting  # type: ignore[method-assign]
        await pilot.press("ctrl+p")
        field = palette.query_one(CommandInput)
        await wait_for(pilot, lambda: app.screen is palette and field.region.height > 0)
        await pilot.pause()
        assert not any(laid_out)  # shown, and no frame of it laid the screen out
        assert not command_list.visible  # the search is still under way
        SlowDiscovery.released.set()
        await wait_for(pilot, lambda: command_list.visible and command_list.option_count > 0)


async def test_a_palette_closed_while_it_mounts_ahead_is_left_alone():
    """The app shutting down between the palette's mount and its layout: building it
    ahead stops there, without an error that would fail the app's exit."""
    app = _KeptApp()
    async with app.run_test(size=(100, 30)):
        palette = kept_palette(app)
        get_screen = app._get_screen

        def closing_after_mount(screen):  # type: ignore[no-untyped-def]
            got, mounted = get_screen(screen)

            async def mounted_then_closed() -> None:
                await mounted
                await got._close_messages()

            return got, mounted_then_closed()

        app._get_screen = closing_after_mount  # type: ignore[method-assign]
        await mount_ahead(app, palette)
        assert not palette.is_running
        assert app._exception is None


async def test_the_loading_indicator_redraws_only_while_the_palette_is_shown_busy():
    """Textual's indicator redraws itself 16 times a second from its mount: the kept
    palette's runs while a slow search shows it, never while the palette is hidden."""
    from textual.widgets import LoadingIndicator

    app = _KeptApp()
    async with app.run_test(size=(100, 30)) as pilot:
        palette = await _built_ahead(pilot, app)
        indicator = palette.query_one(LoadingIndicator)
        assert indicator.auto_refresh is None  # built ahead, hidden: still
        await _open_listed(pilot, app)
        assert indicator.auto_refresh is None  # shown, its search done
        palette._show_busy = True  # as a search past its busy countdown does
        await wait_for(pilot, lambda: indicator.auto_refresh is not None)
        assert indicator.has_class("--visible")
        await _close(pilot, app)  # hidden while busy
        await wait_for(pilot, lambda: indicator.auto_refresh is None)
        assert not palette._show_busy
        await _open_listed(pilot, app)
        assert indicator.auto_refresh is None
