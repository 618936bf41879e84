"""Pilot tests for every workspace action, each checked against the ledger.

Every action is a key, a click or a palette entry in the real `SlopApp` over a
real ledger in a temporary project; afterwards the test reads the ledger and,
where the action changes what the model sees, the next assembled request
(`Workspace.prompt`, what the app sends) or the body the fake server received.
Several actions share one app run where they belong together: each start of
the whole workspace costs about a second.
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Awaitable, Callable

from textual.command import CommandInput, CommandList, CommandPalette

from slop_tui.context import render_prompt
from slop_tui.context.plan import MARKS
from slop_tui.records import NewMessage
from slop_tui.ui.app import ApprovalScreen, SlopApp
from slop_tui.ui.screens.dialogs import ConfirmScreen, ProviderScreen, SessionScreen
from slop_tui.ui.screens.help import HelpScreen
from slop_tui.ui.screens.search import SearchScreen
from slop_tui.ui.widgets.anchors import ScratchpadEditor, StatePane
from slop_tui.ui.widgets.conversation import AnswerBlock, ConversationView, GroupBlock
from slop_tui.ui.widgets.gauge import TokenGauge
from slop_tui.ui.widgets.groups import FLAG_INTERRUPTED, GroupList
from slop_tui.ui.widgets.preview import ContextPreview
from slop_tui.ui.widgets.prompt import PromptArea
from slop_tui.workspace import KEY_SESSION, NEXT_PROMPT
from tests import test_app
from tests.fakeserver import FakeToolCall, Reply, wait_for
from tests.test_app import started
from tests.workspace_fixtures import open_workspace

MARK_DROPPED, MARK_WAITING = MARKS["dropped"], MARKS["waiting"]
project = test_app.project  # the fixture: a temporary project folder, no provider keys
SIZE = (140, 44)
TWO = [("alpha question", "alpha answer"), ("beta question", "beta answer")]

# -- helpers ------------------------------------------------------------------------


async def seed(root, groups, session: str = "default_session", window: int = 5) -> list[int]:
    """Write (prompt, answer) groups to the project's ledger before the app opens it."""
    ws = await open_workspace(root, session)
    try:
        gids = []
        for prompt, answer in groups:
            user = await ws.ledger.append_user(session, prompt, strategy="openai")
            await ws.ledger.append(
                session,
                user.group_id,
                [NewMessage(role="assistant", content=answer, strategy="openai")],
            )
            gids.append(user.group_id)
        await ws.ledger.set_window(session, window)
        await ws.ledger.set_setting(KEY_SESSION, session)
        return gids
    finally:
        await ws.close()


def make_app(root) -> SlopApp:
    return SlopApp(db=str(root / ".slop" / "slop.db"), user_themes=False, blink=False)


async def eventually(pilot, check: Callable[[], Awaitable[bool]], timeout: float = 5.0) -> None:
    """`wait_for` for an async condition (a ledger read)."""
    deadline = time.monotonic() + timeout
    while not await check():
        if time.monotonic() > deadline:
            raise TimeoutError(f"condition not reached within {timeout} s")
        await pilot.pause(0.02)


async def _is(coro, expected) -> bool:
    return await coro == expected


async def _count(coro) -> int:
    return len(await coro)


async def statuses(app: SlopApp, gid: int) -> set[str]:
    ws = app.workspace
    return {m.status for m in await ws.ledger.group_messages(ws.session, gid)}


async def sent_groups(app: SlopApp) -> set[int]:
    """The stored groups whose messages the next request carries (the next prompt's own
    group is not stored yet)."""
    ws = app.workspace
    prompt = await ws.next_request()
    stored = {m.group_id for m in prompt.messages if m.group_id is not None}
    return stored - {await ws.ledger.next_message_id()}


async def window_groups(app: SlopApp) -> set[int]:
    """The stored groups in the window of the next request (the plan's): N - 1 of them,
    the next prompt's group being one of the N."""
    ws = app.workspace
    plan = await ws.plan(next_prompt=NEXT_PROMPT)
    return set(plan.window_groups) - {await ws.ledger.next_message_id()}


async def window_size(ws) -> int:
    return (await ws.current()).window_size


async def scratchpad(ws) -> str:
    return (await ws.current()).scratchpad


async def state_text(ws) -> str | None:
    state = await ws.ledger.current_state(ws.session)
    return state.content if state else None


def turn_running(app: SlopApp) -> bool:
    return app.turns.busy or any(w.group == "turn" and not w.is_finished for w in app.workers)


async def finished(pilot, text: str, timeout: float = 10.0) -> None:
    """Wait until the turn that sent `text` has ended (its user row is in the ledger)."""
    app = pilot.app

    async def done() -> bool:
        if turn_running(app):
            return False
        ws = app.workspace
        rows = await ws.ledger.session_messages(ws.session)
        return any(m.role == "user" and m.content == text for m in rows)

    await eventually(pilot, done, timeout)


async def submit(pilot, text: str) -> None:
    """Put a line in the prompt (at once, not key by key) and press Enter."""
    app = pilot.app
    app.workspace_screen.action_focus_prompt()
    app.query_one("#prompt").text = text
    await pilot.press("enter")


async def palette(pilot, text: str) -> None:
    """Open the command palette (ctrl+p), search `text` and run the best hit."""
    app = pilot.app
    await palette_at(pilot, text)
    await pilot.press("enter")
    await wait_for(pilot, lambda: not isinstance(app.screen, CommandPalette))


async def palette_at(pilot, text: str) -> None:
    """The command palette open (ctrl+p), searched for `text`, its best hit highlighted."""
    app = pilot.app
    await pilot.press("ctrl+p")
    await wait_for(pilot, lambda: isinstance(app.screen, CommandPalette))
    app.screen.query_one(CommandInput).value = text
    commands = app.screen.query_one(CommandList)
    await wait_for(
        pilot,
        lambda: (
            commands.option_count > 0
            and commands.highlighted is not None
            and text.lower() in str(commands.get_option_at_index(0).prompt).lower()
        ),
    )


def click_offset(widget, row: int) -> tuple[int, int]:
    """An offset inside `widget` on line `row` of its content."""
    region = widget.content_region
    return region.x - widget.region.x + 4, region.y - widget.region.y + row


async def click_when_shown(pilot, selector: str) -> None:
    """Click a widget of the current screen once it has been laid out."""
    app = pilot.app

    def shown() -> bool:
        found = app.screen.query(selector)
        return bool(found) and found.first().region.width > 0

    await wait_for(pilot, shown)
    await pilot.click(selector)


def openai_env(monkeypatch, fake_llm) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)


# -- groups: show, drop, restore, remove, undo, window ------------------------------


async def test_click_shows_a_group_d_drops_and_restores_it_and_the_palette_drops_it(project):
    gids = await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 4)])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        groups = app.query_one(GroupList)
        view = app.query_one(ConversationView)
        gauge = app.query_one(TokenGauge)
        target = gids[1]
        assert await sent_groups(app) == set(gids)

        await pilot.click(GroupList, offset=click_offset(groups, 1))
        await wait_for(pilot, lambda: groups.highlighted == 1)
        assert isinstance(app.focused, PromptArea)  # a click selects; the keyboard stays
        assert view.block(target) is not None  # shown in the conversation
        # While a group is selected the gauge shows what dropping it would save.
        await wait_for(pilot, lambda: bool(gauge.projection))

        await pilot.press("f3")  # the list's keys are the keyboard's, from F3
        await wait_for(pilot, lambda: groups.has_focus and groups.highlighted == 1)
        await pilot.press("d")
        await eventually(pilot, lambda: _is(statuses(app, target), {"dropped"}))
        assert await statuses(app, gids[0]) == {"completed"}
        assert await sent_groups(app) == {gids[0], gids[2]}
        assert "question 2" not in render_prompt(await app.workspace.prompt())
        await wait_for(pilot, lambda: groups.row_text(target).startswith(MARK_DROPPED))

        await pilot.press("d")
        await eventually(pilot, lambda: _is(statuses(app, target), {"completed"}))
        assert await sent_groups(app) == set(gids)
        await wait_for(pilot, lambda: not groups.row_text(target).startswith(MARK_DROPPED))

        # The palette entry acts on the highlighted group as well.
        await palette(pilot, "Drop or restore the highlighted group")
        await eventually(pilot, lambda: _is(statuses(app, target), {"dropped"}))
        assert await sent_groups(app) == {gids[0], gids[2]}


async def test_delete_moves_a_group_to_the_trash_and_ctrl_y_brings_it_back(project):
    first, second = await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        groups = app.query_one(GroupList)
        await pilot.press("f3", "home")
        assert groups.highlighted_group.group_id == first

        await pilot.press("delete")
        await eventually(pilot, lambda: _is(_count(ws.ledger.group_messages(ws.session, first)), 0))
        await wait_for(pilot, lambda: [g.group_id for g in groups.groups] == [second])
        assert await sent_groups(app) == {second}
        assert len(await ws.ledger.trashed_message_ids()) == 2  # in the trash, not deleted
        # The announcement names the one key that brings it back.
        said = [n.message for n in app._notifications]
        assert any("ctrl+y brings it back" in m and f"group {first}" in m for m in said), said
        await pilot.press("ctrl+y")
        await wait_for(pilot, lambda: [g.group_id for g in groups.groups] == [first, second])
        assert await sent_groups(app) == {first, second}


async def test_brackets_change_the_window_size_and_ctrl_z_undoes_the_last_group(project):
    gids = await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 4)], window=0)
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        groups = app.query_one(GroupList)
        assert await window_groups(app) == set(gids) and "window all" in app.sub_title

        # ] at the full history (the largest window) changes nothing.
        await pilot.press("f3", "]")
        await pilot.pause()
        assert await window_size(ws) == 0
        # [ there starts just below it: one group fewer than the next request has (the
        # 3 groups and the next prompt's).
        await pilot.press("[")
        await eventually(pilot, lambda: _is(window_size(ws), 3))
        assert await window_groups(app) == set(gids[1:])
        # It left the strict window: listed in one line until a summary covers it, not
        # sent (the window is a view: the ledger keeps it).
        await wait_for(pilot, lambda: groups.row_text(gids[0]).startswith(MARK_WAITING))
        assert await sent_groups(app) == set(gids[1:])
        assert "window 3" in app.sub_title
        # What the header shows, not only the attribute (it is redrawn on its own).
        await pilot.pause()
        title = app.query_one("HeaderTitle").render()
        assert "window 3" in str(title) and "window all" not in str(title)

        await pilot.press("]")
        await eventually(pilot, lambda: _is(window_size(ws), 4))
        assert await window_groups(app) == set(gids)
        await wait_for(pilot, lambda: groups.in_window(gids[0]))

        # A window of 2: the next prompt's group and the newest one.
        await pilot.press("[", "[")
        await eventually(pilot, lambda: _is(window_size(ws), 2))
        await pilot.pause()
        assert await window_groups(app) == {gids[2]}

        await pilot.press("ctrl+z")
        await eventually(
            pilot, lambda: _is(_count(ws.ledger.group_messages(ws.session, gids[2])), 0)
        )
        assert len(await ws.ledger.session_messages(ws.session)) == 4
        await wait_for(pilot, lambda: [g.group_id for g in groups.groups] == gids[:2])
        assert await window_groups(app) == {gids[1]}
        # ctrl+y (redo) brings it back, from the empty prompt too.
        await pilot.press("f2", "ctrl+y")
        await wait_for(pilot, lambda: [g.group_id for g in groups.groups] == gids)
        assert await window_groups(app) == {gids[2]}
        # [ stops at one group, the next prompt's (0 would be the full history).
        await pilot.press("f3", "[", "[", "[")
        await eventually(pilot, lambda: _is(window_size(ws), 1))
        await pilot.pause()
        assert await window_size(ws) == 1 and await window_groups(app) == set()


# -- turns: cancel, errors, provider switch, approvals, /reply ------------------------


async def test_escape_cancels_a_turn_dismisses_the_error_banner_and_ctrl_q_keeps_a_partial(
    fake_llm, project, monkeypatch
):
    openai_env(monkeypatch, fake_llm)
    # 6 s of reply after the first words: Esc comes long before the end, even on a busy
    # machine; a cancelled stream stops at the server's next write.
    slow = Reply(text=["Partial ", "answer"] + [" more"] * 60, delay=0.1)
    fake_llm.enqueue(slow, Reply(status=401, error_message="bad key"), slow)
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        view = app.query_one(ConversationView)
        await submit(pilot, "a slow question")

        def streaming() -> bool:
            live = view.live_block
            answer = live.live_answer if live is not None else None
            return answer is not None and "answer" in answer.text

        await wait_for(pilot, streaming, timeout=10)
        assert app.turns.busy
        await pilot.press("escape")
        await finished(pilot, "a slow question", timeout=5)
        rows = await ws.ledger.session_messages(ws.session)
        assert [(m.role, m.status) for m in rows] == [
            ("user", "completed"),
            ("assistant", "interrupted"),
        ]
        assert rows[1].content.startswith("Partial answer")
        assert not rows[1].content.endswith(" more" * 60)  # cut, not finished
        gid = rows[0].group_id
        groups = app.query_one(GroupList)
        await wait_for(pilot, lambda: groups.row_text(gid)[1] == FLAG_INTERRUPTED)
        # Shown, but never replayed to the model.
        assert "Partial answer" not in render_prompt(await ws.prompt())

        # A provider error shows the banner; Esc (nothing is running) dismisses it.
        banner = app.query_one("#banner")
        assert not banner.display
        await submit(pilot, "hello")
        await finished(pilot, "hello")
        assert banner.has_class("-shown") and banner.display
        assert "bad key" in str(banner.render())
        rows = await ws.ledger.session_messages(ws.session)
        assert [m.content for m in rows if m.role == "user"] == ["a slow question", "hello"]
        assert not [m for m in rows if m.role == "assistant" and m.status == "completed"]
        await pilot.press("escape")
        await wait_for(pilot, lambda: not banner.has_class("-shown"))
        assert not banner.display
        # A click dismisses it too.
        app.workspace_screen.show_banner("another problem")
        await pilot.pause()
        await pilot.click("#banner")
        await wait_for(pilot, lambda: not banner.has_class("-shown"))

        # ctrl+q during a reply quits cleanly and keeps the partial answer.
        await submit(pilot, "one more")
        await wait_for(pilot, streaming, timeout=10)
        await pilot.press("ctrl+q")
    ws = await open_workspace(project)
    try:
        rows = await ws.ledger.session_messages(ws.session)
        assert [(m.role, m.status) for m in rows[-2:]] == [
            ("user", "completed"),
            ("assistant", "interrupted"),
        ]
        assert rows[-2].content == "one more" and rows[-1].content.startswith("Partial answer")
    finally:
        await ws.close()


async def provider_of(ws) -> tuple[str | None, str | None]:
    sess = await ws.current()
    return sess.provider, sess.model


async def test_f4_switches_to_gemini_and_the_next_request_goes_there(
    fake_llm, project, monkeypatch
):
    openai_env(monkeypatch, fake_llm)
    monkeypatch.setenv("GEMINI_API_KEY", "g")
    monkeypatch.setenv("GEMINI_BASE_URL", fake_llm.gemini_base_url)
    ws = await open_workspace(project)
    user = await ws.ledger.append_user(ws.session, "read it", strategy="openai")
    tool_row = NewMessage(
        role="tool",
        content="file text",
        tool_call_id="c1",
        tool_name="read_file",
        strategy="openai",
    )
    answer = NewMessage(role="assistant", content="read", strategy="openai")
    await ws.ledger.append(ws.session, user.group_id, [tool_row, answer])
    await ws.close()
    fake_llm.enqueue(Reply(text="hello from gemini"))
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        assert "openai" in app.sub_title
        await pilot.press("f4")
        await wait_for(pilot, lambda: isinstance(app.screen, ProviderScreen))
        dialog = app.screen
        await pilot.press("down")
        await wait_for(pilot, lambda: dialog.highlighted_name == "gemini")
        # The OpenAI tool row is one the Gemini provider will not see.
        notice = str(dialog.query_one("#notice").render())
        assert "1 tool message" in notice and "gemini" in notice
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, ProviderScreen))
        await eventually(pilot, lambda: _is(provider_of(ws), ("gemini", "gemini-2.5-flash")))
        await wait_for(pilot, lambda: "gemini" in app.sub_title)

        await submit(pilot, "now on gemini")
        await finished(pilot, "now on gemini")
        request = fake_llm.last_chat
        assert request.provider == "gemini"
        assert request.path.endswith("/models/gemini-2.5-flash:streamGenerateContent")
        assert "now on gemini" in json.dumps(request.contents)
        rows = await ws.ledger.session_messages(ws.session)
        assert (rows[-1].content, rows[-1].strategy) == ("hello from gemini", "gemini")


async def test_approval_dialog_allow_once_always_and_deny(fake_llm, project, monkeypatch):
    openai_env(monkeypatch, fake_llm)

    def write(name: str) -> Reply:
        return Reply(tool_calls=[FakeToolCall("write_file", {"path": name, "content": name})])

    fake_llm.enqueue(
        write("once.txt"),
        Reply(text="wrote once"),
        write("session.txt"),
        Reply(text="wrote for the session"),
        write("again.txt"),
        Reply(text="wrote without asking"),
        Reply(tool_calls=[FakeToolCall("execute_bash", {"command": "echo x > denied.txt"})]),
        Reply(text="was denied"),
    )
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        asked: list[str] = []
        original = app.turns.ask_approval

        async def recording(call):
            asked.append(call.name)
            return await original(call)

        app.turns.ask_approval = recording  # the orchestrator takes it on the first turn

        for text, button in [
            ("first", "#allow"),
            ("second", "#allow_session"),
            ("third", None),  # write_file is allowed for the session now
            ("fourth", "#deny"),
        ]:
            await submit(pilot, text)
            if button is not None:
                await wait_for(pilot, lambda: isinstance(app.screen, ApprovalScreen), timeout=10)
                await click_when_shown(pilot, button)
            await finished(pilot, text)

        assert asked == ["write_file", "write_file", "execute_bash"]
        assert (project / "once.txt").read_text() == "once.txt"
        assert (project / "session.txt").read_text() == "session.txt"
        assert (project / "again.txt").read_text() == "again.txt"
        assert not (project / "denied.txt").exists()
        tools = [m for m in await ws.ledger.session_messages(ws.session) if m.role == "tool"]
        assert [m.tool_name for m in tools] == ["write_file"] * 3 + ["execute_bash"]
        assert all(m.status == "completed" for m in tools[:3])
        assert "did not approve" in tools[3].content and tools[3].status != "completed"


async def test_reply_command_sends_the_text_in_the_reply_lane(fake_llm, project, monkeypatch):
    openai_env(monkeypatch, fake_llm)
    first, second = await seed(project, TWO)
    fake_llm.enqueue(Reply(text="answering the follow-up"))
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await submit(pilot, f"/reply {first} what about alpha?")
        await finished(pilot, "what about alpha?")
        ws = app.workspace
        sent = [m["content"] for m in fake_llm.last_chat.messages if m["role"] == "user"]
        assert any(t.endswith("what about alpha?") for t in sent)
        assert not any("/reply" in t for t in sent)
        assert (await ws.current()).lane == f"reply:{first}"
        rows = await ws.ledger.session_messages(ws.session)
        new = [m for m in rows if m.group_id not in (first, second)]
        assert [(m.role, m.content, m.lane) for m in new] == [
            ("user", "what about alpha?", f"reply:{first}"),
            ("assistant", "answering the follow-up", f"reply:{first}"),
        ]
        await wait_for(pilot, lambda: f"lane reply:{first}" in app.sub_title)


# -- sessions and search ------------------------------------------------------------


async def test_f5_session_dialog_new_clone_switch_and_remove(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        groups = app.query_one(GroupList)

        async def dialog() -> SessionScreen:
            await pilot.press("f5")
            await wait_for(pilot, lambda: isinstance(app.screen, SessionScreen))
            return app.screen

        async def names() -> list[str]:
            return sorted(s.name for s in await ws.ledger.list_sessions())

        # New: the name field has the focus; a new name and Enter create and switch.
        await dialog()
        await pilot.press(*"fresh", "enter")
        await wait_for(pilot, lambda: ws.session == "fresh")
        assert await ws.ledger.get_setting(KEY_SESSION) == "fresh"
        await wait_for(pilot, lambda: len(groups.groups) == 0)

        # Switch: highlight a session, Enter.
        screen = await dialog()
        screen.query_one("#sessions").highlighted = screen.names.index("default_session")
        await pilot.press("enter")
        await wait_for(pilot, lambda: ws.session == "default_session")
        await wait_for(pilot, lambda: len(groups.groups) == 2)

        # Clone the current session.
        await dialog()
        await pilot.press(*"copy", "ctrl+l")
        await wait_for(pilot, lambda: ws.session == "copy")
        assert await names() == ["copy", "default_session"]
        clone = await ws.ledger.session_messages("copy")
        assert [m.content for m in clone] == [text for pair in TWO for text in pair]

        # Remove: ctrl+t asks first (the confirm dialog's keys are in test_ui_dialogs).
        # Unsaved scratchpad edits of the removed session must not bring it back.
        pad = app.query_one(ScratchpadEditor)
        pad.debounce = 30
        await pilot.press("f9", *"gone")
        screen = await dialog()
        screen.query_one("#sessions").highlighted = screen.names.index("copy")
        await pilot.press("ctrl+t")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await click_when_shown(pilot, "#yes")
        await wait_for(pilot, lambda: not isinstance(app.screen, SessionScreen | ConfirmScreen))
        await eventually(pilot, lambda: _is(names(), ["default_session"]))
        await pilot.pause(0.2)
        assert await names() == ["default_session"]
        assert await ws.ledger.get_session("copy") is None
        assert ws.session == "default_session"
        assert await ws.ledger.session_messages("copy") == []
        # In the trash, not gone: ctrl+y brings the session back.
        await pilot.press("f3", "ctrl+y")
        await eventually(pilot, lambda: _is(names(), ["copy", "default_session"]))


async def _scratchpad_of(ws, session: str) -> str:
    return (await ws.ledger.session_or_default(session)).scratchpad


async def test_click_on_a_session_switches_and_f6_jumps_to_a_hit_in_another(project):
    await seed(project, [("other work", "done")], session="other")
    first, _second = await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        groups = app.query_one(GroupList)
        sessions = app.query_one("#session-list")
        offset = click_offset(sessions, sessions.names.index("other"))
        await pilot.click("#session-list", offset=offset)
        await wait_for(pilot, lambda: ws.session == "other")
        assert await ws.ledger.get_setting(KEY_SESSION) == "other"
        await wait_for(pilot, lambda: len(groups.groups) == 1)

        # F6 works from a text area (TextArea binds f6 itself), searches every session,
        # and unsaved scratchpad edits go with the session that is left.
        pad = app.query_one(ScratchpadEditor)
        pad.debounce = 30
        await pilot.press("f9", *"note")
        assert pad.dirty
        await pilot.press("f6")
        await wait_for(pilot, lambda: isinstance(app.screen, SearchScreen))
        search = app.screen
        await pilot.press(*"alpha", "enter")
        await wait_for(pilot, lambda: search.searched == "alpha" and bool(search.hits))
        assert {(h.session, h.group_id) for h in search.hits} == {("default_session", first)}
        await pilot.press("enter")
        await wait_for(pilot, lambda: not isinstance(app.screen, SearchScreen))
        await wait_for(pilot, lambda: ws.session == "default_session")
        assert await ws.ledger.get_setting(KEY_SESSION) == "default_session"
        await eventually(pilot, lambda: _is(_scratchpad_of(ws, "other"), "note"))
        assert pad.text == "" and pad.session == "default_session"
        view = app.query_one(ConversationView)
        await wait_for(
            pilot,
            lambda: (
                groups.highlighted_group is not None
                and groups.highlighted_group.group_id == first
                and view.block(first) is not None
            ),
        )


# -- copy and export ----------------------------------------------------------------


async def test_copy_a_message_a_group_the_scratchpad_the_context_and_export(project, monkeypatch):
    import slop_tui.ui.clipboard as clipboard

    monkeypatch.setattr(clipboard, "SYSTEM_TOOLS", ())  # no wl-copy, xclip, ...: OSC 52
    await seed(project, TWO)
    ws = await open_workspace(project)
    await ws.ledger.set_scratchpad(ws.session, "- [ ] the plan")
    await ws.close()
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        view = app.query_one(ConversationView)
        await wait_for(pilot, lambda: len(view.query(AnswerBlock)) == 2)

        view.query(AnswerBlock).last().focus()
        await pilot.press("c")
        await wait_for(pilot, lambda: app.clipboard == "beta answer")

        view.query(GroupBlock).last().focus()
        await pilot.press("c")
        await wait_for(pilot, lambda: "beta question" in app.clipboard)
        assert "beta answer" in app.clipboard and "alpha" not in app.clipboard

        await palette(pilot, "Copy the scratchpad")
        await wait_for(pilot, lambda: app.clipboard == "- [ ] the plan")

        await palette(pilot, "Copy the whole context")
        expected = render_prompt(await app.workspace.prompt())
        await wait_for(pilot, lambda: app.clipboard == expected)
        assert "the plan" in expected and "beta answer" in expected

        # Export: the palette entries write SESSION.md and SESSION.json in a folder of
        # their own, never next to the project's files.
        exports = project / ".slop" / "exports"
        md, js = exports / "default_session.md", exports / "default_session.json"
        await palette(pilot, "Export session as Markdown")
        await wait_for(pilot, md.exists)
        await palette(pilot, "Export session as JSON")
        await wait_for(pilot, js.exists)
        assert "alpha question" in md.read_text() and "the plan" in md.read_text()
        assert "beta answer" in json.dumps(json.loads(js.read_text()))
        assert not (project / "default_session.md").exists()
        # Exporting again asks first: "Keep it" (n) leaves the file as it is ...
        md.write_text("old")
        await palette(pilot, "Export session as Markdown")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        assert str(md) in app.screen.title_text
        await pilot.press("n")
        await wait_for(pilot, lambda: not isinstance(app.screen, ConfirmScreen))
        assert md.read_text() == "old"
        # ... and "Overwrite" (y) replaces it.
        await palette(pilot, "Export session as Markdown")
        await wait_for(pilot, lambda: isinstance(app.screen, ConfirmScreen))
        await click_when_shown(pilot, "#yes")  # `y` answers only once the question is readable
        await wait_for(pilot, lambda: md.read_text() != "old")
        assert "alpha question" in md.read_text()


# -- help, palette, keymap ----------------------------------------------------------


async def test_f1_help_and_the_palette_reach_commands_and_actions(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await pilot.press("f1")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        doc = app.screen.document
        for binding_id in (
            "cancel_turn",
            "window_up",
            "undo",
            "groups_drop_toggle",
            "groups_remove",
            "state_edit",
            "scratchpad_load_model",
            "approval_allow",
            "session_new",
            "toggle_left",
            "side_wider",
        ):
            assert f"`{binding_id}`" in doc, binding_id
        assert "/context drop" in doc and "/reply" in doc
        await pilot.press("escape")
        await wait_for(pilot, lambda: not isinstance(app.screen, HelpScreen))

        # A slash command from the palette: its output is shown above the prompt.
        output = app.query_one("#output")
        await palette(pilot, "session list")
        await wait_for(pilot, lambda: output.has_class("-shown"))
        source = app.query_one("#output-text").source
        assert "default_session" in source and "alpha question" in source
        await pilot.press("escape")
        await wait_for(pilot, lambda: not output.has_class("-shown"))

        # An app action from the palette.
        await palette(pilot, "Toggle the left pane")
        await wait_for(pilot, lambda: not app.query_one("#left").display)


async def test_keymap_in_the_project_config_remaps_a_binding(project):
    (project / ".slop").mkdir()
    (project / ".slop" / "config.toml").write_text('[keymap]\nhelp = "f12"\n')
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        await pilot.press("f1")  # a pushed screen is on the stack once the key is handled
        await pilot.pause()
        assert not any(isinstance(s, HelpScreen) for s in app.screen_stack)
        await pilot.press("f12")
        await wait_for(pilot, lambda: isinstance(app.screen, HelpScreen))
        row = next(line for line in app.screen.document.splitlines() if "| `help` |" in line)
        assert "f12" in row.lower() and "f1 " not in row.lower()


# -- the right pane: scratchpad, STATE, preview, pane layout -------------------------


async def test_scratchpad_autosaves_after_a_pause_and_quitting_keeps_unsaved_edits(project):
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        pad = app.query_one(ScratchpadEditor)
        pad.debounce = 0.2
        await pilot.press("f9")
        assert pad.area.has_focus
        await pilot.press(*"step 1")
        assert pad.dirty
        await eventually(pilot, lambda: _is(scratchpad(ws), "step 1"))
        assert not pad.dirty
        assert "step 1" in render_prompt(await ws.prompt())

        pad.debounce = 30  # no autosave before the quit
        await pilot.press("enter", *"step 2")
        assert pad.dirty and await scratchpad(ws) == "step 1"
        await pilot.press("ctrl+q")
    ws = await open_workspace(project)
    try:
        assert await scratchpad(ws) == "step 1\nstep 2"
    finally:
        await ws.close()


async def test_model_update_during_unsaved_edits_shows_the_conflict_notice(
    fake_llm, project, monkeypatch
):
    openai_env(monkeypatch, fake_llm)
    gate = threading.Event()
    fake_llm.enqueue(Reply(text="Done.\nSCRATCHPAD: the model's plan\n", gate=gate))
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        pad = app.query_one(ScratchpadEditor)
        pad.debounce = 30  # the edit stays unsaved while the model writes
        await submit(pilot, "plan it")
        await wait_for(pilot, lambda: app.turns.busy and bool(fake_llm.chat_requests), timeout=10)
        await pilot.press("f9", *"my edit")
        assert pad.dirty
        gate.set()
        await finished(pilot, "plan it")
        assert await scratchpad(ws) == "the model's plan"
        await wait_for(pilot, lambda: pad.in_conflict)
        assert pad.text == "my edit"  # nothing overwritten on screen
        notice = pad.query_one("#scratchpad-notice")
        assert notice.display and "the model updated the scratchpad" in str(notice.render())
        # ctrl+r takes the model's version, which the ledger kept.
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: pad.text == "the model's plan" and not pad.in_conflict)
        assert await scratchpad(ws) == "the model's plan"


async def test_editing_state_stores_a_version_the_next_request_uses(fake_llm, project, monkeypatch):
    openai_env(monkeypatch, fake_llm)
    await seed(project, TWO)
    fake_llm.enqueue(Reply(text="on it"))
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        pane = app.query_one(StatePane)
        await pilot.click("#state")
        assert not pane.has_focus  # a click leaves the keyboard in the prompt
        pane.focus()  # the keyboard's way there (Tab)
        await pilot.pause()
        await pilot.press("e")
        await wait_for(pilot, lambda: pane.editing)
        await pilot.press(*"Goal: X", "ctrl+s")
        await eventually(pilot, lambda: _is(state_text(ws), "Goal: X"))
        assert not pane.editing
        await pilot.press("e", "end", *"YZ", "ctrl+s")
        await eventually(pilot, lambda: _is(state_text(ws), "Goal: XYZ"))
        versions = await ws.ledger.state_versions(ws.session)
        assert sorted(v.content for v in versions) == ["Goal: X", "Goal: XYZ"]

        # The context preview shows it, as text and (j) as the provider's JSON body.
        preview = app.query_one(ContextPreview)
        await wait_for(pilot, lambda: "Goal: XYZ" in preview.text)
        app.query_one("#preview-text").focus()  # the keyboard's way there (Tab)
        await pilot.pause()
        await pilot.press("j")
        await wait_for(pilot, lambda: preview.body is not None)
        assert '"messages"' in preview.text and "Goal: XYZ" in preview.text

        await submit(pilot, "go on")
        await finished(pilot, "go on")
        assert "Goal: XYZ" in json.dumps(fake_llm.last_chat.body)


async def test_preview_keys_drop_and_restore_the_map_tree_pages_and_images(project):
    (project / "shop.py").write_text("class ShoppingCart:\n    def add_item(self, sku): pass\n")
    await seed(project, TWO)
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        preview = app.query_one(ContextPreview)
        await wait_for(pilot, lambda: "## Repository Structure" in preview.text)
        assert "## Repository Files" in preview.text
        app.query_one("#preview-text").focus()  # the keyboard's way there (a click keeps it)
        await pilot.pause()
        for key, layer, header in (
            ("m", "repo_map", "## Repository Structure"),
            ("t", "file_tree", "## Repository Files"),
            ("u", "urls", None),
            ("i", "images", None),
        ):
            await pilot.press(key)
            await wait_for(pilot, lambda layer=layer: preview.dropped(layer))
            assert layer in await ws.dropped_layers()
            if header is not None:
                assert header not in preview.text
                assert header not in (await ws.plan()).request.system_text + "".join(
                    m.text for m in (await ws.plan()).request.messages
                )
            await pilot.press(key)
            await wait_for(pilot, lambda layer=layer: not preview.dropped(layer))
            assert layer not in await ws.dropped_layers()
            if header is not None:
                await wait_for(pilot, lambda header=header: header in preview.text)


async def test_pane_keys_hide_resize_and_focus_the_panes(project):
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        left, right = app.query_one("#left"), app.query_one("#right")
        centre = app.query_one("#centre")
        assert app.focused.id == "prompt-area"
        # f7/f8 work from the prompt (a TextArea, which binds f7 itself).
        before = centre.size.width
        await pilot.press("f7")
        await wait_for(pilot, lambda: not left.display and centre.size.width > before)
        await pilot.press("f8")
        await wait_for(pilot, lambda: not right.display)
        await pilot.press("f7", "f8")
        await wait_for(pilot, lambda: left.display and right.display)

        # In the prompt ctrl+arrows move by word; from the groups pane they resize.
        await pilot.press("f3")
        assert app.focused.id == "group-list"
        width = right.outer_size.width
        await pilot.press("ctrl+right")
        await wait_for(pilot, lambda: right.outer_size.width > width)
        await pilot.press("ctrl+left", "ctrl+left")
        await wait_for(pilot, lambda: right.outer_size.width < width)

        # In the prompt alt+arrows resize; ctrl+arrows stay word movement there.
        await pilot.press("f2")
        area = app.query_one("#prompt-area")
        area.insert("two words")
        width = right.outer_size.width
        await pilot.press("alt+right")
        await wait_for(pilot, lambda: right.outer_size.width > width)
        width = right.outer_size.width
        await pilot.press("ctrl+left")
        await pilot.pause()
        assert area.cursor_location == (0, 4) and right.outer_size.width == width
        await pilot.press("alt+left")
        await wait_for(pilot, lambda: right.outer_size.width < width)
        area.clear()

        await pilot.press("f9")
        assert app.focused.id == "scratchpad-text"
        await pilot.press("f2")
        assert app.focused.id == "prompt-area"


async def test_r_on_a_group_starts_a_reply_in_its_lane(fake_llm, project, monkeypatch):
    from tests.test_app import started

    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    fake_llm.enqueue(Reply(text="first answer"), Reply(text="reply answer"))
    import slop_tui.commands as commands_module

    lines: list[str] = []
    real_dispatch = commands_module.dispatch

    async def spy(ws, text):
        lines.append(text)
        return await real_dispatch(ws, text)

    monkeypatch.setattr(commands_module, "dispatch", spy)
    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        await pilot.press(*"first", "enter")
        await wait_for(
            pilot, lambda: app.turns.orchestrator is not None and not app.turns.busy, timeout=30
        )
        groups = app.query_one(GroupList)
        groups.focus()
        await pilot.press("end")
        assert groups.highlighted_group is not None
        gid = groups.highlighted_group.group_id
        await pilot.press("r")
        await wait_for(pilot, lambda: app.query_one("#prompt").text == f"/reply {gid} ")
        assert app.focused is app.query_one("#prompt").area, app.focused
        await pilot.press(*"about that", "enter")
        await wait_for(
            pilot, lambda: not app.turns.busy and len(fake_llm.chat_requests) == 2, timeout=30
        )
        await wait_for(pilot, lambda: not app.turns.busy, timeout=30)
    assert lines[-1] == f"/reply {gid} about that"
    sess = await app_session(project)
    assert sess.lane == f"reply:{gid}"
    assert fake_llm.last.messages[-1]["content"].endswith("about that")


async def app_session(project):
    from slop_tui.ledger import Ledger

    ledger = await Ledger.open(project / "slop.db")
    try:
        return await ledger.get_session("default_session")
    finally:
        await ledger.close()


async def test_a_session_named_at_start_is_stored_after_the_first_screen(project):
    await seed(project, [("other work", "done")], session="other")
    app = SlopApp(
        db=str(project / ".slop" / "slop.db"), session="other", user_themes=False, blink=False
    )
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        assert app.workspace.session == "other"
        ws = app.workspace
        await eventually(pilot, lambda: _is(ws.ledger.get_setting(KEY_SESSION), "other"))
