"""What the prompt holds unsent when the app quits is there again at the next start:
quitting is a keystroke, and it loses nothing typed."""

from __future__ import annotations

import asyncio
import os
import signal
import sqlite3

import pytest

from slop_tui.ui.screens.workspace import KEY_PROMPT_DRAFT
from slop_tui.ui.widgets.prompt import PromptInput
from tests import pty_app, test_app
from tests.fakeserver import wait_for
from tests.test_app import started
from tests.test_app_actions import make_app

project = test_app.project  # the fixture: a temporary project folder, no provider keys

DRAFT = "refactor the parser:\n- keep the paste whole\n- then the tests"


def prompt_of(app) -> PromptInput:
    return app.workspace_screen.query_one(PromptInput)


async def run_until_quit(project, type_text: str | None = None, send: bool = False) -> str:
    """Start the app on `project`'s ledger, type or send, quit with ctrl+q; what the
    prompt showed when it came up."""
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        shown = prompt_of(app).text
        if type_text is not None:
            prompt_of(app).text = type_text
        if send:
            await pilot.press("enter")
            await wait_for(pilot, lambda: not prompt_of(app).text, timeout=10)
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: not app.is_running, timeout=10)
    return shown


async def setting(project) -> str | None:
    from slop_tui.ledger import Ledger

    ledger = await Ledger.open(project / ".slop" / "slop.db")
    try:
        return await ledger.get_setting(KEY_PROMPT_DRAFT)
    finally:
        await ledger.close()


async def test_the_prompt_s_unsent_text_is_there_again_after_a_quit(project):
    assert await run_until_quit(project, DRAFT) == ""
    assert await run_until_quit(project) == DRAFT  # shown, and kept by this quit too
    assert await run_until_quit(project) == DRAFT


async def test_a_kept_draft_once_sent_is_not_shown_again(project):
    await run_until_quit(project, "/help")
    # Sent (a command: no turn needed) and the app quit with an empty prompt.
    assert await run_until_quit(project, send=True) == "/help"
    assert await run_until_quit(project) == ""
    assert not await setting(project)


async def test_an_empty_prompt_at_quit_leaves_no_draft(project):
    await run_until_quit(project, "   ")
    assert await run_until_quit(project) == ""
    assert not await setting(project)


# The real command on a terminal that is closed (SIGHUP), or stopped from elsewhere
# (SIGTERM), with text typed in the prompt and the scratchpad and not sent or saved.


@pytest.mark.parametrize("how", ["hangup", "closed", "SIGTERM"])
def test_a_closed_terminal_or_sigterm_keeps_the_prompt_and_the_scratchpad(tmp_path, fake_llm, how):
    """`closed`: the terminal goes away without a hang-up reaching the app (it is not
    the terminal's controlling process): it notices, and ends as on SIGHUP."""
    term = pty_app.start(
        tmp_path, fake_llm.base_url, cols=120, rows=40, controlling=how != "closed"
    )
    try:
        term.send("a draft the terminal closed on")
        assert term.pump(lambda t: t.find("closed on") is not None, 10.0) is not None
        term.send("\x1b[20~")  # F9: the right pane, then its scratchpad
        term.settle(0.3, 5.0)
        term.send("\x1b[20~")
        term.settle(0.3, 5.0)
        term.send("NOTE-UNSAVED ")
        assert term.pump(lambda t: t.find("NOTE-UNSAVED") is not None, 10.0) is not None
        if how in ("hangup", "closed"):
            os.close(term.master)  # the terminal window closes
            code = 128 + signal.SIGHUP
        else:
            os.kill(term.proc.pid, signal.SIGTERM)
            code = 128 + signal.SIGTERM
        assert pty_app.wait_for_exit(term, 30.0) == code
    finally:
        term.close()
    assert fake_llm.requests == []
    with sqlite3.connect(tmp_path / "project" / ".slop" / "slop.db") as db:
        draft = db.execute("SELECT value FROM app_state WHERE key = ?", (KEY_PROMPT_DRAFT,))
        assert draft.fetchone() == ("a draft the terminal closed on",)
        (pad,) = db.execute("SELECT scratchpad FROM sessions").fetchone()
        assert pad.startswith("NOTE-UNSAVED")


async def test_text_typed_before_the_draft_shows_goes_on_after_it(project):
    """Typing at start-up can reach the prompt before the kept draft is put in it:
    both stay, the draft first, and neither is lost at the next quit."""
    await run_until_quit(project, DRAFT)
    app = make_app(project)
    async with asyncio.timeout(60), app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        prompt = prompt_of(app)
        prompt.text = "typed at start-up"
        await app.workspace_screen.show_conversation([], DRAFT)  # as the start calls it
        assert prompt.text == f"{DRAFT}\ntyped at start-up"
        await pilot.press("ctrl+q")
        await wait_for(pilot, lambda: not app.is_running, timeout=10)
    assert await setting(project) == f"{DRAFT}\ntyped at start-up"
