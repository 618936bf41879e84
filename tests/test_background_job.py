"""The turn's background job (issue 5): same compactions, without holding the event loop.

The lane summary reads the oldest rows that left the window (`Ledger.lane_backlog`)
instead of the whole lane, a summary's hidden ids come from one ids-only query
(`Ledger.lane_ids_up_to`), the pure work over many messages runs in a worker
thread, and redaction goes message by message. These tests check that each
replacement gives what the whole-lane code gave, on ledgers shaped to catch
the edge cases (dropped and summarized rows, two lanes, a group that grows
after newer groups exist, a group longer than what one read returns).
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

import slop_tui.continuity.compactor as compactor_mod
import slop_tui.ledger.continuity as continuity_mod
from slop_tui.config import load_config
from slop_tui.context.compaction import boundary_prompt, boundary_request
from slop_tui.context.redact import REDACTED, redact_secrets
from slop_tui.context.summaries import standalone_summary_request
from slop_tui.continuity.compactor import MAX_ROLL_MESSAGES, Compactor, _roll_selection
from slop_tui.ledger import LedgerError
from slop_tui.records import Message, NewMessage
from slop_tui.workspace import Workspace
from tests.workspace_fixtures import rough

SECRET = "sk-proj-Abc123def456GHI789jkl012MNO345pqr"


@pytest.fixture(autouse=True)
def _no_git(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))


@pytest.fixture
async def open_ws(tmp_path):
    opened: list[Workspace] = []

    async def _open(**compaction) -> Workspace:
        config = load_config(db=str(tmp_path / "slop.db"), env={}, cwd=tmp_path)
        config = dataclasses.replace(config, compaction=compaction)
        ws = await Workspace.open(config, "s", count_tokens=rough, env={})
        opened.append(ws)
        return ws

    yield _open
    for ws in opened:
        await ws.close()


async def group(ws: Workspace, text: str, replies: int, *, lane: str | None = None) -> int:
    user = await ws.ledger.append_user(ws.session, text, lane=lane, strategy="openai")
    if replies:
        await ws.ledger.append(
            ws.session,
            user.group_id,
            [NewMessage("assistant", f"{text} answer {i}") for i in range(replies)],
        )
    return user.group_id


async def shaped(ws: Workspace) -> dict[str, list[int]]:
    """Groups in two lanes, one dropped, one summarized, one that grows after newer ones."""
    main = [await group(ws, f"main {i}", i % 3) for i in range(12)]
    topic = [await group(ws, f"topic {i}", 1, lane="topic:db") for i in range(4)]
    main += [await group(ws, f"main late {i}", 2) for i in range(3)]
    await ws.ledger.set_group_dropped(ws.session, main[3], True)
    hidden = [m.id for m in await ws.ledger.group_messages(ws.session, main[1])]
    await ws.ledger.summarize_span(ws.session, "main", "guard", hidden, "earlier")
    await ws.ledger.append(ws.session, main[5], [NewMessage("tool", "late result")])
    return {"main": main, "topic:db": topic}


async def old_backlog(ws: Workspace, lane: str, size: int) -> list[Message]:
    """What the lane summary computed before: the whole lane minus the window."""
    if size <= 0:
        return []
    inside = {m.id for m in await ws.ledger.window(ws.session, size, lane=lane)}
    return [m for m in await ws.ledger.window(ws.session, 0, lane=lane) if m.id not in inside]


async def test_lane_backlog_is_the_lane_minus_its_window(open_ws) -> None:
    ws = await open_ws()
    await shaped(ws)
    for lane in ("main", "topic:db", "topic:none"):
        for size in (0, 1, 2, 3, 5, 14, 100):
            expected = await old_backlog(ws, lane, size)
            assert await ws.ledger.lane_backlog(ws.session, lane, size) == expected, (lane, size)
            for limit in (1, 4, len(expected) + 1):
                got = await ws.ledger.lane_backlog(ws.session, lane, size, limit)
                assert got == expected[:limit]
    assert await ws.ledger.lane_backlog(ws.session, "main", 2, 0) == []


async def test_lane_ids_and_last_summary_match_the_whole_lane_reads(open_ws) -> None:
    ws = await open_ws()
    await shaped(ws)
    for lane in ("main", "topic:db"):
        rows = await ws.ledger.window(ws.session, 0, lane=lane)
        for last in (0, rows[0].id, rows[len(rows) // 2].id, rows[-1].id + 10):
            expected = [m.id for m in rows if m.id <= last]
            assert await ws.ledger.lane_ids_up_to(ws.session, lane, last) == expected
        info = await ws.ledger.lane_info(ws.session, lane)
        assert await ws.ledger.last_summary_at(ws.session, lane) == info.last_summary_at
    assert await ws.ledger.last_summary_at(ws.session, "main") is not None
    assert await ws.ledger.last_summary_at(ws.session, "topic:none") is None


async def test_hiding_rows_goes_in_slices_and_stays_all_or_nothing(open_ws, monkeypatch) -> None:
    monkeypatch.setattr(continuity_mod, "MARK_SLICE", 3)
    ws = await open_ws()
    gids = [await group(ws, f"g{i}", 1) for i in range(6)]
    other = await ws.ledger.append_user("elsewhere", "not this session")
    ids = [m.id for m in await ws.ledger.window(ws.session, 0)]
    with pytest.raises(LedgerError, match="1 of the messages"):
        await ws.ledger.summarize_span(ws.session, "main", "guard", [*ids, other.id], "x")
    assert {m.status for m in await ws.ledger.session_messages(ws.session)} == {"completed"}
    summary = await ws.ledger.summarize_span(ws.session, "main", "guard", ids, "all of it")
    assert await ws.ledger.summarized_ids(ws.session, summary.id) == ids  # 12 rows, 4 slices
    assert await ws.ledger.window(ws.session, 0) == []
    assert await ws.ledger.uncompact(ws.session, summary.id) == len(ids)
    assert [m.group_id for m in await ws.ledger.window(ws.session, 1)] == [gids[-1]] * 2


class Calls:
    """The compactor's model call: records the request, answers `reply` (None: fails)."""

    def __init__(self, reply: str | None) -> None:
        self.reply = reply
        self.requests = []

    async def __call__(self, request, model):
        self.requests.append(request)
        return self.reply


async def test_lane_summary_folds_the_same_rows_reading_only_the_oldest(
    open_ws, monkeypatch
) -> None:
    ws = await open_ws()
    # 66 short groups (198 rows), then one group of 150 rows across the 200-row cut,
    # then 30 more short groups: the roll must take the long group whole.
    for i in range(66):
        await group(ws, f"short {i}", 2)
    long_gid = await group(ws, "long one", 149)
    for i in range(30):
        await group(ws, f"after {i}", 2)
    await ws.ledger.set_window(ws.session, 3)
    settings = ws.compaction_settings()
    backlog = await old_backlog(ws, "main", 3)
    expected = _roll_selection(backlog, settings, None, 0.0, rough)
    assert len(expected) == 198 + 150 and max(expected) < backlog[-1].id

    reads = []
    window, lane_backlog = ws.ledger.window, ws.ledger.lane_backlog

    async def spy_window(session, size, lane=None):
        reads.append(("window", size))
        return await window(session, size, lane=lane)

    async def spy_backlog(session, lane, size, limit=None):
        reads.append(("backlog", limit))
        return await lane_backlog(session, lane, size, limit)

    monkeypatch.setattr(ws.ledger, "window", spy_window)
    monkeypatch.setattr(ws.ledger, "lane_backlog", spy_backlog)
    calls = Calls("<summary>ROLLED</summary>")
    result = await Compactor(ws, calls).lane_summary("gpt-4o", "openai", now=0.0)

    assert result is not None and result.summary is not None
    assert await ws.ledger.summarized_ids(ws.session, result.summary.id) == sorted(expected)
    assert long_gid in {m.group_id for m in await ws.ledger.messages_by_ids(sorted(expected))}
    # Never the whole lane: the first read of 201 rows ended inside the long group,
    # so one more (twice as long) decided the roll.
    assert ("window", 0) not in reads
    assert [r for r in reads if r[0] == "backlog"] == [
        ("backlog", MAX_ROLL_MESSAGES + 1),
        ("backlog", 2 * (MAX_ROLL_MESSAGES + 1)),
    ]
    text = calls.requests[0].messages[0].text
    assert "short 0" in text and "long one answer 148" in text and "after 0" not in text


async def test_lane_summary_with_kept_rows_still_reads_the_thresholds(open_ws) -> None:
    ws = await open_ws(lane_keep_recent=2, lane_max_messages=4)
    gids = [await group(ws, f"g{i}", 1) for i in range(6)]
    await ws.ledger.set_window(ws.session, 2)
    result = await Compactor(ws, Calls("<summary>S</summary>")).lane_summary(
        "gpt-4o", "openai", now=0.0
    )
    assert result is not None
    # Groups 0-3 left the window (8 rows > 4); the newest 2 of them stay verbatim.
    hidden = await ws.ledger.summarized_ids(ws.session, result.summary.id)
    assert {m.group_id for m in await ws.ledger.messages_by_ids(hidden)} == set(gids[:3])


async def test_the_pure_work_runs_off_the_event_loop_thread(open_ws, monkeypatch) -> None:
    ws = await open_ws(compaction_trigger_tokens=200, verbatim_window_tokens=40)
    for i in range(30):
        await group(ws, f"request {i} about port {8000 + i} " + "word " * 20, 1)
    await ws.ledger.set_window(ws.session, 20)
    where: dict[str, list[bool]] = {}

    def on_loop_thread(name, fn):
        def wrapped(*args, **kwargs):
            where.setdefault(name, []).append(threading.current_thread() is threading.main_thread())
            return fn(*args, **kwargs)

        monkeypatch.setattr(compactor_mod, name, wrapped)

    for name in (
        "decide",
        "extract_anchor_items",
        "extractive_summary",
        "standalone_summary_request",
        "stacked_request",
    ):
        on_loop_thread(name, getattr(compactor_mod, name))
    comp = Compactor(ws, Calls(None))  # every model call fails: the extractive fallback

    async def notify(*_args) -> None:
        return None

    sent = await ws.prompt("openai")
    rolled = await comp.lane_summary("gpt-4o", "openai", now=0.0)  # the 10 groups left
    assert rolled is not None and rolled.fallback
    done = await comp.after_reply(sent, "the answer", "gpt-4o", "openai", notify)
    assert done is not None and done.case == "summarize" and done.fallback
    assert set(where) >= {
        "decide",
        "extract_anchor_items",
        "extractive_summary",
        "standalone_summary_request",
        "stacked_request",
    }
    assert not any(any(flags) for flags in where.values()), where


def test_summary_and_boundary_requests_redact_each_message() -> None:
    rows = [
        Message(1, "s", 1, "main", "user", f"my key is {SECRET}"),
        Message(2, "s", 1, "main", "assistant", "-----BEGIN PRIVATE KEY-----\nMIIE" + "A" * 3000),
        Message(3, "s", 1, "main", "user", "next: deploy to port 8080"),
    ]
    text = standalone_summary_request(rows, "openai", count_tokens=rough).messages[0].text
    assert SECRET not in text and REDACTED in text
    assert "MIIE" not in text
    # The PEM block cut at 2,000 characters has no END line: it is redacted to the end
    # of its own message, and the next message is still there.
    assert "next: deploy to port 8080" in text

    plain = [m for m in rows if m.id != 2]
    request = boundary_request(plain, "openai", rough)
    assert request.messages[0].text == redact_secrets(boundary_prompt(plain))
    assert SECRET not in request.messages[0].text
