"""run_tool's contract: framing, validation, counting, never raising."""

from __future__ import annotations

import asyncio
import dataclasses
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from slop_tui.tools import (
    REGISTRY,
    ToolContext,
    run_tool,
)
from tests.test_tools_support import EXPECTED, body, tool_context

pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_ctx(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ToolContext]:
    async with tool_context(tmp_path_factory.mktemp("registry")) as c:
        yield c


@pytest.fixture
def ctx(shared_ctx: ToolContext) -> ToolContext:
    return dataclasses.replace(shared_ctx)  # tests may change limits on their copy


async def test_rows_register_in_the_ledger(ctx: ToolContext) -> None:
    names = [t.name for t in await ctx.ledger.list_tools()]
    assert sorted(names) == sorted(EXPECTED)


async def test_success_is_framed_and_counted(ctx: ToolContext) -> None:
    (ctx.root / "a.txt").write_text("hi\n")
    result = await run_tool("read_file", '{"path": "a.txt"}', ctx)  # JSON text is accepted
    assert result.ok and result.name == "read_file"
    assert (
        result.text
        == "### TOOL_RESULT: read_file\n### FILE: a.txt | TOTAL_LINES: 1 | RANGE: 1-1\n1: hi\n\n---"
    )
    assert (await ctx.ledger.get_tool("read_file")).call_count == 1
    failed = await run_tool("read_file", {"path": "missing.txt"}, ctx)
    assert not failed.ok and body(failed).startswith("Error: ")
    assert (await ctx.ledger.get_tool("read_file")).call_count == 1  # failures not counted


@pytest.mark.parametrize(
    ("tool", "args", "message"),
    [
        ("nope", {}, "Error: unknown tool 'nope'. Available tools: " + ", ".join(EXPECTED)),
        ("read_file", "{not json", "Error: read_file: the arguments are not valid JSON"),
        ("read_file", "[1, 2]", "Error: read_file: the arguments must be a JSON object"),
        ("read_file", {}, "Error: read_file: 'path' is required"),
        ("read_file", {"path": None}, "Error: read_file: 'path' is required"),
        ("read_file", {"path": 7}, "Error: read_file: 'path' must be a string"),
        (
            "read_file",
            {"path": "a", "start_line": 1.5},
            "Error: read_file: 'start_line' must be an integer",
        ),
        (
            "read_file",
            {"path": "a", "start_line": True},
            "Error: read_file: 'start_line' must be an integer",
        ),
        (
            "read_file",
            {"path": "a", "end_line": "x"},
            "Error: read_file: 'end_line' must be an integer",
        ),
        (
            "execute_bash",
            {"command": "x", "timeout_seconds": "soon"},
            "Error: execute_bash: 'timeout_seconds' must be a number",
        ),
        (
            "execute_bash",
            {"command": "x", "timeout_seconds": 0},
            "Error: execute_bash: 'timeout_seconds' must be at least 0.1",
        ),
        (
            "apply_patch",
            {"path": "a", "patches": "x"},
            "Error: apply_patch: 'patches' must be an array",
        ),
        (
            "apply_patch",
            {"path": "a", "patches": [1]},
            "Error: apply_patch: 'patches[0]' must be an object",
        ),
        (
            "use_skill",
            {"name": "x", "action": "on"},
            "Error: use_skill: 'action' must be one of activate, deactivate",
        ),
    ],
)
async def test_argument_errors_are_one_friendly_line(
    ctx: ToolContext, tool: str, args: Any, message: str
) -> None:
    result = await run_tool(tool, args, ctx)
    assert not result.ok
    assert body(result).startswith(message)
    assert "\n" not in body(result)


async def test_empty_arguments_and_unknown_ones_refused(ctx: ToolContext) -> None:
    for raw in (None, "", "  ", {}):
        assert (await run_tool("list_directory", raw, ctx)).ok
    result = await run_tool("list_directory", {"path": ".", "verbose": True}, ctx)
    assert not result.ok
    assert body(result) == (
        "Error: list_directory: unknown argument 'verbose'; the valid ones are path, depth"
    )


async def test_unexpected_exceptions_become_error_results(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def boom(args: dict[str, Any], ctx: ToolContext) -> str:
        raise RuntimeError("kaboom")

    monkeypatch.setitem(
        REGISTRY, "describe_db", dataclasses.replace(REGISTRY["describe_db"], run=boom)
    )
    result = await run_tool("describe_db", {}, ctx)
    assert not result.ok
    assert body(result) == "Error: describe_db failed unexpectedly: RuntimeError: kaboom"


async def test_cancellation_propagates(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    async def cancelled(args: dict[str, Any], ctx: ToolContext) -> str:
        raise asyncio.CancelledError

    monkeypatch.setitem(
        REGISTRY, "describe_db", dataclasses.replace(REGISTRY["describe_db"], run=cancelled)
    )
    with pytest.raises(asyncio.CancelledError):
        await run_tool("describe_db", {}, ctx)


async def test_output_is_capped(ctx: ToolContext, monkeypatch: pytest.MonkeyPatch) -> None:
    async def big(args: dict[str, Any], ctx: ToolContext) -> str:
        return "h" * 1000 + "m" * 100_000 + "t" * 1000

    monkeypatch.setitem(
        REGISTRY, "describe_db", dataclasses.replace(REGISTRY["describe_db"], run=big)
    )
    ctx.max_output_chars = 5000
    text = body(await run_tool("describe_db", {}, ctx))
    assert len(text) <= 5000 and text.startswith("h") and text.endswith("t")
    assert "characters of output omitted; capped at 5,000" in text


async def test_status_and_queued_cancellation(ctx: ToolContext) -> None:
    assert (await run_tool("list_directory", {}, ctx)).status == "completed"
    assert (await run_tool("read_file", {}, ctx)).status == "error"
    ctx.cancel_event = asyncio.Event()
    ctx.cancel_event.set()
    with pytest.raises(asyncio.CancelledError):
        await run_tool("list_directory", {}, ctx)


async def test_a_closed_ledger_does_not_lose_the_result(tmp_path: Path) -> None:
    async with tool_context(tmp_path) as c:
        pass  # closed on exit
    result = await run_tool("list_directory", {}, c)
    assert result.ok
