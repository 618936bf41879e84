"""Cancelling a turn while a tool runs: the process group dies, the ledger says so."""

from __future__ import annotations

import asyncio
import os
import time

import pytest

from slop_tui.orchestrator import Orchestrator, ToolCallEvent
from tests.fakeserver import FakeToolCall, Reply
from tests.fault_support import pids_with_cmdline
from tests.workspace_fixtures import open_workspace


def _alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().split()[2] != "Z"
    except FileNotFoundError:
        return False


async def test_cancel_mid_tool_kills_the_process_group(tmp_path, fake_llm):
    env = {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": fake_llm.openai_base_url}
    ws = await open_workspace(tmp_path, env=env)
    orch = Orchestrator(ws, approve="all")
    pidfile = tmp_path / "child.pid"
    fake_llm.enqueue(
        Reply(
            tool_calls=[
                FakeToolCall(
                    "execute_bash", {"command": f"sleep 30.4242 & echo $! > {pidfile}; wait"}
                )
            ]
        )
    )
    started = asyncio.Event()

    def on_event(ev) -> None:
        if isinstance(ev, ToolCallEvent):
            started.set()

    task = asyncio.create_task(orch.run_turn("run it", on_event))
    try:
        await asyncio.wait_for(started.wait(), 10)
        deadline = time.monotonic() + 10
        # The pid file is written at the fork; the child is `sleep` only once it exec'd.
        while not (children := pids_with_cmdline(b"sleep\x0030.4242\x00")):
            assert time.monotonic() < deadline, "the tool never started"
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        deadline = time.monotonic() + 5
        while any(map(_alive, children)) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        assert not any(map(_alive, children)), "the tool's child process outlived the cancel"
        rows = await ws.ledger.session_messages(ws.session)
        assert [r.role for r in rows] == ["user", "assistant", "tool"]
        assert rows[-1].status == "interrupted" and "cancelled" in rows[-1].content
        fake_llm.enqueue(Reply(text="fine again"))
        assert (await orch.run_turn("next")).text == "fine again"
    finally:
        if not task.done():
            task.cancel()
        await orch.aclose()
        await ws.close()
    assert os.getpid()  # the test process itself is untouched


async def test_esc_during_a_tool_call_is_one_interrupted_state_and_the_next_request_says_so(
    tmp_path, fake_llm
):
    """docs/context.md, "An interrupted turn": the group is `interrupted`, the notice says
    the word its mark shows, and the next request carries the prompt, the call and its
    result 'cancelled by the user' (real openai SDK against the fake server)."""
    from slop_tui.events import Notice
    from slop_tui.ui.widgets.blocks import status_mark

    env = {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": fake_llm.openai_base_url}
    ws = await open_workspace(tmp_path, env=env)
    orch = Orchestrator(ws, approve="all")
    fake_llm.enqueue(Reply(tool_calls=[FakeToolCall("execute_bash", {"command": "sleep 30.5151"})]))
    started = asyncio.Event()
    notices: list[str] = []

    def on_event(ev) -> None:
        if isinstance(ev, ToolCallEvent):
            started.set()
        if isinstance(ev, Notice):
            notices.append(ev.text)

    task = asyncio.create_task(orch.run_turn("run the slow thing", on_event))
    try:
        await asyncio.wait_for(started.wait(), 10)
        deadline = time.monotonic() + 10
        while not pids_with_cmdline(b"sleep\x0030.5151\x00"):
            assert time.monotonic() < deadline, "the tool never started"
            await asyncio.sleep(0.02)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        (group,) = await ws.ledger.list_groups(ws.session, 5)
        assert group.status == "interrupted"
        rows = await ws.ledger.session_messages(ws.session)
        assert [(r.role, r.status) for r in rows] == [
            ("user", "completed"),
            ("assistant", "tool_call"),
            ("tool", "interrupted"),
        ]
        assert len(notices) == 1 and status_mark(group.status) in notices[0], notices
        assert "partial answer is kept" not in notices[0]

        fake_llm.enqueue(Reply(text="fine again"))
        assert (await orch.run_turn("what happened?")).text == "fine again"
        sent = [m for m in fake_llm.requests[-1].messages if m["role"] != "system"]
        assert [m["role"] for m in sent] == ["user", "assistant", "tool", "user"]
        assert sent[0]["content"].endswith("\nrun the slow thing")  # after the history marker
        assert sent[1]["tool_calls"][0]["function"]["name"] == "execute_bash"
        assert sent[2]["tool_call_id"] == sent[1]["tool_calls"][0]["id"]
        assert "cancelled by the user before the tool finished" in sent[2]["content"]
        assert sent[3]["content"].endswith("\nwhat happened?")
    finally:
        if not task.done():
            task.cancel()
        await orch.aclose()
        await ws.close()
