"""Scratchpad, memo and skill tools against a real ledger."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from slop_tui.tools import ACTIVE_SKILLS_KEY, ToolContext, active_skills, run_tool
from tests.test_tools_support import SESSION, body, tool_context


@pytest.fixture
async def ctx(tmp_path: Path) -> AsyncIterator[ToolContext]:
    async with tool_context(tmp_path) as c:
        yield c


async def call(ctx: ToolContext, tool: str, **args: object) -> tuple[bool, str]:
    result = await run_tool(tool, args, ctx)
    return result.ok, body(result)


async def test_scratchpad_read_update_append(ctx: ToolContext) -> None:
    assert await call(ctx, "manage_scratchpad", action="read") == (True, "Scratchpad is empty.")
    ok, text = await call(ctx, "manage_scratchpad", action="update", content="- [ ] plan")
    assert ok and text == "Scratchpad updated (10 characters)."
    ok, _ = await call(ctx, "manage_scratchpad", action="append", content="- [ ] build")
    assert ok
    assert await call(ctx, "manage_scratchpad", action="read") == (True, "- [ ] plan\n- [ ] build")
    assert (await ctx.ledger.get_session(SESSION)).scratchpad == "- [ ] plan\n- [ ] build"
    ok, text = await call(ctx, "manage_scratchpad", action="append")
    assert not ok and text == "Error: manage_scratchpad: 'content' is required for append"
    ok, text = await call(ctx, "manage_scratchpad", action="erase")
    assert (
        not ok and text == "Error: manage_scratchpad: 'action' must be one of read, update, append"
    )
    ok, _ = await call(ctx, "manage_scratchpad", action="update", content="")
    assert ok and await call(ctx, "manage_scratchpad", action="read") == (
        True,
        "Scratchpad is empty.",
    )


async def test_scratchpad_is_per_session(ctx: ToolContext) -> None:
    await call(ctx, "manage_scratchpad", action="update", content="mine")
    other = ToolContext(ctx.ledger, "other-session", ctx.project_root)
    result = await run_tool("manage_scratchpad", {"action": "read"}, other)
    assert body(result) == "Scratchpad is empty."


async def test_parallel_appends_do_not_lose_text(ctx: ToolContext) -> None:
    await asyncio.gather(
        *(call(ctx, "manage_scratchpad", action="append", content=f"item {i}") for i in range(8))
    )
    text = (await ctx.ledger.get_session(SESSION)).scratchpad
    assert sorted(text.splitlines()) == [f"item {i}" for i in range(8)]


async def test_save_and_retrieve_memos(ctx: ToolContext) -> None:
    ok, text = await call(
        ctx, "save_memo", content="Use WAL mode", tags=["SQLite", "arch-decision"]
    )
    assert ok and text == "Memo 1 saved. Tags: sqlite, arch-decision."
    await call(ctx, "save_memo", content="Archive old logs weekly", tags=["archive"])
    await call(ctx, "save_memo", content="arch mentioned only in text", tags=["misc"])
    ok, text = await call(ctx, "retrieve_memos", tags=["arch"])
    assert ok
    found = json.loads(text)
    assert [m["content"] for m in found] == ["Use WAL mode"]  # not 'archive', not text-only
    assert found[0]["tags"] == ["sqlite", "arch-decision"]
    assert found[0]["created_at"].endswith("+00:00")
    ok, text = await call(ctx, "retrieve_memos", tags=["ARCH-DECISION", "sqlite"])
    assert [m["id"] for m in json.loads(text)] == [1]
    assert await call(ctx, "retrieve_memos", tags=["nothing"]) == (True, "[]")
    ok, text = await call(ctx, "retrieve_memos", tags=[" "])
    assert not ok and "at least one tag" in text
    ok, text = await call(ctx, "save_memo", content="  ", tags=["x"])
    assert not ok and "needs some content" in text
    ok, text = await call(ctx, "save_memo", content="x", tags="not-a-list")
    assert not ok and text == "Error: save_memo: 'tags' must be an array"
    ok, text = await call(ctx, "save_memo", content="x", tags=["ok", 3])
    assert not ok and text == "Error: save_memo: 'tags[1]' must be a string"


async def test_use_skill_activate_counts_and_persists(ctx: ToolContext) -> None:
    planner = await ctx.ledger.get_skill("planner")
    assert planner is not None
    ok, text = await call(ctx, "use_skill", name="planner")
    assert ok and text == f"Skill 'planner' activated.\n\n{planner.prompt_patch}"
    assert await active_skills(ctx.ledger) == ["planner"]
    assert json.loads(await ctx.ledger.get_setting(ACTIVE_SKILLS_KEY)) == ["planner"]
    assert (await ctx.ledger.get_skill("planner")).activation_count == 1
    ok, text = await call(ctx, "use_skill", name="planner", action="activate")
    assert ok and text.startswith("Skill 'planner' is already active.")
    assert (await ctx.ledger.get_skill("planner")).activation_count == 1
    ok, text = await call(ctx, "use_skill", name=str(planner.id))  # by id, stored by name
    assert await active_skills(ctx.ledger) == ["planner"]
    await call(ctx, "use_skill", name="dba")
    assert await active_skills(ctx.ledger) == ["planner", "dba"]
    ok, text = await call(ctx, "use_skill", name="planner", action="deactivate")
    assert ok and text == "Skill 'planner' deactivated."
    assert await active_skills(ctx.ledger) == ["dba"]
    assert (await ctx.ledger.get_skill("planner")).activation_count == 1  # not counted
    ok, text = await call(ctx, "use_skill", name="planner", action="deactivate")
    assert ok and text == "Skill 'planner' was not active."


async def test_use_skill_refuses_unknown_names_without_persisting(ctx: ToolContext) -> None:
    ok, text = await call(ctx, "use_skill", name="phantom")
    assert not ok
    assert text == (
        "Error: use_skill: unknown skill 'phantom'. Known skills: planner, code_reviewer, dba."
    )
    assert await ctx.ledger.get_setting(ACTIVE_SKILLS_KEY) is None
    ok, text = await call(ctx, "use_skill", name="phantom", action="deactivate")
    assert not ok and "unknown skill" in text


async def test_use_skill_cleans_a_stale_name(ctx: ToolContext) -> None:
    await ctx.ledger.set_setting(ACTIVE_SKILLS_KEY, json.dumps(["gone", "dba"]))
    ok, text = await call(ctx, "use_skill", name="gone", action="deactivate")
    assert ok and await active_skills(ctx.ledger) == ["dba"]
    await ctx.ledger.set_setting(ACTIVE_SKILLS_KEY, "not json")
    assert await active_skills(ctx.ledger) == []
