"""An opened tool output shows one column of line numbers: read_file's own, or the
viewer's for output that has none."""

from __future__ import annotations

import re

from slop_tui.records import NewMessage
from slop_tui.ui.text import carries_line_numbers
from slop_tui.ui.widgets.blocks import ToolBlock
from tests import test_app
from tests.fakeserver import wait_for
from tests.test_app import started
from tests.test_app_actions import make_app, seed
from tests.test_hostile_inputs import call_payload, screen_text

project = test_app.project

FILE = (
    "### FILE: notes.txt | TOTAL_LINES: 3 | RANGE: 1-3\n1: alpha line\n2: beta line\n3: gamma line"
)
BASH = "alpha out\nbeta out\ngamma out"


def test_numbered_text_is_told_from_text_that_starts_with_numbers():
    assert carries_line_numbers(FILE)
    assert not carries_line_numbers(BASH)
    assert not carries_line_numbers("3: three\n1: one\n2: two")  # not in order
    assert not carries_line_numbers("404: not found")  # one line is no column


async def opened_lines(pilot, tool: str, output: str) -> list[str]:
    app = pilot.app
    ws = app.workspace
    user = await ws.ledger.append_user(ws.session, f"use {tool}", strategy="openai")
    await ws.ledger.append(ws.session, user.group_id, [
        NewMessage("assistant", "", status="tool_call", strategy="openai",
                   payload=call_payload(tool, {"path": "notes.txt"})),
        NewMessage("tool", output, tool_call_id="c1", tool_name=tool, strategy="openai"),
        NewMessage("assistant", "done", strategy="openai"),
    ])  # fmt: skip
    await app.workspace_screen.refresh_all(reload_conversation=True)
    await wait_for(pilot, lambda: any(b.tool_name == tool for b in app.query(ToolBlock)))
    block = next(b for b in app.query(ToolBlock) if b.tool_name == tool)
    await block.toggle()
    await pilot.pause()
    block.scroll_visible(animate=False)
    await pilot.pause()
    text = screen_text(app)
    width = app.size.width
    return [text[i : i + width] for i in range(0, len(text), width)]


async def test_read_file_output_shows_its_own_numbers_once(project):
    await seed(project, [("hello", "hi")])
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        lines = await opened_lines(pilot, "read_file", FILE)
        row = next(line for line in lines if "alpha line" in line)
        assert "1: alpha line" in row, row
        assert not re.search(r"\d\s+1: alpha line", row), row  # no viewer's number before it


async def test_output_without_numbers_gets_the_viewers(project):
    await seed(project, [("hello", "hi")])
    app = make_app(project)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        lines = await opened_lines(pilot, "execute_bash", BASH)
        row = next(line for line in lines if "alpha out" in line)
        assert re.search(r"\b1\s+alpha out", row), row  # the viewer's number
