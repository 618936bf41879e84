"""execute_bash: one shell command in the project root."""

from __future__ import annotations

import os
import signal
from typing import Any

from slop_tui.tools.base import KIND_SHELL, ToolContext, ToolError, tool
from slop_tui.tools.procs import run_process

MAX_TIMEOUT = 3600.0

# Pagers would only add noise (output is a pipe, stdin is closed); git must
# never wait for credentials.
_ENV_OVERRIDES = {"PAGER": "cat", "GIT_PAGER": "cat", "GIT_TERMINAL_PROMPT": "0"}


# The model's shell must not be able to read the user's provider credentials
# (a prompt-injected `env | curl …` would leak them), so they are removed.
_SECRET_SUFFIXES = (
    "_API_KEY",
    "_API_TOKEN",
    "_ACCESS_TOKEN",
    "_SECRET",
    "_SECRET_KEY",
    "_PASSWORD",
)
_SECRET_NAMES = {"OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "ANTHROPIC_API_KEY"}


def shell_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """The environment a shell tool gets: the user's, minus credentials, plus overrides."""
    env = dict(os.environ if base is None else base)
    for name in list(env):
        upper = name.upper()
        if upper in _SECRET_NAMES or upper.endswith(_SECRET_SUFFIXES):
            del env[name]
    env.update(_ENV_OVERRIDES)
    return env


def _exit_text(code: int) -> str:
    if code < 0:
        try:
            return f"{code} (killed by {signal.Signals(-code).name})"
        except ValueError:
            return str(code)
    return str(code)


@tool(
    "execute_bash",
    "Run a bash command in the project root (`bash -c`). stdin is closed, so interactive "
    "programs get EOF. Returns stdout, then stderr under '### STDERR', then the exit code "
    "when it is not 0. The command and everything it started are killed at the timeout "
    "(default 180 s). Background jobs that keep the output open are stopped when the "
    "command ends; redirect their output (`cmd > log 2>&1 &`) to keep them running.",
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
    outcome = await run_process(
        ["bash", "-c", command],
        cwd=ctx.root,
        timeout=timeout,
        cancel_event=ctx.cancel_event,
        # Room for the STDERR header and exit line; if both streams are huge,
        # run_tool's final cap trims the sum.
        max_bytes=max(1000, ctx.max_command_output_chars - 200),
        env=shell_env(),
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
