"""Trashed rows never reach a request, query_db, a summary or a handoff.

A turn carries a code word everywhere a turn can put it (the prompt, a tool
result, the answer, its STATE) and a lane summary is made from it; then the
group is removed. From then on the code word appears in no request the fake
server receives (turns and summary requests), in no summary or handoff the
ledger stores, and in nothing query_db can read. Restoring the group brings
it back, which shows the checks could fail.
"""

from __future__ import annotations

import dataclasses
import json

from slop_tui.commands import dispatch
from slop_tui.tools import ToolContext, run_tool
from tests.fakeserver import FakeToolCall, Reply
from tests.test_continuity_turns import _no_git, history, make  # noqa: F401  (fixtures)

WORD = "ZARQON-PLANET-42"


def _summary_reply(request) -> Reply:
    """A summary that repeats the code word when the request holds it."""
    seen = WORD in json.dumps(request.body)
    return Reply(
        text=f"<summary>The user asked things{' about ' + WORD if seen else ''}.</summary>"
    )


async def _readable(ctx: ToolContext) -> str:
    """Everything query_db can read: every row of every table it lets a SELECT see."""
    tables = await ctx.ledger._tuples(
        "SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
        "AND name NOT LIKE 'memos_fts_%'"
    )
    out = []
    for (name,) in tables:
        result = await run_tool("query_db", {"sql": f'SELECT * FROM "{name}"'}, ctx)
        out.append(f"{name}: {result.text}")
    return "\n".join(out)


async def test_a_trashed_group_never_reaches_a_request_query_db_a_summary_or_a_handoff(
    make,  # noqa: F811
    fake_llm,
    tmp_path,
):
    # A group that leaves the 1-group window is summarized at once.
    ws, orch = await make(compaction={"lane_max_messages": 1})
    await ws.ledger.set_window(ws.session, 1)
    await history(ws, 2, 5)
    (tmp_path / "notes.txt").write_text(f"the code word is {WORD}\n")
    fake_llm.default_reply = _summary_reply
    fake_llm.enqueue(
        Reply(tool_calls=[FakeToolCall("read_file", {"path": "notes.txt"})]),
        Reply(text=f"It is {WORD}.\n### STATE\nGoal: keep {WORD} safe"),
    )
    out = await orch.run_turn(f"what is the code word? {WORD}?")
    await orch.wait_background()
    word_group = out.group_id
    fake_llm.enqueue(Reply(text="noted"))
    await orch.run_turn("something else")
    await orch.wait_background()
    # Before the removal the word is in a stored summary (it left the 1-group window).
    summaries = await ws.ledger.summaries(ws.session, "main")
    assert any(WORD in s.content for s in summaries)
    await ws.write_handoff("checkpoint")
    ctx = ToolContext(ledger=ws.ledger, session=ws.session, project_root=tmp_path)
    assert WORD in await _readable(ctx)

    removed = await dispatch(ws, f"/message remove {word_group}")
    assert removed.ok
    seen = len(fake_llm.requests)
    for text in ("and now?", "one more"):
        fake_llm.enqueue(Reply(text="fine"))
        await orch.run_turn(text)
        await orch.wait_background()
    await ws.write_handoff("manual")
    handoff = await dispatch(ws, "/handoff write")
    assert handoff.ok

    sent = [json.dumps(r.body) for r in fake_llm.requests[seen:]]
    assert len(sent) >= 3 and not [b for b in sent if WORD in b]
    stored = [s.content for s in await ws.ledger.summaries(ws.session, "main")]
    stored += [r[0] for r in await ws.ledger._tuples("SELECT content FROM summaries")]
    assert stored and not [s for s in stored if WORD in s]
    handoffs = [json.dumps(dataclasses.asdict(h)) for h in await ws.ledger.handoffs(ws.session)]
    assert handoffs and not [h for h in handoffs if WORD in h]
    readable = await _readable(ctx)
    assert WORD not in readable
    assert "query_db: refused: reading trash_messages (query_db sees this session" in readable
    schema = await run_tool("describe_db", {}, ctx)
    assert "trash_" not in schema.text and "messages" in schema.text

    # Still recoverable: the trash gives it back, and then query_db sees it again.
    (entry,) = [e for e in await ws.ledger.trash() if e.group_id == word_group]
    assert (await dispatch(ws, f"/trash restore {entry.id}")).ok
    assert WORD in await _readable(ctx)
