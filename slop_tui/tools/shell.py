"""execute_bash: one shell command in the project root, in the OS sandbox when there is one
(`sandbox.py`), always without the user's credentials in its environment."""

from __future__ import annotations

import asyncio
import contextlib
import signal
from pathlib import Path
from typing import Any

from slop_tui.tools import gitdirs
from slop_tui.tools.base import KIND_SHELL, ToolContext, ToolError, tool
from slop_tui.tools.procs import ProcOutcome, run_process
from slop_tui.tools.sandbox import ledger_placeholders, remove_placeholders, shell_env

__all__ = ["TOOLS", "execute_bash", "shell_env"]

MAX_TIMEOUT = 3600.0


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"{code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


@tool(
    "execute_bash",
    "Run a bash command in the project root (`bash -c`), in a sandbox where one is "
    "available: the project is writable except .git/ and .slop/, the rest read-only, "
    "network only when the user allows it. stdin is closed, so interactive "
    "programs get EOF. Returns stdout, then stderr under '### STDERR', then the exit code "
    "when it is not 0. The command and everything it started are killed at the timeout "
    "(default 180 s). Processes it started in the background end with it (in the sandbox "
    "all of them; otherwise those that keep its output open).",
    KIND_SHELL,
    {
        "command": {"type": "string", "description": "The bash command line."},
        "timeout_seconds": {
            "type": "number",
            "minimum": 0.1,
            "maximum": MAX_TIMEOUT,
            "description": "Kill the command after this many seconds (default 180).",
        },
    },
    ["command"],
)
async def execute_bash(args: dict[str, Any], ctx: ToolContext) -> str:
    command: str = args["command"]
    if not command.strip():
        raise ToolError("execute_bash: the command is empty")
    timeout = float(args.get("timeout_seconds") or ctx.bash_timeout)
    argv = ["bash", "-c", command]
    if ctx.sandbox is None or not ctx.sandbox.available:
        outcome = await _run(argv, ctx, timeout)
        return _result(outcome, timeout, "")
    root = ctx.root
    with contextlib.suppress(OSError):  # hidden in the sandbox: the command cannot make one
        (root / ".slop").mkdir(exist_ok=True)
    found = await asyncio.to_thread(gitdirs.scan, root)
    trusted = gitdirs.begin(found)
    moved: list[gitdirs.Moved] = []
    placeholders = ledger_placeholders(root, ctx.ledger.path)
    try:
        argv = ctx.sandbox.argv(argv, root=root, ledger=ctx.ledger.path, readonly=found.readonly)
        outcome = await _run(argv, ctx, timeout)
    finally:  # ended, failed, timed out or cancelled: its processes are gone
        try:
            remove_placeholders(placeholders)
            moved = await asyncio.to_thread(gitdirs.sweep, trusted, gitdirs.run_id())
        finally:
            gitdirs.end(root)
            if moved:
                ctx.notices.append(_moved_notice(root, moved))
    return _result(outcome, timeout, _moved_line(moved) if moved else "")


async def _run(argv: list[str], ctx: ToolContext, timeout: float) -> ProcOutcome:
    return await run_process(
        argv,
        cwd=ctx.root,
        timeout=timeout,
        cancel_event=ctx.cancel_event,
        # Room for the STDERR header and exit line; if both streams are huge,
        # run_tool's final cap trims the sum.
        max_bytes=max(1000, ctx.max_command_output_chars - 200),
        env=shell_env(secret_names=ctx.secret_env_names),
    )


def _where(moved: list[gitdirs.Moved]) -> str:
    return ", ".join(m.path.as_posix() for m in moved)


def _moved_line(moved: list[gitdirs.Moved]) -> str:
    """What the model is told: its repository is gone, and why."""
    done = [m for m in moved if m.to is not None]
    failed = [m for m in moved if m.to is None]
    lines = []
    if done:
        lines.append(
            f"[slop-tui moved git repository files that appeared while this command ran "
            f"({_where(done)}) out of the project: the sandbox does not let a command create "
            "a git repository (git would run code it names at the user's next git status). "
            "Do not run git init or write .git, HEAD, objects/ or refs/ here; ask the user "
            "to do it.]"
        )
    if failed:
        lines.append(
            f"[slop-tui could not move git repository files that appeared while this "
            f"command ran ({_where(failed)}: {failed[0].error}); the user was told.]"
        )
    return "\n".join(lines)


def _moved_notice(root: Path, moved: list[gitdirs.Moved]) -> str:
    """What the user is told: where the files went, or that they are still there."""
    done = [m for m in moved if m.to is not None]
    failed = [m for m in moved if m.to is None]
    parts = []
    if done:
        folder = done[0].to.relative_to(root).parts[:3]  # .slop/git-quarantine/<run>
        parts.append(
            f"A shell command of the model created git repository files ({_where(done)}); "
            f"slop-tui moved them to {'/'.join(folder)}/ (nothing was deleted; its "
            "README.txt says how to put them back)."
        )
    if failed:
        parts.append(
            f"A shell command of the model created git repository files that could not "
            f"be moved ({_where(failed)}: {failed[0].error}): do not run git in this project "
            "until you have looked at them."
        )
    return " ".join(parts)


def _result(outcome: ProcOutcome, timeout: float, note: str) -> str:
    parts: list[str] = []
    if outcome.stdout:
        parts.append(outcome.stdout.removesuffix("\n"))
    if outcome.stderr:
        parts.append("### STDERR\n" + outcome.stderr.removesuffix("\n"))
    if outcome.stopped_background:
        parts.append(
            "[background processes still held the output open after the command ended "
            "and were stopped]"
        )
    if note:
        parts.append(note)
    if outcome.timed_out:
        raise ToolError(
            f"command timed out after {timeout:g} s; it and its child processes were killed",
            "\n".join(parts),
        )
    code = outcome.returncode if outcome.returncode is not None else -1
    if code != 0:
        parts.append(f"Exit code: {_exit_text(code)}")
        raise ToolError(f"command failed with exit code {_exit_text(code)}", "\n".join(parts))
    return "\n".join(parts) if parts else "(no output)"


TOOLS = [execute_bash]
