"""MCP servers that fail: crash mid-call, hang, answer garbage, answer 10 MB, never
initialize, cannot be started; Esc during a call; SIGTERM to `slop-tui ask` while a server
runs. Each ends the call with a clear error, leaves a status saying why, never hangs the
turn, and leaves no process behind."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import time
import uuid

import pytest

from slop_tui.commands import dispatch
from slop_tui.orchestrator import Waiting
from slop_tui.tools.sandbox import detect
from tests.fakeserver import FakeToolCall, Reply
from tests.fault_support import child_env, wait_until
from tests.test_mcp import orchestrator, tool_rows, toy_table, workspace


def procs_with(marker: str) -> list[int]:
    """Live (non-zombie) processes whose command line holds `marker`."""
    found = []
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        try:
            with open(f"/proc/{entry.name}/cmdline", "rb") as fh:
                if marker.encode() not in fh.read():
                    continue
            with open(f"/proc/{entry.name}/stat", "rb") as fh:
                if fh.read().rsplit(b")", 1)[1].split()[0] in (b"Z", b"X"):
                    continue
        except (OSError, IndexError):
            continue
        found.append(int(entry.name))
    return found


def marked(extra: str = "") -> tuple[str, str]:
    marker = f"toy-{uuid.uuid4().hex[:12]}"
    return marker, toy_table(extra=extra, args=f', "stdio", "{marker}"')


async def call_once(ws, fake_llm, name: str, args: dict, answer: str = "ok"):
    orch, _ = orchestrator(ws)
    fake_llm.enqueue(Reply(tool_calls=[FakeToolCall(name, args)]), Reply(text=answer))
    started = time.monotonic()
    try:
        out = await orch.run_turn(f"call {name}")
    finally:
        await orch.aclose()
    row = tool_rows(await ws.ledger.session_messages(ws.session))[-1]
    return out, row, time.monotonic() - started


async def test_a_crash_mid_call_is_an_error_then_the_server_restarts(tmp_path, fake_llm):
    marker, table = marked('approve = "all"\nsandbox = false')
    ws = await workspace(tmp_path, fake_llm, table)
    try:
        out, row, _ = await call_once(ws, fake_llm, "mcp__toy__crash", {})
        assert out.error is None and row.status == "error"
        assert "closed the connection during crash" in row.content
        assert "toy: crashing on purpose" in row.content  # its stderr, for the user
        server = ws.mcp.servers["toy"]
        assert server.status == "failed" and "crashing on purpose" in server.error
        assert "failed" in (await dispatch(ws, "/mcp")).text
        assert procs_with(marker) == []
        await asyncio.sleep(1.1)  # the first back-off
        out, row, _ = await call_once(ws, fake_llm, "mcp__toy__echo", {"text": "back"})
        assert row.status == "completed" and "echo: back" in row.content
        assert server.status == "running" and server.failures == 0
    finally:
        await ws.close()
    assert procs_with(marker) == []


async def test_a_hanging_call_ends_at_the_timeout_and_the_server_is_stopped(tmp_path, fake_llm):
    marker, table = marked('approve = "all"\ntimeout = 2')
    ws = await workspace(tmp_path, fake_llm, table)
    try:
        out, row, took = await call_once(ws, fake_llm, "mcp__toy__nap", {"seconds": 600})
        assert row.status == "error" and "did not answer nap within 2 s" in row.content
        assert took < 60
        assert ws.mcp.servers["toy"].status == "failed"
        wait_until(lambda: procs_with(marker) == [], "the hung server is gone", timeout=15)
    finally:
        await ws.close()


async def test_a_line_that_is_not_json_ends_the_call_with_an_error(tmp_path, fake_llm):
    marker, table = marked('approve = "all"\ntimeout = 3')
    ws = await workspace(tmp_path, fake_llm, table)
    try:
        out, row, took = await call_once(ws, fake_llm, "mcp__toy__garbage", {})
        assert row.status == "error" and "did not answer garbage within 3 s" in row.content
        assert out.error is None and took < 60
        wait_until(lambda: procs_with(marker) == [], "the server is gone", timeout=15)
    finally:
        await ws.close()


async def test_a_10_mb_result_is_capped_stored_and_tiered(tmp_path, fake_llm):
    _, table = marked('approve = "all"\ntimeout = 300')
    ws = await workspace(tmp_path, fake_llm, table)
    try:
        out, row, _ = await call_once(ws, fake_llm, "mcp__toy__big", {"size": 10_000_000})
        assert out.error is None and row.status == "completed"
        assert 200_000 <= len(row.content) < 201_000 and "characters of output omitted" in (
            row.content
        )
        sent = fake_llm.last.body["messages"]
        result = next(m["content"] for m in sent if m["role"] == "tool")
        assert len(result) < 6000 and f"WHERE id={row.id}" in result
    finally:
        await ws.close()


async def test_servers_that_never_start_say_why_and_the_turn_goes_on(tmp_path, fake_llm):
    marker = f"silent-{uuid.uuid4().hex[:8]}"
    table = (
        f'[mcp.servers.silent]\ncommand = "{sys.executable}"\n'
        f'args = ["-c", "import time; time.sleep(600)", "{marker}"]\n'
        "start_timeout = 2\nsandbox = false\n"
        '[mcp.servers.missing]\ncommand = "/nonexistent/mcp-server"\nsandbox = false\n'
        '[mcp.servers.secret]\ncommand = "true"\nenv = { TOKEN = "${NOT_SET_ANYWHERE}" }\n'
    )
    ws = await workspace(tmp_path, fake_llm, table)
    orch, _ = orchestrator(ws)
    try:
        fake_llm.enqueue(Reply(text="answered anyway"))
        events: list = []
        started = time.monotonic()
        out = await orch.run_turn("hello", events.append)
        assert out.text == "answered anyway" and time.monotonic() - started < 60
        servers = ws.mcp.servers
        assert "did not finish starting (initialize, tools/list) within 2 s" in (
            servers["silent"].error
        )
        assert "could not start" in servers["missing"].error
        assert "NOT_SET_ANYWHERE is not set" in servers["secret"].error
        notices = " ".join(e.text for e in events if e.kind == "notice")
        assert "MCP server 'silent'" in notices and "started again on the next turn" in notices
        assert all(s.status == "failed" for s in servers.values())
        assert procs_with(marker) == []
        # Each failure in a row doubles the wait; within it a server is not tried again.
        assert (await dispatch(ws, "/mcp disable silent")).ok
        await ws.mcp.ensure_started()
        assert servers["secret"].failures == 2 and await ws.mcp.pending() == []
        listing = (await dispatch(ws, "/mcp")).text
        assert "| secret | stdio | failed (retry in 2 s) |" in listing
    finally:
        await orch.aclose()
        await ws.close()


async def test_esc_during_a_call_cancels_it_and_the_server_stays_usable(tmp_path, fake_llm):
    _, table = marked('approve = "all"')
    ws = await workspace(tmp_path, fake_llm, table)
    orch, _ = orchestrator(ws)
    try:
        fake_llm.enqueue(Reply(tool_calls=[FakeToolCall("mcp__toy__nap", {"seconds": 600})]))
        waiting = asyncio.Event()

        def on_event(ev) -> None:
            if isinstance(ev, Waiting) and ev.text.startswith("waiting on MCP"):
                waiting.set()

        task = asyncio.create_task(orch.run_turn("nap", on_event))
        await asyncio.wait_for(waiting.wait(), 120)
        await asyncio.sleep(0.3)
        task.cancel()
        started = time.monotonic()
        await asyncio.gather(task, return_exceptions=True)
        assert time.monotonic() - started < 10
        row = tool_rows(await ws.ledger.session_messages(ws.session))[-1]
        assert "cancelled by the user" in row.content
        assert ws.mcp.servers["toy"].status == "running"
        out, row, _ = await call_once(ws, fake_llm, "mcp__toy__echo", {"text": "still here"})
        assert "echo: still here" in row.content
    finally:
        await orch.aclose()
        await ws.close()


@pytest.mark.parametrize(
    ("sig", "sandbox"),
    [(signal.SIGTERM, "true"), (signal.SIGTERM, "false"), (signal.SIGKILL, "false")],
)
def test_sigterm_or_sigkill_during_a_call_leaves_no_server_process(
    tmp_path, fake_llm, sig, sandbox
):
    if sandbox == "true" and not detect().available:
        pytest.skip("bubblewrap cannot run here")
    home = tmp_path / "home"
    project = tmp_path / "project"
    home.mkdir()
    project.mkdir()
    marker = f"toy-{uuid.uuid4().hex[:12]}"
    config = home / "config.toml"
    extra = f'approve = "all"\nsandbox = {sandbox}'
    config.write_text(toy_table(extra=extra, args=f', "stdio", "{marker}"'))
    fake_llm.enqueue(Reply(tool_calls=[FakeToolCall("mcp__toy__nap", {"seconds": 600})]))
    env = child_env(
        home,
        {
            "SLOP_CONFIG": str(config),
            "OPENAI_API_KEY": "x",
            "OPENAI_BASE_URL": fake_llm.openai_base_url,
            "TOY_DESC": "Echo.",
        },
    )
    proc = subprocess.Popen(
        [sys.executable, "-m", "slop_tui.cli", "ask", "nap please"],
        cwd=project,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        wait_until(lambda: procs_with(marker), "the server runs", timeout=120, proc=proc)
        db = project / ".slop" / "slop.db"

        def calling() -> bool:
            import sqlite3

            with sqlite3.connect(db) as con:
                rows = con.execute(
                    "SELECT count(*) FROM messages WHERE status='tool_call'"
                ).fetchone()
            return bool(rows and rows[0])

        wait_until(calling, "the call is sent", timeout=60, proc=proc)
        time.sleep(0.5)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=60)
        if sig == signal.SIGTERM:  # stopped in order: the servers were stopped by it
            assert proc.returncode == 128 + signal.SIGTERM, err
            assert "stopped by SIGTERM" in err
        else:  # killed: the servers die with it
            assert proc.returncode == -signal.SIGKILL
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    wait_until(lambda: procs_with(marker) == [], "no server process is left", timeout=10)
