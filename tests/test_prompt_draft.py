"""What the prompt holds unsent when the app quits is there again at the next start:
quitting is a keystroke, and it loses nothing typed."""

from __future__ import annotations

import asyncio

from slop_tui.ui.screens.workspace import KEY_PROMPT_DRAFT
from slop_tui.ui.widgets.prompt import PromptInput
from tests import test_app
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
