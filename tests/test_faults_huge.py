"""Huge inputs, headless half: a 10 MB paste, a 5 MB tool output, a
100,000-line file read. Each request stays within the model's input budget, and
what was cut from a request stays recoverable -- through the orchestrator's own
tools (`query_db` pages through the ledger, `read_file` pages through the file).

The paste test counts with the workspace's real counter (o200k for the OpenAI
model), as the app does; "the workspace stays responsive" is measured in the TUI.
"""

from __future__ import annotations

import json
import random
import re

import pytest

from slop_tui.config import load_config
from slop_tui.orchestrator import ErrorEvent, Orchestrator
from slop_tui.tools import run_tool
from slop_tui.tools.base import ToolContext
from slop_tui.workspace import Workspace
from tests.fakeserver import FakeToolCall, Reply
from tests.fault_support import check_openai_request, openai_env

PAGE = 90_000  # characters per query_db read: under its 100,000-character cap


async def _query(ws: Workspace, sql: str) -> list[dict]:
    ctx = ToolContext(ledger=ws.ledger, session=ws.session, project_root=ws.config.project_root)
    res = await run_tool("query_db", {"sql": sql}, ctx)
    assert res.ok, res.text
    body = res.text.split("\n", 1)[1].rsplit("\n\n---", 1)[0]
    return json.loads(body)


async def _read_back(ws: Workspace, message_id: int, pages: int | None = None) -> str:
    """A stored message's content paged through query_db, as the model would read it:
    every page, or (`pages`) that many pages spread over it, joined."""
    (row,) = await _query(ws, f"SELECT length(content) AS n FROM messages WHERE id = {message_id}")
    starts = list(range(1, row["n"] + 1, PAGE))
    if pages is not None and len(starts) > pages:
        starts = [starts[i * (len(starts) - 1) // (pages - 1)] for i in range(pages)]
    parts = []
    for start in starts:
        (page,) = await _query(
            ws,
            f"SELECT substr(content, {start}, {PAGE}) AS t FROM messages WHERE id = {message_id}",
        )
        parts.append(page["t"])
    return "".join(parts)


def _prose(chars: int, seed: int = 7) -> str:
    """Word-like text (not one repeated character, which no paste is): a random block,
    its copies numbered so no two lines are alike."""
    rnd = random.Random(seed)
    words = "the ledger keeps every byte a model saw and the user can read it back".split()
    block = "".join(rnd.choice(words) + rnd.choice("  ,.") + " " for _ in range(2_000))
    copies = chars // len(block) + 1
    return "".join(f"\n{i:06d} {block}" for i in range(copies))[:chars]


@pytest.fixture
async def real_ws(tmp_path, fake_llm):
    (tmp_path / "README.md").write_text("# project\n")
    config = load_config(db=str(tmp_path / ".slop" / "slop.db"), env={}, cwd=tmp_path)
    ws = await Workspace.open(config, env=openai_env(fake_llm))  # the real token counter
    orch = Orchestrator(ws, approve="all")
    yield ws, orch
    await orch.aclose()
    await ws.close()


def _within_budget(ws: Workspace, req) -> None:
    check_openai_request(req.messages)
    info = ws.model_info(req.body["model"])
    text = json.dumps(req.body, ensure_ascii=False)
    assert ws.ledger.count_tokens(text) <= info.max_input_tokens, len(text)


async def test_a_10_mb_paste(real_ws, fake_llm):
    ws, orch = real_ws
    paste = _prose(10_000_000)
    events: list = []
    out = await orch.run_turn(paste, events.append)
    # Far over the model's input: not sent, set aside with one clear error.
    assert not fake_llm.chat_requests
    (err,) = [e for e in events if isinstance(e, ErrorEvent)]
    assert err.error_kind == "context_overflow" and "set aside" in err.message
    assert f"/context restore {out.group_id}" in err.message
    stored = await ws.ledger.get_message(out.group_id)
    assert stored.status == "dropped" and stored.tokens > 1_000_000
    assert stored.content == paste  # every byte kept
    # ... and readable by the model: any page through query_db (first, middle, last).
    got = await _read_back(ws, out.group_id, pages=4)
    idx = [0, 37 * PAGE, 74 * PAGE, 111 * PAGE]
    assert got == "".join(paste[i : i + PAGE] for i in idx)

    fake_llm.enqueue(Reply(text="ready for the next question"))
    assert (await orch.run_turn("a normal question")).text == "ready for the next question"
    _within_budget(ws, fake_llm.last_chat)
    assert paste[:1000] not in json.dumps(fake_llm.last_chat.body)


async def test_a_5_mb_tool_output(real_ws, fake_llm):
    ws, orch = real_ws
    cmd = "yes 'one line of a very chatty build log' | head -c 5000000"
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("execute_bash", {"command": cmd}, id="big")]),
        Reply(text="the build log is long"),
    )
    out = await orch.run_turn("run the build")
    assert out.error is None
    (result,) = [
        m for m in await ws.ledger.group_messages(ws.session, out.group_id) if m.role == "tool"
    ]
    # A command's output cannot be read again: the ledger keeps all 5,000,000 bytes.
    line = "one line of a very chatty build log\n"
    output = (line * (5_000_000 // len(line) + 1))[:5_000_000]
    assert result.content == f"### TOOL_RESULT: execute_bash\n{output}\n\n---"
    sent = [m for m in fake_llm.last_chat.messages if m["role"] == "tool"][0]["content"]
    assert len(sent) < len(result.content) // 4  # cut further by the tiers in the request
    hint = re.search(r"query_db\(sql=\"SELECT content FROM messages WHERE id=(\d+)", sent)
    assert hint and int(hint.group(1)) == result.id
    _within_budget(ws, fake_llm.last_chat)
    assert await _read_back(ws, result.id) == result.content  # what the hint promises


async def test_a_100000_line_file(real_ws, fake_llm, tmp_path):
    ws, orch = real_ws
    lines = [f"row {i:06d}: " + "payload " * (i % 7) for i in range(1, 100_001)]
    (tmp_path / "big.txt").write_text("\n".join(lines) + "\n")
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("read_file", {"path": "big.txt"}, id="r1")]),
        Reply(
            tool_calls=[
                FakeToolCall("read_file", {"path": "big.txt", "start_line": 99_990}, id="r2")
            ]
        ),
        Reply(text="I have seen its start and its end"),
    )
    out = await orch.run_turn("read big.txt")
    assert out.error is None
    first, last = [
        m for m in await ws.ledger.group_messages(ws.session, out.group_id) if m.role == "tool"
    ]
    assert "TOTAL_LINES: 100000 | RANGE: 1-2000" in first.content
    assert "start_line=2001" in first.content  # how to read on
    assert "1: row 000001" in first.content and "2001: row" not in first.content
    assert "RANGE: 99990-100000" in last.content and "100000: row 100000" in last.content
    for req in fake_llm.chat_requests:
        _within_budget(ws, req)
    assert await _read_back(ws, first.id) == first.content
