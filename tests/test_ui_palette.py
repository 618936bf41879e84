"""The palette reaches every slash command, every app action and the theme picker."""

from __future__ import annotations

import asyncio
import contextvars

from textual.app import App, ComposeResult
from textual.command import CommandInput, CommandList, CommandPalette, Hits
from textual.content import Content
from textual.widgets import Static

from slop_tui.commands import TABLE
from slop_tui.ui.palette import (
    MAX_HITS,
    MEASURED,
    THEME_PREFIX,
    MeasuredOnce,
    SlopCommands,
    SlopPalette,
    needs_arguments,
)
from slop_tui.ui.themes import DEFAULT_THEME, load_themes, register_themes
from tests.fakeserver import wait_for


class _PaletteApp(App):
    """Implements the palette contract and records every call."""

    COMMANDS = {SlopCommands}

    def __init__(self) -> None:
        super().__init__()
        register_themes(self, load_themes(None))
        self.theme = DEFAULT_THEME
        self.ran: list[str] = []
        self.prefilled: list[str] = []
        self.chosen: list[str] = []
        self.acted: list[str] = []

    def compose(self) -> ComposeResult:
        yield Static("palette test")

    def palette_actions(self):
        return [("Drop or restore group", "Soft-drop the selected group.", self._drop)]

    def _drop(self) -> None:
        self.acted.append("drop")

    async def run_command(self, text: str) -> None:
        self.ran.append(text)

    def prefill_prompt(self, text: str) -> None:
        self.prefilled.append(text)

    async def choose_theme(self, name: str) -> None:
        self.chosen.append(name)


async def _search(app: App, query: str) -> list:
    provider = SlopCommands(app.screen)
    await provider.startup()
    if not query:
        return [hit async for hit in provider.discover()]
    return [hit async for hit in provider.search(query)]


async def _open_and_type(pilot, app: App, text: str, keys: bool = False) -> CommandList:
    if not isinstance(app.screen, CommandPalette):
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
    if keys:
        await pilot.press(*text)
    else:
        # One Input.Changed instead of a keypress per character keeps the test fast.
        app.screen.query_one(CommandInput).value = text
    command_list = app.screen.query_one(CommandList)
    await wait_for(
        pilot,
        lambda: (
            command_list.option_count > 0
            and command_list.highlighted is not None
            and text.split()[-1].lower() in str(command_list.get_option_at_index(0).prompt).lower()
        ),
    )
    return command_list


async def test_search_finds_session_commands_and_context_show():
    app = _PaletteApp()
    async with app.run_test():
        session = await _search(app, "session")
        context = await _search(app, "context show")
    titles = [hit.text for hit in session]
    assert {c.usage for c in TABLE.commands if c.name == "session"} <= set(titles)
    best = max(context, key=lambda hit: hit.score)
    assert best.text == "/context show [--json] [--editor]"


async def test_a_search_lists_only_the_best_hits_best_first():
    app = _PaletteApp()
    async with app.run_test():
        broad = await _search(app, "e")  # a letter nearly every title has
        everything = await _search(app, "")
    assert len(everything) > MAX_HITS
    assert len(broad) == MAX_HITS
    scores = [hit.score for hit in broad]
    assert scores == sorted(scores, reverse=True)


async def test_discover_lists_every_command_action_and_theme():
    app = _PaletteApp()
    async with app.run_test():
        titles = [hit.text for hit in await _search(app, "")]
        themes = sorted(app.available_themes)
    assert titles[0] == "Drop or restore group"
    assert [c.usage for c in TABLE.commands] == titles[1 : 1 + len(TABLE.commands)]
    assert titles[1 + len(TABLE.commands) :] == [THEME_PREFIX + name for name in themes]


async def test_help_text_finds_aliases():
    app = _PaletteApp()
    async with app.run_test():
        hits = await _search(app, "quit")
    assert "/exit" in [hit.text for hit in hits]


def test_required_arguments_are_told_apart_from_optional_ones():
    by_label = {c.label: c for c in TABLE.commands}
    assert needs_arguments(by_label["/session activate"])
    assert needs_arguments(by_label["/context window"])
    assert not needs_arguments(by_label["/context show"])
    assert not needs_arguments(by_label["/provider"])
    assert not needs_arguments(by_label["/undo"])


async def test_enter_runs_a_command_without_arguments():
    app = _PaletteApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_and_type(pilot, app, "context show")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.ran == ["/context show"])
        assert app.prefilled == [] and not isinstance(app.screen, CommandPalette)


async def test_enter_prefills_the_prompt_for_a_command_with_arguments():
    app = _PaletteApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_and_type(pilot, app, "session activate")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.prefilled == ["/session activate "])
        assert app.ran == []


async def test_typed_keys_reach_a_command():
    app = _PaletteApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_and_type(pilot, app, "undo", keys=True)
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.ran == ["/undo"])


async def test_enter_runs_an_app_action():
    app = _PaletteApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_and_type(pilot, app, "drop or restore")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.acted == ["drop"])


async def test_theme_preview_is_live_and_escape_restores_it():
    app = _PaletteApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_and_type(pilot, app, "theme slop-light")
        await wait_for(pilot, lambda: app.theme == "slop-light")
        assert isinstance(app.screen, CommandPalette)
        # moving to an entry that is not a theme restores the theme at once
        await _open_and_type(pilot, app, "context show")
        await wait_for(pilot, lambda: app.theme == DEFAULT_THEME)
        await _open_and_type(pilot, app, "theme slop-light")
        await wait_for(pilot, lambda: app.theme == "slop-light")
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.theme == DEFAULT_THEME)
        assert app.chosen == []


async def test_choosing_a_theme_keeps_and_persists_it():
    app = _PaletteApp()
    async with app.run_test(size=(100, 30)) as pilot:
        await _open_and_type(pilot, app, "theme slop-high-contrast")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.chosen == ["slop-high-contrast"])
        await pilot.pause()
        assert app.theme == "slop-high-contrast"


async def test_a_preview_that_rests_after_the_app_exits_does_nothing():
    app = _PaletteApp()
    async with app.run_test():
        provider = SlopCommands(app.screen)
        await provider.startup()
        inside = contextvars.copy_context()  # the app's context, as its timers have it
    assert app.screen_stack == []
    inside.run(provider._show_preview, 0)  # the rest of a palette left open at quit
    assert app.theme == DEFAULT_THEME


# -- the palette the app opens: SlopPalette ---------------------------------------------


class _SlopPaletteApp(_PaletteApp):
    """Opens `SlopPalette`, as SlopApp does."""

    def action_command_palette(self) -> None:
        self.push_screen(SlopPalette(id="--command-palette"))


async def _open_ready(pilot, app: App) -> CommandList:
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, SlopPalette))
    await wait_for(pilot, lambda: app.screen.has_class("-ready"))
    command_list = app.screen.query_one(CommandList)
    await wait_for(pilot, lambda: command_list.option_count > 0)
    await pilot.pause()
    return command_list


async def _close(pilot, app: App) -> None:
    await pilot.press("escape")
    await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def test_a_palette_opened_twice_does_not_measure_its_options_again():
    MEASURED.clear()
    app = _SlopPaletteApp()
    async with app.run_test(size=(100, 30)) as pilot:
        before = MeasuredOnce.measured
        first = await _open_ready(pilot, app)
        count = first.option_count
        measured = MeasuredOnce.measured - before
        assert measured >= count  # every option measured once, at the list's width
        await _close(pilot, app)
        again = MeasuredOnce.measured
        second = await _open_ready(pilot, app)
        assert second.option_count == count
        assert MeasuredOnce.measured == again  # found by their text and width
        # what was measured is what Textual measures: the same lines on screen
        assert [second.get_option_at_index(i).prompt.plain for i in range(count)] == [
            first.get_option_at_index(i).prompt.plain for i in range(count)
        ]
        await _close(pilot, app)
        await pilot.resize_terminal(70, 30)  # another width: measured again
        await pilot.pause()
        await _open_ready(pilot, app)
        assert MeasuredOnce.measured > again


async def test_a_measured_height_is_the_height_textual_measures():
    MEASURED.clear()
    app = _SlopPaletteApp()
    async with app.run_test(size=(60, 30)) as pilot:
        command_list = await _open_ready(pilot, app)
        width = command_list.scrollable_content_region.width - 4  # the options' padding
        for i in range(command_list.option_count):
            prompt = command_list.get_option_at_index(i).prompt
            assert isinstance(prompt, MeasuredOnce)
            plain = Content(prompt.plain, list(prompt.spans))
            assert prompt.get_height(command_list.styles, width) == plain.get_height(
                command_list.styles, width
            )


async def test_the_palette_covers_the_workspace_in_every_theme():
    """A plain background (not the workspace behind it, blended); the commands' text
    stands out from the box they are listed in."""
    app = _SlopPaletteApp()
    async with app.run_test(size=(80, 24)) as pilot:
        for name in load_themes(None).names:  # every theme in themes/
            app.theme = name
            await _open_ready(pilot, app)
            palette = app.screen
            box = palette.query_one("#--container")
            assert palette.styles.background.a == 1, name
            text = palette.query_one(CommandList).get_component_styles("option-list--option")
            ink = text.color if text.color.a else palette.styles.color
            assert abs(ink.brightness - box.styles.background.brightness) > 0.4, name
            assert palette.query_one(CommandInput).region.height > 0, name
            await _close(pilot, app)


class SlowDiscovery(SlopCommands):
    """Discovery that waits for `released`: the palette before its commands arrive."""

    released: asyncio.Event | None = None

    async def discover(self) -> Hits:
        assert self.released is not None
        await self.released.wait()
        async for hit in super().discover():
            yield hit


async def test_the_field_is_drawn_before_the_commands_are_gathered():
    app = _SlopPaletteApp()
    app.COMMANDS = {SlowDiscovery}
    SlowDiscovery.released = asyncio.Event()
    async with app.run_test(size=(80, 24)) as pilot:
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, SlopPalette))
        field = app.screen.query_one(CommandInput)
        await wait_for(pilot, lambda: field.region.height > 0)
        assert not app.screen.has_class("-ready")
        await pilot.press(*"undo")  # typed before the list: kept, and searched
        SlowDiscovery.released.set()
        await wait_for(pilot, lambda: app.screen.has_class("-ready"))
        assert field.value == "undo"
