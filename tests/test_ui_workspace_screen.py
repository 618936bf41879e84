"""The workspace screen's seams: the panes follow another process's writes, the turn
controller reaches the screen only through typed messages, and the panes draw the
plan the orchestrator sent."""

from __future__ import annotations

import asyncio
import os
import sys

from slop_tui.records import NewMessage
from slop_tui.ui import messages
from slop_tui.ui.app import SlopApp
from slop_tui.ui.screens.workspace import WorkspaceScreen
from slop_tui.ui.widgets.anchors import StatePane
from slop_tui.ui.widgets.groups import GroupList
from slop_tui.ui.widgets.preview import ContextPreview
from tests import test_app
from tests.fakeserver import Reply, wait_for
from tests.test_app import started

project = test_app.project


async def _exec(project, db, line: str) -> tuple[int, str]:
    """`slop-tui exec LINE` in a process of its own, on the same ledger."""
    proc = await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "slop_tui.cli",
        "exec",
        "--db",
        str(db),
        line,
        cwd=project,
        env={**os.environ, "SLOP_CONFIG": str(project / "no-config.toml")},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    out, _ = await proc.communicate()
    return proc.returncode, out.decode()


async def test_a_write_before_the_first_ledger_poll_shows_too(project, monkeypatch):
    """Another process writes after the panes were read and before the ledger poll's
    first look: the poll compares against the version the screen was read at, not the
    one it first sees."""
    from slop_tui.ui.screens import workspace as workspace_screen

    monkeypatch.setattr(workspace_screen, "LEDGER_POLL", 3.0)  # the write comes first
    db = project / "slop.db"
    app = SlopApp(db=str(db), user_themes=False, blink=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await wait_for(pilot, lambda: app.workspace_screen.side_panes_filled, timeout=30)
        state = app.workspace_screen.query_one(StatePane)
        code, out = await _exec(project, db, "/state set ## Goal written early")
        assert code == 0, out
        assert "written early" not in state.state_text
        await wait_for(pilot, lambda: "written early" in state.state_text, timeout=8)


async def test_a_write_of_another_process_shows_within_a_second(project):
    db = project / "slop.db"
    app = SlopApp(db=str(db), user_themes=False, blink=False)
    async with app.run_test(size=(140, 44)) as pilot:
        await started(pilot)
        state = app.workspace_screen.query_one(StatePane)
        assert "from another process" not in state.state_text
        code, out = await _exec(project, db, "/state set ## Goal from another process")
        assert code == 0, out
        loop = asyncio.get_running_loop()
        written = loop.time()
        await wait_for(pilot, lambda: "from another process" in state.state_text, timeout=5)
        assert loop.time() - written < 1.5
        # A turn written by another surface appears in the group list too.
        ws = app.workspace
        other = await other_workspace(project, db)
        try:
            user = await other.ledger.append_user(
                ws.session, "written elsewhere", strategy="openai"
            )
            await other.ledger.append(
                ws.session,
                user.group_id,
                [NewMessage(role="assistant", content="an answer", strategy="openai")],
            )
        finally:
            await other.close()
        groups = app.workspace_screen.query_one(GroupList)
        await wait_for(
            pilot, lambda: any(r.group_id == user.group_id for r in groups.groups), timeout=5
        )


async def other_workspace(project, db):
    from slop_tui.config import load_config
    from slop_tui.workspace import Workspace

    return await Workspace.open(load_config(db=str(db), cwd=project), None)


async def test_the_turn_controller_posts_typed_messages_to_the_screen(
    project, fake_llm, monkeypatch
):
    """Every pane update of a turn travels as a message: the screen sees the phase, the
    turn's events (bubbled from the conversation), the plan sent and the turn's end."""
    monkeypatch.setenv("OPENAI_API_KEY", "x")
    monkeypatch.setenv("OPENAI_BASE_URL", fake_llm.openai_base_url)
    seen: list[str] = []
    original = WorkspaceScreen.post_message

    def record(screen, message):
        seen.append(type(message).__name__)
        return original(screen, message)

    fake_llm.enqueue(Reply(text="the answer"))
    app = SlopApp(db=str(project / "slop.db"), user_themes=False, blink=False)
    WorkspaceScreen.post_message = record
    try:
        async with app.run_test(size=(140, 44)) as pilot:
            await started(pilot)
            await app.run_command("hello")
            await wait_for(pilot, lambda: app.turns.orchestrator is not None)
            await wait_for(pilot, lambda: not app.turns.busy, timeout=30)
            await pilot.pause()
            # Between turns the preview shows the next request: the answer is in it.
            preview = app.workspace_screen.query_one(ContextPreview)
            assert "the answer" in preview.text
            # The streamed text reached the conversation, which drew it.
            answers = app.workspace_screen.query("LiveAnswer, AnswerBlock")
            assert any("the answer" in getattr(a, "source", "") for a in answers)
    finally:
        WorkspaceScreen.post_message = original
    assert "PhaseChanged" in seen
    # The conversation's messages bubble to the screen; streamed text stops at the
    # conversation (nothing above it draws it).
    for name in ("TurnStarted", "PlanSent", "TurnEnded"):
        assert name in seen, (name, seen)
    assert "TextChunk" not in seen
    assert messages.turn_message(object()).__class__ is messages.TurnMessage
