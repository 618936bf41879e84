"""Typing is safe: sentences typed while any pane, list or dialog has focus lose nothing.

The real workspace over a real ledger. After each sentence the ledger either
did not change, or every change was announced with the key that reverts it
and that key (pressed right where the user is) gives the exact rows back.
Also: the turn-state guard (no orphan group while a turn runs), the failed
prompt's error mark and one-key resend, and the mouse (the group's mark,
the footer's undo and redo).
"""

from __future__ import annotations

import asyncio
import threading

from textual import events

from slop_tui.context.plan import MARKS, PLACE_DROPPED
from slop_tui.ui.screens.dialogs import ProviderScreen, SessionScreen
from slop_tui.ui.screens.search import SearchScreen
from slop_tui.ui.widgets.groups import FLAG_ERROR, GroupList
from slop_tui.ui.widgets.keybar import KeyBar
from slop_tui.ui.widgets.prompt import PromptArea
from tests import test_app
from tests.fakeserver import Reply, wait_for
from tests.fault_support import check_openai_request
from tests.test_app import started
from tests.test_app_actions import (
    SIZE,
    click_offset,
    make_app,
    openai_env,
    seed,
    turn_running,
)
from tests.test_ui_keybar import click_key

MARK_DROPPED = MARKS[PLACE_DROPPED]
project = test_app.project  # the fixture: a temporary project folder, no provider keys
SENTENCES = ("summarise the output", "drop it, undo: ready? yes [x] ]] [")


async def ledger_state(app) -> tuple:
    """Every message (id, status) and every session: what an edit could take away."""
    ws = app.workspace
    rows = await ws.ledger._tuples("SELECT id, status FROM messages ORDER BY id")
    sessions = [s.name for s in await ws.ledger.list_sessions()]
    return tuple(rows), tuple(sorted(sessions))


def notes(app) -> list[str]:
    return [n.message for n in app._notifications]


async def type_text(pilot, text: str) -> None:
    await pilot.press(*[" " if c == " " else c for c in text])
    await pilot.pause()


async def test_a_sentence_typed_on_a_clicked_group_row_goes_to_the_prompt(project):
    await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 4)])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        groups = app.query_one(GroupList)
        before = await ledger_state(app)
        await pilot.click(GroupList, offset=click_offset(groups, 1))
        await wait_for(pilot, lambda: groups.highlighted == 1)
        assert isinstance(app.focused, PromptArea)  # a click selects; the keyboard stays
        await type_text(pilot, "summarise the output")
        assert app.query_one("#prompt").text == "summarise the output"
        assert isinstance(app.focused, PromptArea)
        assert await ledger_state(app) == before
        assert await app.workspace.ledger.edits() == []


async def test_a_paste_into_a_list_lands_in_the_prompt(project):
    await seed(project, [("question", "answer")])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        app.query_one(GroupList).focus()
        await pilot.pause()
        paste = events.Paste("pasted\nlines")  # as the terminal's bracketed paste arrives
        paste.set_sender(app)
        app._driver.send_message(paste)
        await wait_for(pilot, lambda: app.query_one("#prompt").text == "pasted\nlines")
        assert isinstance(app.focused, PromptArea)


async def test_ctrl_z_after_a_long_paste_into_the_prompt_undoes_it(project):
    # Found by the monkey: undoing a paste that made the prompt scroll crashed Textual's
    # TextArea (ui/textual_fixes.py).
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        prompt = app.query_one("#prompt")
        paste = events.Paste("a line\n" * 30)
        paste.set_sender(app)
        app._driver.send_message(paste)
        await wait_for(pilot, lambda: prompt.text.count("\n") == 30)
        await pilot.press("ctrl+z")
        await wait_for(pilot, lambda: prompt.text == "")
        assert app.is_running


async def test_typing_in_every_pane_loses_nothing_or_is_announced_and_one_key_reverts_it(
    project,
):
    await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 4)])
    await seed(project, [("elsewhere", "there")], session="other")
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        prompt = app.query_one("#prompt")
        before = await ledger_state(app)
        panes = [w for w in app.screen.focus_chain if not isinstance(w, PromptArea)]
        panes = [w for w in panes if type(w).__name__ != "SafeTextArea"]  # editors type
        names = {type(w).__name__ for w in panes}
        assert {"GroupList", "SessionList", "StatePane", "GroupBlock", "AnswerBlock"} <= names
        for pane in panes:
            for sentence in SENTENCES:
                prompt.clear()
                app._notifications.clear()
                pane.focus()
                await pilot.pause()
                await type_text(pilot, sentence)
                changed = await ledger_state(app) != before
                if changed:
                    said = notes(app)
                    assert any("ctrl+y brings it back" in m for m in said), (pane, said)
                    for _ in range(5):  # one press per announced edit, where the user is
                        await pilot.press("ctrl+y")
                        await pilot.pause()
                        if await ledger_state(app) == before:
                            break
                assert await ledger_state(app) == before, (pane, sentence)
                # Whatever did not act on the focused pane was typed into the prompt.
                assert sentence.endswith(prompt.text[-3:]) or not prompt.text, (pane, prompt.text)


async def test_dialogs_open_on_their_text_field(project):
    await seed(project, [("question", "answer")], session="ready")
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        before = await ledger_state(app)
        for key, screen_type, field in (
            ("f5", SessionScreen, "#name"),
            ("f4", ProviderScreen, "#model"),
            ("f6", SearchScreen, "#query"),
        ):
            await pilot.press(key)
            await wait_for(pilot, lambda t=screen_type: isinstance(app.screen, t))
            value = app.screen.query_one(field).value
            await type_text(pilot, "ready yes")
            assert isinstance(app.screen, screen_type)
            assert app.screen.query_one(field).value == value + "ready yes"
            await pilot.press("escape")
            await wait_for(pilot, lambda t=screen_type: not isinstance(app.screen, t))
        assert await ledger_state(app) == before


async def test_a_running_turn_keeps_its_group_and_nothing_is_orphaned(
    fake_llm, project, monkeypatch
):
    openai_env(monkeypatch, fake_llm)
    gate = threading.Event()
    fake_llm.enqueue(Reply(text="the answer", gate=gate), Reply(text="next answer"))
    await seed(project, [("earlier", "earlier answer")])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        await type_text(pilot, "a slow question")
        await pilot.press("enter")
        await wait_for(pilot, lambda: len(fake_llm.chat_requests) == 1, timeout=10)
        gid = app.turns.orchestrator.turn.running
        assert gid is not None and await ws.ledger.running_here() == (ws.session, gid)
        await pilot.press("f3", "end", "ctrl+z", "delete")  # undo and remove the running group
        await pilot.pause()
        said = notes(app)
        assert sum(f"group {gid}'s turn is still running" in m for m in said) == 2, said
        assert [m.role for m in await ws.ledger.group_messages(ws.session, gid)] == ["user"]
        gate.set()
        await wait_for(pilot, lambda: not turn_running(app), timeout=10)
        rows = await ws.ledger.group_messages(ws.session, gid)
        assert [(m.role, m.content) for m in rows] == [
            ("user", "a slow question"),
            ("assistant", "the answer"),
        ]
        await pilot.press("f2", *"next", "enter")
        await wait_for(pilot, lambda: len(fake_llm.chat_requests) == 2, timeout=10)
        await wait_for(pilot, lambda: not turn_running(app), timeout=10)
        sent = [(m["role"], m["content"]) for m in fake_llm.last_chat.messages]
        check_openai_request(fake_llm.last_chat.messages)
        at = sent.index(("user", "a slow question"))
        assert sent[at + 1] == ("assistant", "the answer")
        assert all(
            a[0] != "assistant" or b[0] != "assistant" for a, b in zip(sent, sent[1:], strict=False)
        )


async def test_a_failed_prompt_shows_the_error_mark_and_ctrl_r_sends_it_again(
    fake_llm, project, monkeypatch
):
    openai_env(monkeypatch, fake_llm)
    fake_llm.enqueue(Reply(status=401, error_message="bad key"), Reply(text="it worked this time"))
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        groups = app.query_one(GroupList)
        await type_text(pilot, "try me")
        await pilot.press("enter")
        await wait_for(pilot, lambda: app.turns.failed_prompt is not None, timeout=10)
        failed = app.turns.failed_prompt
        assert groups.row_text(failed)[1] == FLAG_ERROR
        banner = str(app.query_one("#banner").render())
        assert "bad key" in banner and "ctrl+r sends it again" in banner
        keys = [k.description for k in app.query_one(KeyBar).shown_keys]
        assert "Resend" in keys
        await pilot.press("ctrl+r")
        await wait_for(pilot, lambda: len(fake_llm.chat_requests) == 2, timeout=10)
        await wait_for(pilot, lambda: not turn_running(app) and app.turns.failed_prompt is None)
        rows = await ws.ledger.session_messages(ws.session)
        assert [(m.role, m.content, m.status) for m in rows] == [
            ("user", "try me", "completed"),
            ("assistant", "it worked this time", "completed"),
        ]
        assert [e.kind for e in await ws.ledger.trash()] == ["retry"]  # the failed try
        assert "Resend" not in [k.description for k in app.query_one(KeyBar).shown_keys]


async def test_the_mouse_drops_by_the_mark_and_undoes_and_redoes_from_the_footer(project):
    gids = await seed(project, [(f"question {i}", f"answer {i}") for i in range(1, 4)])
    app = make_app(project)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        ws = app.workspace
        groups = app.query_one(GroupList)
        mark = click_offset(groups, 0)
        await pilot.press("f3")  # the footer shows the list's keys (Undo, Redo)
        await pilot.click(GroupList, offset=(mark[0] - 4, mark[1]))  # the first cell
        await wait_for(pilot, lambda: groups.row_text(gids[0]).startswith(MARK_DROPPED))
        await pilot.click(GroupList, offset=(mark[0] - 4, mark[1]))
        await wait_for(pilot, lambda: not groups.row_text(gids[0]).startswith(MARK_DROPPED))

        bar = app.query_one(KeyBar)
        await wait_for(pilot, lambda: "Undo" in [k.description for k in bar.shown_keys])
        await click_key(pilot, bar, "Undo")
        await wait_for(pilot, lambda: [g.group_id for g in groups.groups] == gids[:2])
        await click_key(pilot, bar, "Redo")
        await wait_for(pilot, lambda: [g.group_id for g in groups.groups] == gids)
        assert len(await ws.ledger.session_messages(ws.session)) == 6


async def test_a_line_refused_because_a_turn_began_meanwhile_comes_back_to_the_prompt(
    fake_llm, project, monkeypatch
):
    """Enter takes the line from the prompt; a turn that starts before the line runs
    (another key's) has it refused: the text is back in the prompt, nothing is sent."""
    import slop_tui.commands as commands

    openai_env(monkeypatch, fake_llm)
    gate = threading.Event()
    fake_llm.enqueue(Reply(text="the racing answer", gate=gate), Reply(text="the answer"))
    await seed(project, [("earlier", "earlier answer")])
    real_dispatch = commands.dispatch
    app = make_app(project)
    raced: list[str] = []

    async def dispatch(ws, text):
        if text == "my question" and not raced:
            raced.append(text)
            app.turns.run_turn("a racing turn")  # as ctrl+r would, between the two
            for _ in range(500):
                if app.turns.busy:
                    break
                await asyncio.sleep(0.01)
            assert app.turns.busy
        return await real_dispatch(ws, text)

    monkeypatch.setattr(commands, "dispatch", dispatch)
    async with app.run_test(size=SIZE) as pilot:
        await started(pilot)
        prompt = app.query_one("#prompt")
        await type_text(pilot, "my question")
        await pilot.press("enter")
        await wait_for(pilot, lambda: any("A turn is running" in m for m in notes(app)))
        assert prompt.text == "my question"
        gate.set()
        await wait_for(pilot, lambda: not turn_running(app), timeout=10)
        sent = "\n".join(str(m["content"]) for m in fake_llm.chat_requests[0].messages)
        assert "my question" not in sent and sent.endswith("a racing turn")
        await pilot.press("enter")  # the text given back is sent as it stands
        await wait_for(pilot, lambda: len(fake_llm.chat_requests) == 2, timeout=10)
        await wait_for(pilot, lambda: not turn_running(app), timeout=10)
        last = fake_llm.last_chat.messages[-1]
        assert last["role"] == "user" and last["content"].endswith("\nmy question")
        assert prompt.text == ""
