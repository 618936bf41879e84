"""The turn's background job: summaries without holding the event loop.

The lane summary reads the oldest rows between the last summary and the window
(`Ledger.lane_backlog`) instead of the whole lane, the pure work over many
messages runs in a worker thread, and redaction goes message by message. These
tests check the reads against the whole-lane ones, on ledgers shaped to catch
the edge cases (dropped rows, two lanes, a group that grows after newer groups
exist, a group longer than what one read returns).
"""

from __future__ import annotations

import dataclasses
import threading

import pytest

import slop_tui.continuity.compactor as compactor_mod
from slop_tui.config import load_config
from slop_tui.context.compaction import boundary_prompt, boundary_request
from slop_tui.context.redact import REDACTED, redact_secrets
from slop_tui.context.summaries import standalone_summary_request
from slop_tui.continuity.compactor import MAX_ROLL_MESSAGES, Compactor
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
    covered = [m.id for m in await ws.ledger.group_messages(ws.session, main[1])]
    await ws.ledger.add_summary(ws.session, "main", "lane", covered, "earlier")
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
        for size in (1, 2, 3, 5, 14, 100):
            expected = await old_backlog(ws, lane, size)
            window = await ws.ledger.window(ws.session, size, lane=lane)
            start = min((m.group_id for m in window), default=None)
            got = await ws.ledger.lane_backlog(ws.session, lane, start)
            assert got == expected, (lane, size)
            # A limited read takes whole groups first (a late row stays with its group),
            # and gives the rows in history order: group by group.
            by_group = sorted(expected, key=lambda m: (m.group_id, m.id))
            for limit in (1, 4, len(expected) + 1):
                oldest = await ws.ledger.lane_backlog(ws.session, lane, start, 0, limit)
                assert oldest == by_group[:limit]
                newest = await ws.ledger.lane_backlog(
                    ws.session, lane, start, 0, limit, newest=True
                )
                tail = by_group[-limit:] if expected else []
                assert newest == tail
            if expected:
                after = expected[len(expected) // 2].id
                tail = await ws.ledger.lane_backlog(ws.session, lane, start, after)
                assert tail == [m for m in expected if m.id > after]
    assert await ws.ledger.lane_backlog(ws.session, "main", 2, 0, 0) == []


class Calls:
    """The compactor's model call: records the request, answers `reply` (None: fails)."""

    def __init__(self, reply: str | None) -> None:
        self.reply = reply
        self.requests = []
        self.purposes = []

    async def __call__(self, request, model, purpose):
        self.requests.append(request)
        self.purposes.append(purpose)
        return self.reply


async def test_lane_summary_folds_whole_groups_reading_only_the_oldest(
    open_ws, monkeypatch
) -> None:
    ws = await open_ws()
    # 66 short groups (198 rows), then one group of 150 rows across the 200-row cut,
    # then 30 more short groups.
    shorts = [await group(ws, f"short {i}", 2) for i in range(66)]
    long_gid = await group(ws, "long one", 149)
    for i in range(30):
        await group(ws, f"after {i}", 2)
    await ws.ledger.set_window(ws.session, 3)
    reads = []
    lane_backlog = ws.ledger.lane_backlog

    async def spy_backlog(session, lane, before, after=0, limit=None, **kw):
        reads.append((limit, kw.get("newest", False)))
        return await lane_backlog(session, lane, before, after, limit, **kw)

    monkeypatch.setattr(ws.ledger, "lane_backlog", spy_backlog)
    calls = Calls("<summary>ROLLED</summary>")
    comp = Compactor(ws, calls)
    first = await comp.lane_summary("gpt-4o", "openai")
    assert first is not None and first.summary is not None
    # The first read of 201 rows ended inside the long group: it waits for the next roll.
    rows = await ws.ledger.session_messages(ws.session)
    last_short = max(m.id for m in rows if m.group_id == shorts[-1])
    assert first.summary.last_message_id == last_short
    text = calls.requests[0].messages[0].text
    assert "short 0" in text and "long one" not in text
    # Never the whole lane: the plan reads the newest rows awaiting a summary (at most
    # 301), the roll the oldest 201.
    assert all(limit is not None for limit, _ in reads)
    assert (MAX_ROLL_MESSAGES + 1, False) in reads
    second = await comp.lane_summary("gpt-4o", "openai")
    assert second is not None and second.summary.first_message_id == first.summary.first_message_id
    text = calls.requests[1].messages[0].text
    assert "long one answer 148" in text and "ROLLED" in text  # whole, over the first
    covered = [
        m for m in rows if first.summary.last_message_id < m.id <= second.summary.last_message_id
    ]
    assert long_gid in {m.group_id for m in covered}
    assert calls.purposes == ["summary", "summary"]


async def test_lane_summary_waits_for_seed_002s_thresholds(open_ws) -> None:
    ws = await open_ws(lane_max_messages=4)
    gids = [await group(ws, f"g{i}", 1) for i in range(4)]
    await ws.ledger.set_window(ws.session, 2)
    comp = Compactor(ws, Calls("<summary>S</summary>"))
    assert await comp.lane_summary("gpt-4o", "openai") is None  # 4 rows wait: not > 4
    gids.append(await group(ws, "g4", 1))
    result = await comp.lane_summary("gpt-4o", "openai")
    assert result is not None  # 6 rows > 4: every group that left the window
    rows = await ws.ledger.session_messages(ws.session)
    assert result.summary.last_message_id == max(m.id for m in rows if m.group_id == gids[2])


async def test_the_pure_work_runs_off_the_event_loop_thread(open_ws, monkeypatch) -> None:
    ws = await open_ws(
        compaction_trigger_tokens=200, verbatim_window_tokens=40, lane_max_messages=5
    )
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
    ):
        on_loop_thread(name, getattr(compactor_mod, name))
    comp = Compactor(ws, Calls(None))  # every model call fails: the extractive fallback

    async def notify(*_args) -> None:
        return None

    rolled = await comp.lane_summary("gpt-4o", "openai")  # the 10 groups that left
    assert rolled is not None and rolled.fallback
    done = await comp.after_reply("gpt-4o", "openai", notify)
    assert done is not None and done.case == "summarize" and done.fallback
    assert set(where) >= {
        "decide",
        "extract_anchor_items",
        "extractive_summary",
        "standalone_summary_request",
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
