"""execute_bash and grep: process groups, timeouts, cancellation, git and plain grep."""

from __future__ import annotations

import asyncio
import os
import subprocess
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from slop_tui.tools import ToolContext, procs, run_tool
from tests.test_tools_support import body, tool_context


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[ToolContext]:
    async with tool_context(tmp_path) as c:
        yield c


async def bash(ctx: ToolContext, command: str, **kw: object) -> tuple[bool, str]:
    result = await run_tool("execute_bash", {"command": command, **kw}, ctx)
    return result.ok, body(result)


def gone(pid: int) -> bool:
    """No such process, or only a zombie waiting for a reaper."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            return fh.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_gone(pid: int, within: float = 2.0) -> bool:
    deadline = time.monotonic() + within
    while time.monotonic() < deadline:
        if gone(pid):
            return True
        time.sleep(0.02)
    return gone(pid)


# --- execute_bash ------------------------------------------------------------------------


async def test_echo_runs_in_the_project_root(ctx: ToolContext) -> None:
    ok, text = await bash(ctx, "echo hello; pwd")
    assert ok and text == f"hello\n{ctx.root}"
    ok, text = await bash(ctx, "true")
    assert ok and text == "(no output)"
    ok, text = await bash(ctx, "echo $((6*7)) | cat; [[ -n bash ]] && echo is-bash")
    assert ok and text == "42\nis-bash"


async def test_nonzero_exit_and_stderr_section(ctx: ToolContext) -> None:
    ok, text = await bash(ctx, "echo out; echo err >&2; exit 42")
    assert not ok
    assert text == ("Error: command failed with exit code 42\nout\n### STDERR\nerr\nExit code: 42")
    ok, text = await bash(ctx, "echo warn >&2")
    assert ok and text == "### STDERR\nwarn"
    ok, text = await bash(ctx, "no-such-command-xyz")
    assert not ok and "exit code 127" in text


async def test_stdin_is_closed(ctx: ToolContext) -> None:
    start = time.monotonic()
    ok, text = await bash(ctx, "cat; read -r line || echo eof", timeout_seconds=5)
    assert ok and text == "eof"
    assert time.monotonic() - start < 2


async def test_timeout_kills_the_process_group(ctx: ToolContext) -> None:
    start = time.monotonic()
    ok, text = await bash(ctx, "sleep 30 & echo $! > bg.pid; sleep 30", timeout_seconds=0.2)
    assert time.monotonic() - start < 3
    assert not ok and text.startswith("Error: command timed out after 0.2 s")
    pid = int((ctx.root / "bg.pid").read_text())
    assert wait_gone(pid), "the background child survived the timeout"


async def test_timeout_escalates_to_sigkill(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(procs, "TERM_GRACE", 0.2)
    start = time.monotonic()
    ok, text = await bash(
        ctx, "trap '' TERM; echo $$ > sh.pid; while :; do sleep 0.05; done", timeout_seconds=0.2
    )
    assert not ok and "timed out" in text
    assert time.monotonic() - start < 3
    assert wait_gone(int((ctx.root / "sh.pid").read_text()))


async def test_default_timeout_comes_from_the_context(ctx: ToolContext) -> None:
    ctx.bash_timeout = 0.1
    ok, text = await bash(ctx, "sleep 5")
    assert not ok and "timed out after 0.1 s" in text


async def test_cancel_event_kills_and_raises(ctx: ToolContext) -> None:
    ctx.cancel_event = asyncio.Event()
    asyncio.get_running_loop().call_later(0.15, ctx.cancel_event.set)
    start = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await bash(ctx, "sleep 30 & echo $! > bg.pid; sleep 30")
    assert time.monotonic() - start < 3
    assert wait_gone(int((ctx.root / "bg.pid").read_text()))


async def test_task_cancellation_kills_the_group(ctx: ToolContext) -> None:
    task = asyncio.create_task(bash(ctx, "echo $$ > sh.pid; sleep 30"))
    for _ in range(100):
        if (ctx.root / "sh.pid").exists() and (ctx.root / "sh.pid").read_text():
            break
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    assert wait_gone(int((ctx.root / "sh.pid").read_text()))


async def test_background_job_holding_output_is_stopped(ctx: ToolContext) -> None:
    start = time.monotonic()
    ok, text = await bash(ctx, "sleep 30 & echo $! > bg.pid; echo started")
    assert time.monotonic() - start < 3
    assert ok and text.startswith("started") and "were stopped" in text
    assert wait_gone(int((ctx.root / "bg.pid").read_text()))
    # With its output redirected, a background job is left alone.
    ok, text = await bash(ctx, "sleep 30 > /dev/null 2>&1 & echo $! > bg2.pid; echo ok")
    assert ok and text == "ok"
    pid = int((ctx.root / "bg2.pid").read_text())
    assert not gone(pid)
    os.kill(pid, 9)


async def test_output_is_capped_keeping_head_and_tail(ctx: ToolContext) -> None:
    ctx.max_command_output_chars = 10_000
    ok, text = await bash(
        ctx, "echo FIRST; head -c 1000000 /dev/zero | tr '\\0' x; echo; echo LAST"
    )
    assert ok and len(text) <= 10_000
    assert text.startswith("FIRST") and text.endswith("LAST") and "bytes omitted" in text


async def test_a_command_output_is_kept_whole_beyond_a_reading_tools_page(
    ctx: ToolContext,
) -> None:
    # A page of read_file or grep is max_output_chars; a command cannot be re-run to
    # read the rest, so its output is kept up to max_command_output_chars.
    ctx.max_output_chars = 10_000
    ok, text = await bash(ctx, "echo FIRST; head -c 1000000 /dev/zero | tr '\\0' x; echo LAST")
    assert ok and "bytes omitted" not in text
    assert text == "FIRST\n" + "x" * 1_000_000 + "LAST"


async def test_no_controlling_terminal(ctx: ToolContext) -> None:
    ok, text = await bash(ctx, "exec 3</dev/tty && echo has-tty || echo no-tty", timeout_seconds=5)
    assert "no-tty" in text


# --- grep --------------------------------------------------------------------------------


def _tree(root: Path) -> None:
    (root / "src").mkdir()
    (root / "src/app.py").write_text("def main():\n    return 'needle'\n# --flag here\n")
    (root / "notes.txt").write_text("a needle in notes\n")
    (root / "blob.bin").write_bytes(b"needle\x00\x01")
    (root / "node_modules").mkdir()
    (root / "node_modules/dep.js").write_text("needle\n")


async def grep(ctx: ToolContext, **args: object) -> tuple[bool, str]:
    result = await run_tool("grep", args, ctx)
    return result.ok, body(result)


async def test_grep_without_git(ctx: ToolContext) -> None:
    _tree(ctx.root)
    ok, text = await grep(ctx, pattern="needle")
    assert ok
    assert sorted(text.splitlines()) == [
        "notes.txt:1:a needle in notes",
        "src/app.py:2:    return 'needle'",
    ]
    ok, text = await grep(ctx, pattern="absent-word")
    assert ok and text == "No matches for /absent-word/ in . (grep)."
    ok, text = await grep(ctx, pattern="--flag")  # a leading '-' is a pattern, not an option
    assert ok and "app.py:3:# --flag here" in text
    ok, text = await grep(ctx, pattern="ret(urn|ry)", path="src", context=1)
    assert ok and "src/app.py-1-def main():" in text and "src/app.py:2:" in text
    ok, text = await grep(ctx, pattern="(unclosed")
    assert not ok and text.startswith("Error: grep: grep failed")
    ok, text = await grep(ctx, pattern="'; rm -rf / #")
    assert ok and text.startswith("No matches")


async def test_grep_with_git(ctx: ToolContext) -> None:
    _tree(ctx.root)
    (ctx.root / ".gitignore").write_text("node_modules/\nignored.txt\n")
    (ctx.root / "ignored.txt").write_text("needle\n")
    subprocess.run(["git", "init", "-q"], cwd=ctx.root, check=True)
    subprocess.run(["git", "add", "src/app.py"], cwd=ctx.root, check=True)
    ok, text = await grep(ctx, pattern="needle")
    assert ok
    # Tracked and untracked files, not ignored ones, not binaries.
    assert sorted(text.splitlines()) == [
        "notes.txt:1:a needle in notes",
        "src/app.py:2:    return 'needle'",
    ]
    ok, text = await grep(ctx, pattern="nothing-here")
    assert ok and text == "No matches for /nothing-here/ in . (git grep)."
    ok, text = await grep(ctx, pattern="-e")
    assert ok


async def test_grep_caps_lines(ctx: ToolContext) -> None:
    (ctx.root / "many.txt").write_text("hit\n" * 500 + "hit " + "z" * 2000 + "\n")
    ok, text = await grep(ctx, pattern="hit", path="many.txt")
    lines = text.splitlines()
    assert ok and len(lines) == 201
    assert lines[-1].startswith("... [TRUNCATED: 301 more lines")


def test_shell_env_drops_credentials_and_keeps_the_rest():
    from slop_tui.tools.shell import shell_env

    env = shell_env(
        {
            "OPENAI_API_KEY": "sk-x",
            "MY_SERVICE_SECRET": "s",
            "DB_PASSWORD": "p",
            "GOOGLE_API_KEY": "g",
            "PATH": "/usr/bin",
            "HOME": "/root",
        }
    )
    assert env["PATH"] == "/usr/bin" and env["HOME"] == "/root" and env["PAGER"] == "cat"
    assert not {"OPENAI_API_KEY", "MY_SERVICE_SECRET", "DB_PASSWORD", "GOOGLE_API_KEY"} & set(env)


async def test_a_setsid_child_is_killed_at_the_timeout_without_a_sandbox(
    ctx: ToolContext,
) -> None:
    """Unconfined (no sandbox), a child that left the process group with `setsid` is
    still found (by parentage and the run's environment tag) and killed."""
    assert ctx.sandbox is None
    ok, text = await bash(
        ctx, "setsid sleep 300 & echo $! > setsid.pid; sleep 300", timeout_seconds=1
    )
    assert not ok and "it and its child processes were killed" in text
    pid = int((ctx.root / "setsid.pid").read_text())
    assert wait_gone(pid, within=3)
