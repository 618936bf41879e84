"""Ledger continuity: schema upgrades, summaries (a cache that never changes a row)
and the one hook that keeps them true to the history, the compaction log,
handoffs, files in context and lanes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from slop_tui.ledger import Ledger, LedgerError, check_lane, lane_group, reply_lane
from slop_tui.ledger.schema import MIGRATIONS, SCHEMA_VERSION
from slop_tui.records import SUMMARY_DISCARDED, SUMMARY_STALE, Handoff, NewMessage


@pytest.fixture
async def ledger(tmp_path: Path):
    led = await Ledger.open(tmp_path / "slop.db", count_tokens=len)
    yield led
    await led.close()


async def _group(
    led: Ledger,
    session: str,
    prompt: str,
    *,
    lane: str | None = None,
    tool: bool = True,
    answer_status: str = "completed",
) -> int:
    user = await led.append_user(session, prompt, lane=lane)
    rows = []
    if tool:
        rows += [
            NewMessage("assistant", f"call for {prompt}", status="tool_call", tool_call_id="c1"),
            NewMessage("tool", f"result for {prompt}", tool_call_id="c1", tool_name="read_file"),
        ]
    rows.append(NewMessage("assistant", f"answer to {prompt}", status=answer_status))
    await led.append(session, user.id, rows)
    return user.id


async def _rows(led: Ledger, session: str) -> list[tuple]:
    rows = await led._all(
        "SELECT id, status, status_before, summary_id FROM messages WHERE session_id=? ORDER BY id",
        (session,),
    )
    return [tuple(r) for r in rows]


# -- schema v2 -----------------------------------------------------------------


def _v1_database(path: Path) -> None:
    con = sqlite3.connect(path)
    try:
        for stmt in MIGRATIONS[0]:
            con.execute(stmt)
        con.execute(
            "INSERT INTO sessions(name, scratchpad, lane, created_at, updated_at) "
            "VALUES ('old', '- [ ] keep me', 'topic:x', 1, 2)"
        )
        con.execute(
            "INSERT INTO messages(session_id, group_id, lane, role, content, status, created_at, "
            "tokens) VALUES ('old', NULL, 'main', 'user', 'hello v1', 'completed', 1, 8)"
        )
        con.execute("UPDATE messages SET group_id=id")
        con.execute(
            "INSERT INTO messages(session_id, group_id, lane, role, content, status, "
            "status_before, created_at, tokens) "
            "VALUES ('old', 1, 'main', 'assistant', 'hidden', 'dropped', 'error', 1, 6)"
        )
        con.execute(
            "INSERT INTO summaries(session_id, lane, kind, first_message_id, last_message_id, "
            "content, created_at) VALUES ('old', 'main', 'lane', 1, 2, 'v1 summary', 3)"
        )
        con.execute("INSERT INTO memos(content, tags, created_at) VALUES ('port 8080', '[]', 1)")
        con.execute("PRAGMA user_version=1")
        con.commit()
    finally:
        con.close()


async def test_a_v1_database_upgrades_with_its_data_intact(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    _v1_database(path)
    assert SCHEMA_VERSION == len(MIGRATIONS) >= 3
    led = await Ledger.open(path, count_tokens=len)
    try:
        assert (await led._one("PRAGMA user_version"))[0] == SCHEMA_VERSION
        sess = await led.get_session("old")
        assert sess is not None
        assert (sess.scratchpad, sess.lane, sess.message_count, sess.token_total) == (
            "- [ ] keep me",
            "topic:x",
            2,
            14,
        )
        msgs = await led.session_messages("old")
        assert [(m.content, m.status) for m in msgs] == [
            ("hello v1", "completed"),
            ("hidden", "dropped"),
        ]
        assert await _rows(led, "old") == [
            (1, "completed", None, None),
            (2, "dropped", "error", None),
        ]
        # the v1 summary is kept and valid
        [summary] = await led.summaries("old")
        assert summary.content == "v1 summary"
        # a memo from before provenance was recorded: its author is unknown
        assert [(m.content, m.source) for m in await led.list_memos()] == [("port 8080", "unknown")]
        tables = {name for name, _ in await led.schema_sql()}
        assert {"compaction_log", "handoffs", "context_files"} <= tables
        # the new tables work on the upgraded file
        await led.log_compaction(
            "old", case_kind="truncate", trigger="t", tokens_before=10, tokens_after=5
        )
        await led.add_context_file("old", "a.py")
        assert [f.path for f in await led.context_files("old")] == ["a.py"]
        # the restore of a v1 drop still works after the upgrade
        assert await led.set_group_dropped("old", 1, False) == 1
        assert (await led.get_message(2)).status == "error"
    finally:
        await led.close()
    # reopening does not migrate again
    led = await Ledger.open(path, count_tokens=len)
    try:
        assert (await led._one("PRAGMA user_version"))[0] == SCHEMA_VERSION
        assert len(await led.compaction_log("old")) == 1
    finally:
        await led.close()


async def test_a_v2_database_gets_its_summarized_rows_back(tmp_path: Path) -> None:
    """Version 2 hid rows behind summaries for good; version 3 gives every row its own
    status back and keeps the summaries (those a roll had replaced become reusable)."""
    path = tmp_path / "v2.db"
    con = sqlite3.connect(path)
    try:
        for stmt in [*MIGRATIONS[0], *MIGRATIONS[1]]:
            con.execute(stmt)
        con.execute("INSERT INTO sessions(name, created_at, updated_at) VALUES ('old', 1, 2)")
        rows = [
            # id, group, role, status, status_before, summary_id, summary_status
            (1, 1, "user", "summarized", "completed", 1, "completed"),
            (2, 1, "assistant", "summarized", "tool_call", 1, "tool_call"),
            (3, 1, "tool", "summarized", "error", 1, "error"),
            (4, 4, "user", "summarized", "completed", 2, "completed"),
            (5, 4, "assistant", "dropped", "summarized", 2, "interrupted"),
            (6, 6, "user", "completed", None, None, None),
        ]
        for rid, gid, role, status, before, sid, sstatus in rows:
            con.execute(
                "INSERT INTO messages(id, session_id, group_id, role, content, status, "
                "status_before, summary_id, summary_status, created_at) "
                "VALUES (?, 'old', ?, ?, 'x', ?, ?, ?, ?, 1)",
                (rid, gid, role, status, before, sid, sstatus),
            )
        con.execute(
            "INSERT INTO summaries(id, session_id, lane, kind, first_message_id, "
            "last_message_id, content, created_at, superseded) "
            "VALUES (1, 'old', 'main', 'lane', 1, 3, 'first', 1, 1)"
        )
        con.execute(
            "INSERT INTO summaries(id, session_id, lane, kind, first_message_id, "
            "last_message_id, content, created_at, superseded) "
            "VALUES (2, 'old', 'main', 'lane', 1, 5, 'rolled', 2, 0)"
        )
        con.execute(
            "INSERT INTO summaries(id, session_id, lane, kind, first_message_id, "
            "last_message_id, content, created_at, superseded) "
            "VALUES (3, 'old', 'main', 'compaction', 1, 1, 'undone', 3, 1)"
        )
        con.execute("PRAGMA user_version=2")
        con.commit()
    finally:
        con.close()
    led = await Ledger.open(path, count_tokens=len)
    try:
        assert await _rows(led, "old") == [
            (1, "completed", None, None),
            (2, "tool_call", None, None),
            (3, "error", None, None),
            (4, "completed", None, None),
            (5, "dropped", "interrupted", None),
            (6, "completed", None, None),
        ]
        # the rolled-over summary is valid again; the un-compacted one stays discarded
        assert [x.id for x in await led.summaries("old")] == [1, 2]
        assert {m.group_id for m in await led.window("old", 0)} == {1, 4, 6}
        assert await led.set_group_dropped("old", 4, False) == 1
        assert (await led.get_message(5)).status == "interrupted"
        cols = {r["name"] for r in await led._all("PRAGMA table_info(usage)")}
        assert "purpose" in cols
    finally:
        await led.close()


async def test_a_new_ledger_has_the_current_tables_and_columns(ledger: Ledger) -> None:
    cols = {r["name"] for r in await ledger._all("PRAGMA table_info(summaries)")}
    assert "superseded" in cols
    cols = {r["name"] for r in await ledger._all("PRAGMA table_info(usage)")}
    assert "purpose" in cols
    tables = {name for name, _ in await ledger.schema_sql()}
    assert {"compaction_log", "handoffs", "context_files"} <= tables


# -- summaries --------------------------------------------------------------------


async def test_a_summary_changes_no_row_and_rolls_over_the_previous_one(ledger: Ledger) -> None:
    s = "work"
    g1 = await _group(ledger, s, "one")
    g2 = await _group(ledger, s, "two", answer_status="interrupted")
    g3 = await _group(ledger, s, "three")
    before_rows = await _rows(ledger, s)
    before_window = await ledger.window(s, 0)
    ids1 = [m.id for m in await ledger.group_messages(s, g1)]
    ids2 = [m.id for m in await ledger.group_messages(s, g2)]
    first = await ledger.add_summary(s, "main", "lane", ids1, "one happened")
    rolled = await ledger.add_summary(s, "main", "lane", ids2, "one and two", first)
    assert (first.first_message_id, first.last_message_id) == (ids1[0], ids1[-1])
    assert (rolled.first_message_id, rolled.last_message_id) == (ids1[0], ids2[-1])
    assert (first.version, rolled.version) == (1, 2)
    # no row changed: the window is a view, the summaries a cache
    assert await _rows(ledger, s) == before_rows
    assert await ledger.window(s, 0) == before_window
    assert [x.id for x in await ledger.summaries(s, "main")] == [first.id, rolled.id]
    assert {m.group_id for m in await ledger.window(s, 0)} == {g1, g2, g3}
    with pytest.raises(LedgerError, match="at least one"):
        await ledger.add_summary(s, "main", "lane", [], "nothing")


async def test_an_edit_under_a_summary_takes_it_out_of_date(ledger: Ledger) -> None:
    s = "work"
    g1 = await _group(ledger, s, "one")
    g2 = await _group(ledger, s, "two")
    g3 = await _group(ledger, s, "three")
    side = await _group(ledger, s, "side", lane="topic:x")
    ids = {g: [m.id for m in await ledger.group_messages(s, g)] for g in (g1, g2, g3)}
    first = await ledger.add_summary(s, "main", "lane", ids[g1], "one")
    second = await ledger.add_summary(s, "main", "lane", ids[g2], "one and two", first)
    other = await ledger.add_summary(s, "topic:x", "lane", [side], "side")
    # dropping group two: the summary holding it goes out of date, the older one stays
    await ledger.set_group_dropped(s, g2, True)
    assert [x.id for x in await ledger.summaries(s, "main")] == [first.id]
    assert await ledger.summary_state(second.id) == SUMMARY_STALE
    assert [x.id for x in await ledger.summaries(s, "topic:x")] == [other.id]
    # restoring it does not bring the old summary back (it lacked nothing, but the
    # history under it changed twice: a new summary is made from the rows)
    await ledger.set_group_dropped(s, g2, False)
    assert [x.id for x in await ledger.summaries(s, "main")] == [first.id]
    # removing group one takes the first out of date too
    await ledger.remove_group(s, g1)
    assert await ledger.summaries(s, "main") == []
    # a group newer than every summary changes none; the hook reports how many changed
    third = await ledger.add_summary(s, "main", "lane", ids[g2], "two")
    assert await ledger.history_changed(s, [g3]) == 0
    assert await ledger.history_changed(s, [g2]) == 1
    assert await ledger.summary_state(third.id) == SUMMARY_STALE
    assert await ledger.history_changed(s, []) == 0


async def test_discarding_a_summary_takes_the_later_ones_with_it(ledger: Ledger) -> None:
    s = "work"
    g1 = await _group(ledger, s, "one")
    g2 = await _group(ledger, s, "two")
    first = await ledger.add_summary(s, "main", "lane", [g1], "one")
    second = await ledger.add_summary(s, "main", "lane", [g2], "two", first)
    assert await ledger.discard_summary(s, first.id) == 2
    assert await ledger.summaries(s) == []
    assert await ledger.summary_state(second.id) == SUMMARY_DISCARDED
    assert await ledger.discard_summary(s, first.id) == 0
    with pytest.raises(LedgerError, match="no summary"):
        await ledger.discard_summary(s, 999)
    foreign = await ledger.add_summary("b", "main", "lane", [g1], "y")
    with pytest.raises(LedgerError, match="no summary"):
        await ledger.discard_summary(s, foreign.id)


async def test_the_backlog_reads_what_lies_between_a_summary_and_the_window(
    ledger: Ledger,
) -> None:
    s = "work"
    gids = [await _group(ledger, s, f"g{i}") for i in range(5)]
    await _group(ledger, s, "side", lane="topic:x")
    rows = await ledger.lane_backlog(s, "main", gids[3], gids[0] + 3)
    assert {m.group_id for m in rows} == {gids[1], gids[2]}
    assert [m.id for m in rows] == sorted(m.id for m in rows)
    newest = await ledger.lane_backlog(s, "main", gids[3], 0, 4, newest=True)
    assert [m.id for m in newest] == [m.id for m in await ledger.group_messages(s, gids[2])]
    # the what-if reads of a projection: a group as if dropped, or as if restored
    await ledger.set_group_dropped(s, gids[1], True)
    assert gids[1] not in {m.group_id for m in await ledger.lane_backlog(s, "main", gids[3])}
    shown = await ledger.lane_backlog(s, "main", gids[3], show=[gids[1]])
    assert {m.status for m in shown if m.group_id == gids[1]} == {"completed", "tool_call"}
    hidden = await ledger.window(s, 2, "main", hide=[gids[4]])
    assert {m.group_id for m in hidden} == {gids[2], gids[3]}
    restored = await ledger.window(s, 0, show=[gids[1]])
    assert gids[1] in {m.group_id for m in restored}


# -- compaction log --------------------------------------------------------------


async def test_the_compaction_log_records_and_reports_undone_summaries(ledger: Ledger) -> None:
    s = "work"
    g1 = await _group(ledger, s, "one")
    ids = [m.id for m in await ledger.group_messages(s, g1)]
    summary = await ledger.add_summary(s, "main", "compaction", ids, "sum")
    r1 = await ledger.log_compaction(
        s,
        case_kind="summarize",
        trigger="history 25000 > 24000 tokens",
        tokens_before=25000,
        tokens_after=3000,
        summary_id=summary.id,
        first_message_id=ids[0],
        last_message_id=ids[-1],
        detail="summarized 1 group",
    )
    r2 = await ledger.log_compaction(
        s,
        case_kind="shed",
        trigger="request at 93%",
        tokens_before=900,
        tokens_after=700,
        lane="topic:x",
        detail="dropped big.log from the files layer",
    )
    log = await ledger.compaction_log(s)
    assert [r.id for r in log] == [r2.id, r1.id]
    assert log[1] == r1 and not log[1].undone
    assert (log[0].lane, log[0].summary_id, log[0].first_message_id) == ("topic:x", None, None)
    assert [r.id for r in await ledger.compaction_log(s, 1)] == [r2.id]
    await ledger.discard_summary(s, summary.id)
    assert (await ledger.compaction_log(s))[1].undone
    await ledger.set_group_dropped(s, g1, True)  # discarded stays discarded, not stale
    assert not (await ledger.compaction_log(s))[1].stale
    with pytest.raises(LedgerError, match="unknown compaction case"):
        await ledger.log_compaction(
            s, case_kind="magic", trigger="", tokens_before=1, tokens_after=1
        )
    assert len(await ledger.compaction_log(s, 0)) == 2
    assert await ledger.compaction_log("elsewhere") == []


# -- handoffs ----------------------------------------------------------------------


async def test_handoffs_round_trip_and_are_consumed_once(ledger: Ledger) -> None:
    h = Handoff(
        session="work",
        reason="exit",
        task="Ship lanes",
        branch="main",
        head_commit="abc123",
        modified_files=("a.py", "ü b.py"),
        untracked_files=("new.txt",),
        completed=("plan",),
        remaining=("code", "tests"),
        decisions=("SQLite only",),
        continuation="Continue working on: Ship lanes\nNext step: code",
    )
    assert await ledger.latest_handoff("work") is None
    first = await ledger.add_handoff(h)
    assert first.id > 0 and first.created_at > 0 and not first.consumed
    assert first == Handoff(**{**_fields(h), "id": first.id, "created_at": first.created_at})
    second = await ledger.add_handoff(Handoff(session="work", reason="checkpoint", task="t"))
    other = await ledger.add_handoff(Handoff(session="other", reason="manual"))
    assert await ledger.latest_handoff("work") == second
    assert await ledger.latest_handoff("work", unconsumed_only=True) == second
    assert [x.id for x in await ledger.handoffs("work")] == [second.id, first.id]

    assert await ledger.mark_handoff_consumed(second.id) == 2  # it and the older one
    assert await ledger.latest_handoff("work", unconsumed_only=True) is None
    assert (await ledger.latest_handoff("work")).consumed
    assert not (await ledger.get_handoff(other.id)).consumed
    assert await ledger.mark_handoff_consumed(second.id) == 0
    with pytest.raises(LedgerError, match="unknown handoff reason"):
        await ledger.add_handoff(Handoff(session="work", reason="whim"))


def _fields(h: Handoff) -> dict:
    return {name: getattr(h, name) for name in h.__slots__}


# -- files in context --------------------------------------------------------------


async def test_context_files_are_kept_per_session(ledger: Ledger) -> None:
    first = await ledger.add_context_file("work", "src/a.py")
    again = await ledger.add_context_file("work", "src/a.py")
    assert again == first
    await ledger.add_context_file("work", "README.md")
    await ledger.add_context_file("other", "src/a.py")
    assert [f.path for f in await ledger.context_files("work")] == ["src/a.py", "README.md"]
    assert await ledger.remove_context_file("work", "src/a.py")
    assert not await ledger.remove_context_file("work", "src/a.py")
    assert [f.path for f in await ledger.context_files("work")] == ["README.md"]
    assert [f.path for f in await ledger.context_files("other")] == ["src/a.py"]
    await ledger.remove_session("work")
    assert await ledger.context_files("work") == []
    with pytest.raises(LedgerError):
        await ledger.add_context_file("work", "")


# -- lanes -------------------------------------------------------------------------


async def test_lanes_are_counted_and_windows_never_mix(ledger: Ledger) -> None:
    s = "work"
    m1 = await _group(ledger, s, "main one")
    t1 = await _group(ledger, s, "topic one", lane="topic:db", tool=False)
    m2 = await _group(ledger, s, "main two", tool=False)
    r1 = await _group(ledger, s, "reply one", lane=reply_lane(m1), tool=False)
    t2 = await _group(ledger, s, "topic two", lane="topic:db", tool=False)
    assert {m.group_id for m in await ledger.window(s, 10, lane="main")} == {m1, m2}
    assert {m.group_id for m in await ledger.window(s, 10, lane="topic:db")} == {t1, t2}
    assert {m.group_id for m in await ledger.window(s, 1, lane="topic:db")} == {t2}
    assert {m.group_id for m in await ledger.window(s, 0, lane=f"reply:{m1}")} == {r1}

    lanes = await ledger.lanes(s)
    assert [i.lane for i in lanes] == ["main", "topic:db", f"reply:{m1}"]
    main = lanes[0]
    assert (main.groups, main.messages, main.summarized) == (2, 6, 0)
    assert main.tokens == sum(m.tokens for m in await ledger.window(s, 0, lane="main"))
    ids = [m.id for m in await ledger.group_messages(s, t1)]
    await ledger.add_summary(s, "topic:db", "lane", ids, "topic summary")
    topic = await ledger.lane_info(s, "topic:db")
    assert (topic.groups, topic.messages, topic.summarized) == (2, 4, 2)
    assert topic.last_summary_at is not None
    empty = await ledger.lane_info(s, "topic:none")
    assert (empty.groups, empty.messages, empty.last_used) == (0, 0, 0.0)
    assert await ledger.group_exists(s, m1) and not await ledger.group_exists("x", m1)


@pytest.mark.parametrize("lane", ["main", "topic:db", "topic:a.b-c_d", "reply:12", "topic:ünï"])
def test_lane_names_of_the_three_forms_are_accepted(lane: str) -> None:
    assert check_lane(lane) == lane


@pytest.mark.parametrize(
    "lane",
    [
        "",
        "Main",
        "topic:",
        "topic:a b",
        "reply:",
        "reply:0",
        "reply:x",
        "reply:-1",
        "thread:1",
        "topic:" + "x" * 65,
        "topic:.hidden",
    ],
)
def test_other_lane_names_are_refused(lane: str) -> None:
    with pytest.raises(LedgerError, match="not a lane name"):
        check_lane(lane)


def test_reply_lanes_name_their_group() -> None:
    assert reply_lane(7) == "reply:7"
    assert lane_group("reply:7") == 7
    assert lane_group("topic:7") is None and lane_group("main") is None


async def test_clear_session_also_clears_compaction_log_and_handoffs(tmp_path):
    from slop_tui.ledger import Ledger
    from slop_tui.records import Handoff

    ledger = await Ledger.open(tmp_path / "clear.db")
    try:
        user = await ledger.append_user("s", "hello")
        await ledger.log_compaction(
            "s",
            case_kind="summarize",
            trigger="t",
            tokens_before=10,
            tokens_after=5,
            lane="main",
            summary_id=None,
            first_message_id=user.id,
            last_message_id=user.id,
            detail="d",
        )
        await ledger.add_handoff(Handoff(id=0, session="s", reason="manual", task="x"))
        await ledger.add_context_file("s", "README.md")
        await ledger.clear_session("s")
        assert await ledger.compaction_log("s", 10) == []
        assert await ledger.latest_handoff("s", False) is None
        assert [f.path for f in await ledger.context_files("s")] == ["README.md"]
    finally:
        await ledger.close()
