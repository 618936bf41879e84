"""The tool registry and the one entry point that runs a tool call.

`run_tool` never raises for a tool's failure: unknown tools, bad arguments,
`ToolError`s and unexpected exceptions all become an error result the model
can read. Only `asyncio.CancelledError` (and other BaseExceptions) propagate,
after the tool has cleaned up (killed its processes, stopped its query).
"""

from __future__ import annotations

import asyncio
import json
import logging
from typing import Any

from slop_tui.context.prompt import ToolSpec
from slop_tui.tools import db, files, knowledge, search, shell, web
from slop_tui.tools.args import parse_arguments, validate
from slop_tui.tools.base import (
    KIND_SHELL,
    Reply,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
    cap_text,
    error_result,
)
from slop_tui.tools.base import ok_result as _ok

log = logging.getLogger(__name__)

# The order tools are declared to the model in.
REGISTRY: dict[str, Tool] = {
    t.name: t
    for t in (*db.TOOLS, *knowledge.TOOLS, *files.TOOLS, *search.TOOLS, *shell.TOOLS, *web.TOOLS)
}


def all_tools() -> list[Tool]:
    return list(REGISTRY.values())


def get_tool(name: str) -> Tool | None:
    return REGISTRY.get(name)


def tool_specs(names: set[str] | None = None) -> tuple[ToolSpec, ...]:
    """Declarations for a request, optionally only the named (enabled) tools."""
    return tuple(t.spec() for t in REGISTRY.values() if names is None or t.name in names)


def registry_rows() -> list[tuple[str, str, str]]:
    """(name, description, JSON schema) rows for `Ledger.register_tools`."""
    return [(t.name, t.description, json.dumps(t.parameters)) for t in REGISTRY.values()]


async def run_tool(
    name: str, arguments: dict[str, Any] | str | None, ctx: ToolContext
) -> ToolResult:
    """Run one tool call and frame its result; counts successful calls in the ledger."""
    if ctx.cancelled():  # cancelled while queued: do not start it
        raise asyncio.CancelledError("tool call cancelled before it started")
    tool = REGISTRY.get(name)
    if tool is None:
        known = ", ".join(REGISTRY)
        return error_result(name, f"unknown tool '{name}'. Available tools: {known}")
    cap = ctx.max_command_output_chars if tool.kind == KIND_SHELL else ctx.max_output_chars
    try:
        args = validate(tool, parse_arguments(name, arguments))
        body = await tool.run(args, ctx)
    except ToolError as exc:
        return error_result(name, exc.message, cap_text(exc.detail, cap))
    except asyncio.CancelledError:
        raise
    except Exception as exc:  # a bug or an unexpected OS error must not end the turn
        log.exception("tool %s failed", name)
        return error_result(name, f"{name} failed unexpectedly: {type(exc).__name__}: {exc}")
    try:
        await ctx.ledger.count_tool_call(name)
    except Exception:  # the count is bookkeeping; losing one must not lose the result
        log.warning("could not count a call of %s", name, exc_info=True)
    if isinstance(body, Reply):
        return _ok(name, cap_text(body.body, cap), body.notice, body.images)
    return _ok(name, cap_text(body, cap))
