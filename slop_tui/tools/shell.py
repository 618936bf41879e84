"""execute_bash: one shell command in the project root, in the OS sandbox when there is one
(`sandbox.py`), always without the user's credentials in its environment."""

from __future__ import annotations

import signal
from typing import Any

from slop_tui.tools.base import KIND_SHELL, ToolContext, ToolError, tool
from slop_tui.tools.procs import run_process
from slop_tui.tools.sandbox import shell_env

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
    if ctx.sandbox is not None and ctx.sandbox.available:
        argv = ctx.sandbox.argv(argv, root=ctx.root, ledger=ctx.ledger.path)
    outcome = await run_process(
        argv,
        cwd=ctx.root,
        timeout=timeout,
        cancel_event=ctx.cancel_event,
        # Room for the STDERR header and exit line; if both streams are huge,
        # run_tool's final cap trims the sum.
        max_bytes=max(1000, ctx.max_command_output_chars - 200),
        env=shell_env(secret_names=ctx.secret_env_names),
    )
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
