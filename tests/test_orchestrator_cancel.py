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
        assert rows[-1].status == "error" and "cancelled" in rows[-1].content
        fake_llm.enqueue(Reply(text="fine again"))
        assert (await orch.run_turn("next")).text == "fine again"
    finally:
        if not task.done():
            task.cancel()
        await orch.aclose()
        await ws.close()
    assert os.getpid()  # the test process itself is untouched
