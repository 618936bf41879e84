"""The workspace at every size: panes that give way, the footer naming hidden panes,
the header saying what the app does, banners and the output panel that clear, text
shown as typed (no markup), dialogs that fit at 80x24.

Each test runs the real `SlopApp` over a real ledger in a temporary project.
"""

from __future__ import annotations

import asyncio
import re

from textual.command import CommandInput, CommandList, CommandPalette
from textual.content import Content

from slop_tui.events import Notice, TextChunk, ToolCallEvent
from slop_tui.ui.layout import MIN_CONVERSATION
from slop_tui.ui.screens.base import DialogBox
from slop_tui.ui.screens.help import binding_rows
from slop_tui.ui.text import escape_markup, keep_state_lines, literal
from slop_tui.ui.widgets.blocks import GroupBlock
from slop_tui.ui.widgets.groups import GroupList
from slop_tui.ui.widgets.keybar import KeyBar
from tests import test_app
from tests.fakeserver import wait_for
from tests.test_app import started
from tests.test_app_actions import TWO, make_app, seed

project = test_app.project

LONG_PROMPT = "Explain how the tokenizer splits unicode identifiers and numbers"


def footer(app) -> list[str]:
    return [k.description for k in app.query_one(KeyBar).shown_keys if k.description]


def visible(app, pane: str) -> bool:
    return app.query_one(pane).display


# -- text shown as typed -----------------------------------------------------------


def test_escape_markup_and_literal_keep_every_bracket():
    for text in ("/message list [N]", "[PATH]", "a [b]x[/b]", "x\\[y]", "[/x] \x1b[31m"):
        shown = Content.from_markup(escape_markup(text)).plain
        assert shown == literal(text).plain
        assert "[" in shown and "\x1b" not in shown


def test_state_section_keeps_its_lines_and_prose_does_not():
    text = "Some prose\nwraps here\n\n### STATE\nGoal: a\nContext: b\n\n## Next\nx"
    out = keep_state_lines(text).split("\n")
    assert out[:2] == ["Some prose", "wraps here"]  # prose: Markdown may join it
    assert out[4:6] == ["Goal: a  ", "Context: b  "]  # STATE: a hard break per line
    assert out[-2:] == ["## Next", "x"]


async def test_palette_shows_bracketed_arguments(project):
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        for query, usage in (("message list", "[N]"), ("export", "[PATH]")):
            app.screen.query_one(CommandInput).value = query
            commands = app.screen.query_one(CommandList)

            def shown(commands=commands, usage=usage) -> bool:
                prompts = [
                    str(commands.get_option_at_index(i).prompt)
                    for i in range(commands.option_count)
                ]
                return any(usage in p for p in prompts)

            await wait_for(pilot, shown)
        await pilot.press("escape")


async def test_ctrl_c_notice_is_plain_text(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press("f3")  # the group list: ctrl+c is not an editor's copy there
        await pilot.press("ctrl+c")
        await wait_for(pilot, lambda: any("quit" in n.message for n in app._notifications))
        (note,) = [n for n in app._notifications if "quit" in n.message]
        assert note.message == "Press ctrl+q to quit the app" and "[" not in note.message


async def test_help_headings_are_human_names(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        titles = set(binding_rows(app))
        assert {"Groups pane", "Prompt", "STATE pane", "Scratchpad"} <= titles
        # No widget class name ("GroupList", "PromptArea") is a heading.
        assert not [t for t in titles if re.fullmatch(r"(?:[A-Z][a-z0-9]+){2,}", t)]


# -- panes at every size -----------------------------------------------------------


async def test_narrow_footer_names_the_pane_keys_and_panes_give_way(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(pilot)
        assert not visible(app, "#left") and not visible(app, "#right")
        keys = footer(app)
        # The prompt's own keys, then help, then the keys that open the hidden panes.
        assert keys.index("Help") < keys.index("Left pane") < keys.index("Right pane")
        assert keys.index("Right pane") < (keys.index("Prompt") if "Prompt" in keys else 99)

        await pilot.press("f8")
        await wait_for(pilot, lambda: visible(app, "#right"))
        centre = app.query_one("#centre")
        await wait_for(pilot, lambda: centre.size.width >= MIN_CONVERSATION)
        assert "Right pane" not in footer(app)[:4]  # shown now: its key goes last

        await pilot.press("f7")  # both do not fit: the right pane gives way
        await wait_for(pilot, lambda: visible(app, "#left") and not visible(app, "#right"))
        assert centre.size.width >= MIN_CONVERSATION
        assert any("gave way" in n.message for n in app._notifications)


async def test_side_panes_take_a_share_of_the_width(project):
    await seed(project, [(LONG_PROMPT, "an answer")])
    widths = {}
    shown = {}
    for size in ((120, 40), (200, 50)):
        app = make_app(project)
        async with app.run_test(size=size) as pilot:
            await started(pilot)
            right, left = app.query_one("#right"), app.query_one("#left")
            await wait_for(pilot, lambda right=right: right.size.width > 0)
            widths[size[0]] = (left.outer_size.width, right.outer_size.width)
            groups = app.query_one(GroupList)
            await wait_for(pilot, lambda groups=groups: groups.option_count == 1)
            strip = groups.render_line(0)
            shown[size[0]] = "".join(segment.text for segment in strip)
    assert widths[200][0] > widths[120][0] and widths[200][1] > widths[120][1]

    # Group titles use the width they have: more of the prompt at 200 columns.
    def prefix(line: str) -> int:
        return max(n for n in range(len(LONG_PROMPT) + 1) if LONG_PROMPT[:n] in line)

    assert prefix(shown[200]) >= 25 and prefix(shown[200]) >= prefix(shown[120]) + 8


async def test_group_list_numbers_groups_and_the_conversation_keeps_the_id(project):
    gids = await seed(project, [("one", "a"), ("two", "b"), ("three", "c")])
    assert gids[1] - gids[0] > 1  # ids are message ids: they jump
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        groups = app.query_one(GroupList)
        await wait_for(pilot, lambda: groups.option_count == 3)
        assert [groups.row_text(g).split()[1] for g in gids] == ["1", "2", "3"]
        await wait_for(pilot, lambda: len(list(app.query(GroupBlock))) == 3)
        blocks = {b.group_id: b for b in app.query(GroupBlock)}
        header = str(blocks[gids[2]]._header.render())
        assert header.startswith(f"#3 · id {gids[2]}"), header


# -- the header and banners ----------------------------------------------------------


class ScriptedOrchestrator:
    """Stands in for the orchestrator: sends the events a test releases, one by one."""

    def __init__(self) -> None:
        self.events: asyncio.Queue = asyncio.Queue()

    async def run_turn(self, text, on_event, *, reply_to=None) -> None:
        while (event := await self.events.get()) is not None:
            await on_event(event)

    async def upkeep(self, on_event) -> None:
        return None

    async def aclose(self) -> None:
        return None


async def test_header_says_what_the_app_is_doing(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(pilot)
        await wait_for(pilot, lambda: app.sub_title.startswith("idle · "))
        # At 80 columns the whole line fits: the window is never cut to "windo…".
        assert "win 5" in app.sub_title
        assert len(app.title) + len(app.sub_title) + 3 <= 80 - 12

        script = ScriptedOrchestrator()
        app.turns.orchestrator = script
        app.turns.run_turn("go")
        await wait_for(pilot, lambda: app.sub_title.startswith("streaming · "))
        await script.events.put(Notice(text="429. Retrying in 3 s", retry_in=3.0))
        await wait_for(pilot, lambda: app.sub_title.startswith("retrying in 3 s · "))
        await wait_for(pilot, lambda: app.sub_title.startswith("retrying in 2 s · "), 5)
        await script.events.put(TextChunk(text="Hello"))
        await wait_for(pilot, lambda: app.sub_title.startswith("streaming · "))
        await script.events.put(ToolCallEvent(call_id="c1", name="read_file"))
        await wait_for(pilot, lambda: app.sub_title.startswith("running tools · "))
        await script.events.put(None)
        await wait_for(pilot, lambda: app.sub_title.startswith("idle · ") and not app.turns.busy)


async def test_provider_error_banner_clears_with_a_new_provider_or_session(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        banner = app.query_one("#banner")
        for command in ("/provider demo", "/session activate elsewhere"):
            app.workspace_screen.show_banner("openai provider is not configured", cause="turn")
            assert banner.has_class("-shown")
            await app.run_command(command)
            await wait_for(pilot, lambda: not banner.has_class("-shown"))
        # A banner about something else (the project's config) stays.
        app.workspace_screen.show_banner("config sets keys; ignored until trusted", cause="config")
        await app.run_command("/provider demo")
        await pilot.pause()
        assert banner.has_class("-shown")


async def test_output_panel_closes_at_the_next_command(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        output = app.query_one("#output")
        await app.run_command("/message list")
        await wait_for(pilot, lambda: output.has_class("-shown"))
        await app.run_command("/undo")  # an edit: its report is a notice, the panel goes
        await wait_for(pilot, lambda: not output.has_class("-shown"))
        assert any("trash" in n.message.lower() for n in app._notifications)
        await app.run_command("/context show")
        await wait_for(pilot, lambda: output.has_class("-shown"))
        source = app.query_one("#output-text").source
        # Line-by-line output keeps its line breaks (a hard break per line).
        assert "  \n" in source
        await app.run_command("/state set Goal: x")
        await wait_for(pilot, lambda: not output.has_class("-shown"))


# -- dialogs at 80x24 ----------------------------------------------------------------


async def test_dialogs_fit_and_scroll_at_80x24(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=(80, 24)) as pilot:
        await started(pilot)
        for key, name in (("f4", "ProviderScreen"), ("f5", "SessionScreen")):
            await pilot.press(key)
            await wait_for(pilot, lambda name=name: type(app.screen).__name__ == name)
            await pilot.pause()
            box = app.screen.query_one(DialogBox)
            region = box.region
            assert region.x >= 0 and region.y >= 0
            assert region.right <= 80 and region.bottom <= 24
            # Every button can be reached: on screen, or by scrolling the box.
            for button in app.screen.query("Button"):
                box.scroll_to_widget(button, animate=False)
                await pilot.pause()
                assert box.region.contains_region(button.region), (name, button.label)
            await pilot.press("escape")
            await wait_for(pilot, lambda name=name: type(app.screen).__name__ != name)


async def test_first_run_panel_fits_and_scrolls_at_80x24(project):
    from slop_tui.ui.screens.firstrun import FirstRunScreen

    app = make_app(project)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_for(pilot, lambda: isinstance(app.screen, FirstRunScreen))
        await pilot.pause()
        box = app.screen.query_one(DialogBox)
        assert box.region.right <= 80 and box.region.bottom <= 24
        assert box.max_scroll_y > 0  # taller than the screen: it scrolls
        await wait_for(pilot, lambda: box.scroll_y == 0)  # the welcome is shown first
        button = app.screen.query_one("#demo")
        box.scroll_end(animate=False)
        await pilot.pause()
        assert box.region.contains_region(button.region)


async def test_palette_filter_does_not_restyle_until_the_highlight_rests(project):
    """Typing "z" puts "Theme: solarized-dark" first: the theme is previewed only once
    the highlight rests, not in the frame of the key (a restyle of the whole app)."""
    from slop_tui.ui.palette import PREVIEW_REST

    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        theme = app.theme
        await pilot.press("ctrl+p")
        await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
        app.screen.query_one(CommandInput).value = "solarized"
        commands = app.screen.query_one(CommandList)
        await wait_for(
            pilot,
            lambda: (
                commands.option_count > 0
                and "solarized" in str(commands.get_option_at_index(0).prompt)
            ),
        )
        assert app.theme == theme  # not yet
        await wait_for(pilot, lambda: app.theme != theme, timeout=PREVIEW_REST + 2)
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.theme == theme)
