"""Every keystroke lands where the user meant it (docs/usage.md, "Where keys go").

The real workspace over a real ledger. A click selects or acts and leaves the
keyboard where it was; a sentence typed after it (one key at a time, or in one
burst as a paste without bracketed paste or keys queued while the app is busy
arrive) lands in the prompt whole, first letter included, and changes nothing
in the ledger: messages, sessions, STATE, the journal of edits (the redo chain)
and the trash. A pane's letter acts only alone; keys typed as a question opens
never reach the screen behind it.
"""

from __future__ import annotations

import asyncio
import importlib

import pytest
from textual import events

from slop_tui.ui import keyroute
from slop_tui.ui.keyroute import TEXT_RUN
from slop_tui.ui.screens.dialogs import ConfirmScreen
from slop_tui.ui.widgets.anchors import StatePane
from slop_tui.ui.widgets.blocks import AnswerBlock
from slop_tui.ui.widgets.conversation import ConversationView
from slop_tui.ui.widgets.groups import GroupList
from slop_tui.ui.widgets.keybar import KeyBar
from slop_tui.ui.widgets.preview import ContextPreview
from slop_tui.ui.widgets.prompt import PromptArea
from tests import test_app
from tests.fakeserver import Reply, wait_for
from tests.test_app import started
from tests.test_app_actions import SIZE, click_offset, make_app, openai_env, palette_at, seed
from tests.test_commands_edits import fingerprint, live_groups

project = test_app.project  # the fixture: a temporary project folder, no provider keys

# Each starts with a letter some pane binds: d (drop), r (reply), c (copy), e (edit
# STATE), j (the preview's JSON), w (wrap); `[` and `]` change the window.
SENTENCES = (
    "do the docs next",
    "redo the unit tests",
    "can you check",
    "edit [this] ]] please",
    "just wrap it",
)
NAMES = {" ": "space", "/": "slash", "[": "left_square_bracket", "]": "right_square_bracket"}


def burst(app, text: str) -> None:
    """Keys as a terminal delivers a burst: all queued before the app handles one."""
    for ch in text:
        app.post_message(events.Key(NAMES.get(ch, ch), ch))


async def settle(pilot, rounds: int = 3) -> None:
    for _ in range(rounds):
        await pilot.pause(TEXT_RUN / 2)


async def one_at_a_time(pilot, text: str) -> None:
    """Keys typed one at a time, each handled before the next comes. A typist's keys
    come well inside `TEXT_RUN` of each other; the pilot's, on a loaded machine, can
    come later than that (each press waits for the app to be idle), and a pane's
    letter would then act alone. The run's window is widened while they are typed:
    this types a run, whatever the machine's pace (the window itself is tested with
    `d` acting alone)."""
    window = keyroute.TEXT_RUN
    keyroute.TEXT_RUN = 30.0
    try:
        for ch in text:
            await pilot.press(NAMES.get(ch, ch))
            await pilot.pause()
    finally:
        keyroute.TEXT_RUN = window
    await settle(pilot)


def prompt_text(app) -> str:
    return app.workspace_screen.query_one(PromptArea).text


async def click_each_pane(pilot, app) -> list[tuple[str, object]]:
    """(what, click) for every pane a user may click before typing."""
    groups = app.query_one(GroupList)

    async def group_row():
        await pilot.click(GroupList, offset=click_offset(groups, 1))

    async def message():
        await pilot.click(app.query(AnswerBlock).last(), offset=(2, 0))

    async def state():
        await pilot.click(StatePane, offset=(2, 0))

    async def preview():
        await pilot.click(ContextPreview, offset=(2, 2))

    async def footer_gap():
        bar = app.query_one(KeyBar)
        await pilot.click(KeyBar, offset=(bar.size.width - 20, 0))  # between keys

    async def conversation_gap():
        await pilot.click("#conversation", offset=(1, 0))

    return [
        ("group row", group_row),
        ("message", message),
        ("STATE", state),
        ("preview", preview),
        ("footer", footer_gap),
        ("conversation", conversation_gap),
    ]


async def test_a_sentence_after_a_click_on_any_pane_lands_in_the_prompt_whole(project):
    await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 5)])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        before = await fingerprint(ws)
        panes = await click_each_pane(pilot, app)
        for i, (what, click) in enumerate(panes):
            # Every sentence, in a burst and one key at a time, after clicks on the panes.
            for how, sentence in (
                ("burst", SENTENCES[i % len(SENTENCES)]),
                ("burst", SENTENCES[(i + 1) % len(SENTENCES)]),
                ("one at a time", SENTENCES[(i + 2) % len(SENTENCES)]),
            ):
                app.workspace_screen.query_one(PromptArea).text = ""
                await click()
                await settle(pilot)
                # The keyboard stays in the prompt; a click in the conversation gives
                # it the scrolling keys (it binds no letter).
                expected = ConversationView if what in ("message", "conversation") else PromptArea
                assert isinstance(app.focused, expected), (what, app.focused)
                if how == "burst":
                    burst(app, sentence)
                    await settle(pilot)
                else:
                    await one_at_a_time(pilot, sentence)
                assert prompt_text(app) == sentence, (what, how, prompt_text(app))
                assert await fingerprint(ws) == before, (what, how, sentence)
        assert await ws.ledger.edits() == []


async def test_a_click_on_a_mark_acts_and_the_sentence_after_it_still_lands_whole(project):
    await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 4)])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        groups = app.query_one(GroupList)
        x, y = click_offset(groups, 1)
        await pilot.click(GroupList, offset=(x - 4, y))  # the mark: drop
        await wait_for(pilot, lambda: len(app._notifications) > 0)
        dropped = await fingerprint(ws)
        assert len(await ws.ledger.edits()) == 1
        burst(app, "do the docs next")
        await settle(pilot)
        assert prompt_text(app) == "do the docs next"
        assert await fingerprint(ws) == dropped  # the click's drop, and nothing more


async def test_the_scratchpad_is_an_editor_a_click_there_types_there(project):
    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await pilot.click("#scratchpad", offset=(3, 1))
        await settle(pilot)
        assert type(app.focused).__name__ == "SafeTextArea"
        burst(app, "note to self")
        await settle(pilot)
        assert "note to self" in app.focused.text
        assert prompt_text(app) == ""


async def test_a_letter_in_a_list_reached_by_keyboard_acts_alone_and_a_run_is_text(project):
    await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 4)])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        before = await fingerprint(ws)
        for sentence in SENTENCES:
            for typed in (burst, None):
                app.workspace_screen.query_one(PromptArea).text = ""
                await pilot.press("f3")
                await wait_for(pilot, lambda: app.query_one(GroupList).has_focus)
                if typed is burst:
                    burst(app, sentence)
                    await settle(pilot)
                else:
                    await one_at_a_time(pilot, sentence)
                assert prompt_text(app) == sentence
                assert await fingerprint(ws) == before, sentence
        # Alone, `d` is the list's: it drops the highlighted group once the run is over.
        await pilot.press("f3", "end")
        await wait_for(pilot, lambda: app.query_one(GroupList).has_focus)
        await pilot.press("d")
        assert await fingerprint(ws) == before  # it waits for a second key first
        await asyncio.sleep(TEXT_RUN * 2)
        await settle(pilot)
        assert len(await ws.ledger.edits()) == 1
        # A key that is not text lets the waiting letter act first: d, then Down.
        await pilot.press("d", "down")
        await settle(pilot)
        assert len(await ws.ledger.edits()) == 2


async def test_keys_typed_as_a_question_opens_never_reach_the_screen_behind(
    project, fake_llm, monkeypatch
):
    openai_env(monkeypatch, fake_llm)
    await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 4)])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        await pilot.press("f3", "end", "delete")  # one group to the trash
        await wait_for(pilot, lambda: len(app._notifications) > 0)
        await pilot.press("ctrl+z", "f2")  # its journal now has a redo to keep
        await settle(pilot)
        before = await fingerprint(ws)
        redo = [e.id for e in await ws.ledger.edits()]
        burst(app, "/trash empty")
        app.post_message(events.Key("enter", "\r"))
        burst(app, "yy")
        app.post_message(events.Key("enter", "\r"))
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await settle(pilot)
        assert isinstance(app.screen, ConfirmScreen)  # the question is still asked
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        await settle(pilot)
        assert fake_llm.chat_requests == []  # no turn was sent behind the dialog
        assert await fingerprint(ws) == before  # the trash, the redo chain: kept
        assert [e.id for e in await ws.ledger.edits()] == redo
        assert prompt_text(app) == ""


async def test_keys_typed_behind_a_command_land_in_order_after_it(project):
    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        burst(app, "/context window 3")
        app.post_message(events.Key("enter", "\r"))
        burst(app, "and then the next line")
        await wait_for(pilot, lambda: prompt_text(app) == "and then the next line")
        assert (await app.workspace.current()).window_size == 3


async def test_a_prompt_sent_in_a_burst_is_sent_as_typed(project, fake_llm, monkeypatch):
    openai_env(monkeypatch, fake_llm)
    fake_llm.enqueue(Reply(text="ok"))
    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        burst(app, "first line")
        app.post_message(events.Key("enter", "\r"))
        burst(app, "typed while it starts")
        await wait_for(pilot, lambda: len(fake_llm.chat_requests) == 1, timeout=10)
        await wait_for(pilot, lambda: prompt_text(app) == "typed while it starts")
        assert fake_llm.last.messages[-1]["content"].endswith("first line")


async def test_a_letter_waiting_as_the_app_closes_does_nothing(project):
    """A pane's letter is held for TEXT_RUN; the app closing meanwhile (its screens
    gone when the wait ends) voids it instead of failing."""
    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        await pilot.press("f3")
        await wait_for(pilot, lambda: app.focused is app.query_one(GroupList))
        app.post_message(events.Key("d", "d"))
        await wait_for(pilot, lambda: app.keys.holding, timeout=TEXT_RUN)
        held = app.keys._held
        stack = app._screen_stacks[app._current_mode]  # the stack itself, not a copy
        shown = list(stack)
        stack.clear()  # as at the app's end, before the wait is over
        try:
            await app.keys.act_now()
        finally:
            stack.extend(shown)
        assert held is not None and not app.keys.holding
        assert await live_groups(app.workspace) == [1]  # the letter did not act


# Before the side panes are filled (the first frames show the conversation and the
# prompt; the panes' contents follow): a command sent with Enter, typing, and a pane key (f3 and the group
# list's `up`), as a user types them at start-up.
EARLY_COMMAND = "/context window 3"
EARLY_KEYS = ["h", "i", "f3", "up", "up"]


async def _outcome(app, pilot) -> tuple:
    await settle(pilot)
    return (
        prompt_text(app),
        type(app.focused).__name__,
        app.query_one(GroupList).highlighted,
        (await app.workspace.current()).window_size,
    )


async def _type_early_keys(pilot) -> None:
    burst(pilot.app, EARLY_COMMAND)
    pilot.app.post_message(events.Key("enter", "\r"))
    await pilot.press(*EARLY_KEYS)


async def test_keys_typed_before_the_side_panes_are_filled_land_as_they_do_after(
    project, monkeypatch
):
    from slop_tui.ui.screens.workspace import WorkspacePanes

    await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 6)], window=5)
    # After the panes: the keys typed once the workspace is ready.
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await _type_early_keys(pilot)
        await wait_for(pilot, lambda: app.query_one(GroupList).has_focus)
        after = await _outcome(app, pilot)
        await app.workspace.ledger.set_window(app.workspace.session, 5)
    assert after[:2] == ("hi", "GroupList") and after[3] == 3

    # Before the panes: the same keys while the side panes wait (held here).
    real = WorkspacePanes.show_side_panes
    reached, go = asyncio.Event(), asyncio.Event()

    async def held(self):
        reached.set()
        await go.wait()
        await real(self)

    monkeypatch.setattr(WorkspacePanes, "show_side_panes", held)
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await wait_for(pilot, reached.is_set)
        screen = app.workspace_screen
        assert app.query(AnswerBlock)  # the conversation is there, the panes are empty
        assert not screen.side_panes_filled and not app.query(GroupList)  # not mounted yet
        burst(app, EARLY_COMMAND)
        await settle(pilot)
        assert prompt_text(app) == EARLY_COMMAND  # typing lands at once
        app.post_message(events.Key("enter", "\r"))
        await pilot.press(*EARLY_KEYS)
        await settle(pilot)
        # The rest waits for the panes, in order: nothing sent, nothing typed yet.
        assert prompt_text(app) == EARLY_COMMAND
        assert (await app.workspace.current()).window_size == 5
        go.set()
        await started(pilot)
        await wait_for(pilot, lambda: app.query_one(GroupList).has_focus)
        assert await _outcome(app, pilot) == after


# The first-run panel (an empty folder, no provider: the demo's welcome) shows over
# the prompt; the user did not ask for it, and typing goes on behind it.


def first_run_shown(app) -> bool:
    from slop_tui.ui.screens.firstrun import FirstRunScreen

    return any(isinstance(screen, FirstRunScreen) for screen in app.screen_stack)


async def first_run_panel(pilot) -> None:
    app = pilot.app
    await wait_for(pilot, lambda: app.ready and first_run_shown(app), timeout=30)
    await pilot.pause()


async def test_a_burst_typed_on_the_first_run_panel_lands_in_the_prompt_whole(project):
    """Every key of a burst (all queued before the app handles the first) lands in the
    prompt, in order: the first one closed the panel. The Escape typed after it is
    the workspace's (nothing to cancel), not the panel's."""
    app = make_app(project)  # an empty project, no provider keys: the first-run panel
    async with asyncio.timeout(60), app.run_test(size=(120, 40)) as pilot:
        await first_run_panel(pilot)
        burst(app, "hello there")
        app.post_message(events.Key("escape", "\x1b"))
        await wait_for(pilot, lambda: prompt_text(app) == "hello there", timeout=5)
        await settle(pilot)
        assert prompt_text(app) == "hello there"
        assert not first_run_shown(app) and app.screen is app.workspace_screen
        assert isinstance(app.focused, PromptArea)  # the next keys go on there


async def test_the_first_run_panels_keys_act_and_the_typing_after_them_lands(project):
    """↓ scrolls a panel taller than the screen and leaves it up; Escape closes it, and
    the keys typed right behind it (one burst) land in the prompt."""
    from textual.containers import VerticalScroll

    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=(80, 24)) as pilot:
        await first_run_panel(pilot)
        box = app.screen.query_one(VerticalScroll)
        await wait_for(pilot, lambda: box.max_scroll_y > 0 and box.scroll_y == 0)
        app.post_message(events.Key("down", None))
        await wait_for(pilot, lambda: box.scroll_y > 0)
        await settle(pilot)
        assert first_run_shown(app) and prompt_text(app) == ""  # still up, nothing typed
        app.post_message(events.Key("escape", "\x1b"))
        burst(app, "hi")
        await wait_for(pilot, lambda: prompt_text(app) == "hi", timeout=5)
        assert not first_run_shown(app)


async def test_a_letter_the_first_run_panel_binds_acts_as_bound(project):
    """`[keymap]` may give the panel's close a letter: that letter closes it, as
    bound (it is not typed); the typing behind it lands in the prompt."""
    (project / "no-config.toml").write_text('[keymap]\nfirstrun_close = "escape,enter,q"\n')
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=(120, 40)) as pilot:
        await first_run_panel(pilot)
        assert not app._notifications  # the id is known: no warning
        burst(app, "quick")
        await wait_for(pilot, lambda: prompt_text(app) == "uick", timeout=5)
        assert not first_run_shown(app)


async def test_enter_on_the_first_run_panel_closes_it_and_sends_nothing(project):
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=(120, 40)) as pilot:
        await first_run_panel(pilot)
        app.post_message(events.Key("enter", "\r"))
        burst(app, "ok")
        await wait_for(pilot, lambda: prompt_text(app) == "ok", timeout=5)
        assert not first_run_shown(app)
        ws = app.workspace
        assert not app.turns.busy and not await ws.ledger.session_messages(ws.session)


async def test_a_paste_on_the_first_run_panel_lands_in_the_prompt_with_the_keys_after_it(
    project,
):
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=(120, 40)) as pilot:
        await first_run_panel(pilot)
        app.post_message(events.Paste("explain this "))
        burst(app, "folder")
        await wait_for(pilot, lambda: prompt_text(app) == "explain this folder", timeout=5)
        assert not first_run_shown(app)


# A key that opens a dialog (F5 the sessions, F6 the search): the keys typed right
# behind it are the dialog's, though its action reads the ledger before showing it.


def press_and_type(app, key: str, text: str) -> None:
    """`key`, then `text` right behind it: one burst, queued before the app handles one."""
    app.post_message(events.Key(key, None))
    burst(app, text)


def up(app, dialog: type) -> bool:
    return isinstance(app.screen, dialog) and app.screen.is_mounted


@pytest.mark.parametrize(
    ("key", "dialog", "field_id", "text"),
    [
        ("f5", "slop_tui.ui.screens.dialogs:SessionScreen", "name", "newsess"),
        ("f6", "slop_tui.ui.screens.search:SearchScreen", "query", "needle"),
    ],
)
async def test_text_typed_right_behind_a_dialogs_key_lands_in_its_field(
    project, key, dialog, field_id, text
):
    """F5 then a name: the sessions dialog's Name field holds it; F6 then a query: the
    search field (the search runs on it). The prompt behind stays empty."""
    from textual.widgets import Input

    module, _, name = dialog.partition(":")
    screen_type = getattr(importlib.import_module(module), name)
    await seed(project, [("where is the needle", "in the haystack")])
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        await started(pilot)
        press_and_type(app, key, text)
        await wait_for(pilot, lambda: up(app, screen_type), timeout=5)
        field = app.screen.query_one(f"#{field_id}", Input)
        await wait_for(pilot, lambda: field.value == text, timeout=5)
        await settle(pilot)
        assert field.value == text and app.focused is field
        assert prompt_text(app) == ""


async def test_keys_kept_for_a_dialog_land_while_messages_keep_coming(project):
    """Something that keeps a message queued for the app all the time (here a callback
    that queues the next one before it yields) does not hold the kept keys back: each
    goes behind what is queued when it is due, not once every queue is empty."""
    from textual.widgets import Input

    from slop_tui.ui.screens.dialogs import SessionScreen

    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ticks = {"on": True, "count": 0}

        async def tick() -> None:
            if ticks["on"]:
                ticks["count"] += 1
                app.call_later(tick)
                await asyncio.sleep(0.005)

        app.call_later(tick)
        press_and_type(app, "f5", "newsess")
        await wait_for(pilot, lambda: up(app, SessionScreen), timeout=10)
        field = app.screen.query_one("#name", Input)
        await wait_for(pilot, lambda: field.value == "newsess", timeout=10)
        assert app.message_queue_size > 0  # the app's queue was never empty meanwhile
        ticks["on"] = False
        await settle(pilot)
        assert field.value == "newsess" and prompt_text(app) == ""
        assert ticks["count"] > 20


async def test_a_paste_right_behind_f5_lands_in_the_name_field_with_the_keys_after_it(project):
    from textual.widgets import Input

    from slop_tui.ui.screens.dialogs import SessionScreen

    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        await started(pilot)
        app.post_message(events.Key("f5", None))
        app.post_message(events.Paste("pasted-"))
        burst(app, "name")
        await wait_for(pilot, lambda: up(app, SessionScreen), timeout=5)
        field = app.screen.query_one("#name", Input)
        await wait_for(pilot, lambda: field.value == "pasted-name", timeout=5)
        assert prompt_text(app) == ""


async def test_escape_right_behind_f5_closes_the_dialog_once_it_is_up(project, monkeypatch):
    from slop_tui.ui.screens.dialogs import SessionScreen

    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        before = await fingerprint(ws)
        session = ws.session
        shown = []
        push = app.push_screen
        monkeypatch.setattr(
            app, "push_screen", lambda s, *a, **k: shown.append(s) or push(s, *a, **k)
        )
        app.post_message(events.Key("f5", None))
        app.post_message(events.Key("escape", "\x1b"))
        await wait_for(pilot, lambda: shown and not shown[0].is_attached, timeout=5)
        await settle(pilot)
        assert [type(s) for s in shown] == [SessionScreen]  # it opened, and Escape closed it
        assert app.screen is app.workspace_screen and prompt_text(app) == ""
        assert ws.session == session and await fingerprint(ws) == before


async def test_keys_behind_an_action_that_shows_no_dialog_land_in_the_prompt(project, monkeypatch):
    """The MCP dialog with no server configured: `/mcp list` fails and a notice says
    so instead; the keys kept for the dialog land where they would have, at once (not
    when the wait for a dialog gives up)."""
    monkeypatch.setattr(keyroute, "DIALOG_WAIT", 60.0, raising=False)
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        await started(pilot)
        app.action_mcp()
        burst(app, "still typing")
        await wait_for(pilot, lambda: prompt_text(app) == "still typing", timeout=5)
        assert app.screen is app.workspace_screen
        assert any("no MCP server" in n.message for n in app._notifications)


async def test_keys_kept_for_a_dialog_that_never_shows_land_after_a_while(project, monkeypatch):
    """A dialog that does not show (its read hangs) does not keep the keys forever."""
    monkeypatch.setattr(keyroute, "DIALOG_WAIT", 0.5, raising=False)
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        await started(pilot)
        never = asyncio.Event()

        async def hangs(*_args, **_kwargs):
            await never.wait()

        monkeypatch.setattr(app.workspace.ledger, "list_sessions", hangs)
        press_and_type(app, "f5", "later")
        await pilot.pause(0.2)
        assert prompt_text(app) == ""  # kept, for a while
        await wait_for(pilot, lambda: prompt_text(app) == "later", timeout=5)
        assert app.screen is app.workspace_screen


async def test_keys_right_behind_f1_go_to_the_help_which_ignores_letters(project):
    """The help has no field: the letters typed behind F1 go to it, not to the prompt
    behind it."""
    from slop_tui.ui.screens.help import HelpScreen

    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        await started(pilot)
        press_and_type(app, "f1", "hello")
        await wait_for(pilot, lambda: up(app, HelpScreen), timeout=5)
        await settle(pilot)
        assert up(app, HelpScreen) and prompt_text(app) == ""
        await pilot.press("escape")
        await wait_for(pilot, lambda: app.screen is app.workspace_screen, timeout=5)
        assert prompt_text(app) == ""


async def open_and_settle(pilot, key: str, dialog: type):
    """The app started, `dialog` opened by `key` and at rest: the dialog."""
    app = pilot.app
    await started(pilot)
    app.post_message(events.Key(key, None))
    await wait_for(pilot, lambda: up(app, dialog), timeout=5)
    await settle(pilot)
    return app.screen


async def test_text_typed_right_behind_escape_on_the_help_lands_in_the_prompt(project):
    """Escape closes the help; "hi" typed right behind it (one burst) is the prompt's,
    not dropped by the help on its way out."""
    from slop_tui.ui.screens.help import HelpScreen

    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        await open_and_settle(pilot, "f1", HelpScreen)
        press_and_type(app, "escape", "hi")
        await wait_for(pilot, lambda: prompt_text(app) == "hi", timeout=5)
        assert app.screen is app.workspace_screen and isinstance(app.focused, PromptArea)


async def test_text_typed_behind_a_dialogs_key_that_leaves_it_up_stays_in_the_dialog(project):
    """ctrl+n on the sessions dialog with no name leaves it up (it asks for a name):
    the name typed right behind the key lands in its field, after the key acted."""
    from textual.widgets import Input, Static

    from slop_tui.ui.screens.dialogs import SessionScreen

    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        dialog = await open_and_settle(pilot, "f5", SessionScreen)
        field = dialog.query_one("#name", Input)
        press_and_type(app, "ctrl+n", "fresh")
        await wait_for(pilot, lambda: field.value == "fresh", timeout=5)
        await settle(pilot)
        assert app.screen is dialog and field.value == "fresh" and prompt_text(app) == ""
        assert "Type a name" in str(dialog.query_one("#error", Static).render())


async def test_text_typed_right_behind_enter_in_the_palette_lands_where_the_command_left_it(
    project,
):
    """Enter runs the highlighted command and closes the palette; the keys typed right
    behind it land in the prompt (an action: the left pane hidden) or in the dialog
    the command opens (the sessions dialog's Name field), none in the closing palette."""
    from textual.widgets import Input

    from slop_tui.ui.screens.dialogs import SessionScreen

    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await palette_at(pilot, "Toggle the left pane")
        await settle(pilot)
        press_and_type(app, "enter", "abc")
        await wait_for(pilot, lambda: prompt_text(app) == "abc", timeout=5)
        assert app.screen is app.workspace_screen and not app.query_one("#left").display

        await palette_at(pilot, "Sessions…")
        await settle(pilot)
        press_and_type(app, "enter", "newsess")
        await wait_for(pilot, lambda: up(app, SessionScreen), timeout=5)
        field = app.screen.query_one("#name", Input)
        await wait_for(pilot, lambda: field.value == "newsess", timeout=5)
        await settle(pilot)
        assert field.value == "newsess" and prompt_text(app) == "abc"
