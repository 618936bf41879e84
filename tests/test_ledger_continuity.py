"""Ledger continuity (issue 6): schema v2, summarized spans and un-compaction,
the compaction log, handoffs, files in context and lanes."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from slop_tui.ledger import Ledger, LedgerError, check_lane, lane_group, reply_lane
from slop_tui.ledger.schema import MIGRATIONS, SCHEMA_VERSION
from slop_tui.records import Handoff, NewMessage


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


async def test_a_v1_database_upgrades_to_v2_with_its_data_intact(tmp_path: Path) -> None:
    path = tmp_path / "v1.db"
    _v1_database(path)
    assert SCHEMA_VERSION >= 2
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
        # the v1 summary is kept and in effect
        [summary] = await led.active_summaries("old")
        assert summary.content == "v1 summary"
        assert [m.content for m in await led.list_memos()] == ["port 8080"]
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


async def test_a_new_ledger_has_the_v2_tables_and_columns(ledger: Ledger) -> None:
    cols = {r["name"] for r in await ledger._all("PRAGMA table_info(messages)")}
    assert "summary_id" in cols
    cols = {r["name"] for r in await ledger._all("PRAGMA table_info(summaries)")}
    assert "superseded" in cols
    tables = {name for name, _ in await ledger.schema_sql()}
    assert {"compaction_log", "handoffs", "context_files"} <= tables


# -- summarized spans and un-compaction -----------------------------------------


async def test_summarize_then_uncompact_restores_exact_statuses_and_window(ledger: Ledger) -> None:
    s = "work"
    g1 = await _group(ledger, s, "one")
    g2 = await _group(ledger, s, "two", answer_status="interrupted")
    g3 = await _group(ledger, s, "three", tool=False, answer_status="error")
    g4 = await _group(ledger, s, "four")
    await ledger.set_group_dropped(s, g3, True)  # a dropped group inside the span
    before_rows = await _rows(ledger, s)
    before_window = await ledger.window(s, 0)
    before_last2 = await ledger.window(s, 2)

    covered = [m.id for m in await ledger.session_messages(s) if m.group_id in (g1, g2, g3)]
    summary = await ledger.summarize_span(s, "main", "compaction", covered, "one and two happened")
    assert (summary.first_message_id, summary.last_message_id) == (covered[0], covered[-1])

    rows = {r[0]: r for r in await _rows(ledger, s)}
    for rid, status, status_before, _sid in before_rows:
        if rid in covered and status != "dropped":
            assert rows[rid] == (rid, "summarized", status, summary.id)
        else:  # untouched: dropped rows and rows outside the span
            assert rows[rid] == (rid, status, status_before, None)
    window = await ledger.window(s, 0)
    assert {m.group_id for m in window} == {g4}
    assert await ledger.window(s, 2) == window
    assert [x.id for x in await ledger.active_summaries(s, "main")] == [summary.id]
    assert await ledger.summarized_ids(s, summary.id) == [
        r[0] for r in before_rows if r[0] in covered and r[1] != "dropped"
    ]
    assert await ledger.summary_of_message(covered[0]) == summary
    assert await ledger.summary_of_message(before_window[-1].id) is None
    groups = {g.group_id: g.status for g in await ledger.list_groups(s)}
    assert groups[g1] == "summarized" and groups[g4] == "completed"

    restored = await ledger.uncompact(s, summary.id)
    assert restored == sum(1 for r in before_rows if r[0] in covered and r[1] != "dropped")
    assert await _rows(ledger, s) == before_rows
    assert await ledger.window(s, 0) == before_window
    assert await ledger.window(s, 2) == before_last2
    # the summary is kept, marked superseded
    assert await ledger.get_summary(s, summary.id) == summary
    assert await ledger.summary_superseded(summary.id)
    assert await ledger.active_summaries(s) == []
    assert await ledger.summary_of_message(covered[0]) is None
    assert [x.id for x in await ledger.summaries(s)] == [summary.id]
    # a second un-compaction changes nothing
    assert await ledger.uncompact(s, summary.id) == 0
    assert await _rows(ledger, s) == before_rows


async def test_dropping_a_summarized_group_does_not_lose_its_statuses(ledger: Ledger) -> None:
    s = "work"
    g1 = await _group(ledger, s, "one", answer_status="interrupted")
    g2 = await _group(ledger, s, "two")
    original = await _rows(ledger, s)
    window = await ledger.window(s, 0)
    ids = [m.id for m in await ledger.group_messages(s, g1)]
    first = await ledger.summarize_span(s, "main", "compaction", ids, "one")
    # drop and restore the summarized group: it stays summarized
    await ledger.set_group_dropped(s, g1, True)
    await ledger.set_group_dropped(s, g1, False)
    assert {m.group_id for m in await ledger.window(s, 0)} == {g2}
    assert await ledger.uncompact(s, first.id) == len(ids)
    assert await _rows(ledger, s) == original
    assert await ledger.window(s, 0) == window
    # un-compacting while the group is dropped: a later restore is exact
    second = await ledger.summarize_span(s, "main", "compaction", ids, "one again")
    await ledger.set_group_dropped(s, g1, True)
    assert await ledger.uncompact(s, second.id) == 0
    assert {m.group_id for m in await ledger.window(s, 0)} == {g2}
    await ledger.set_group_dropped(s, g1, False)
    assert await _rows(ledger, s) == original
    assert await ledger.window(s, 0) == window


async def test_a_second_summary_leaves_rows_of_the_first_alone(ledger: Ledger) -> None:
    s = "work"
    g1 = await _group(ledger, s, "one")
    g2 = await _group(ledger, s, "two")
    ids1 = [m.id for m in await ledger.group_messages(s, g1)]
    ids2 = [m.id for m in await ledger.group_messages(s, g2)]
    first = await ledger.summarize_span(s, "main", "compaction", ids1, "first")
    second = await ledger.add_summary(s, "main", "compaction", ids1[0], ids2[-1], "second")
    assert second.version == 2
    assert await ledger.mark_summarized(s, ids1 + ids2, second.id) == len(ids2)
    assert await ledger.summarized_ids(s, first.id) == ids1
    assert await ledger.uncompact(s, second.id) == len(ids2)
    assert await ledger.window(s, 0) == await ledger.window(s, 1)  # only g2 visible
    assert await ledger.uncompact(s, first.id) == len(ids1)
    assert {m.group_id for m in await ledger.window(s, 0)} == {g1, g2}


async def test_a_rolled_summary_replaces_the_previous_and_uncompacts_back_to_it(
    ledger: Ledger,
) -> None:
    s = "work"
    g1 = await _group(ledger, s, "one")
    g2 = await _group(ledger, s, "two", answer_status="interrupted")
    g3 = await _group(ledger, s, "three")
    original = await _rows(ledger, s)
    ids1 = [m.id for m in await ledger.group_messages(s, g1)]
    ids2 = [m.id for m in await ledger.group_messages(s, g2)]
    first = await ledger.summarize_span(s, "main", "lane", ids1, "first")
    after_first = await _rows(ledger, s)
    window_after_first = await ledger.window(s, 0)
    rolled = await ledger.roll_summary(s, "main", "lane", first.id, ids2, "first and second")
    # One active lane summary, spanning both; the first is superseded, its rows stay hidden.
    assert [x.id for x in await ledger.active_summaries(s, "main")] == [rolled.id]
    assert (rolled.first_message_id, rolled.last_message_id) == (ids1[0], ids2[-1])
    assert rolled.version == 2
    assert await ledger.summary_superseded(first.id)
    assert await ledger.summarized_ids(s, first.id) == ids1
    assert await ledger.summarized_ids(s, rolled.id) == ids2
    assert {m.group_id for m in await ledger.window(s, 0)} == {g3}
    assert (await ledger.rolled_from(s, rolled.id)).id == first.id
    # The audit log does not call a rolled-up summary undone.
    await ledger.log_compaction(
        s, case_kind="summarize", trigger="t", tokens_before=2, tokens_after=1, summary_id=first.id
    )
    [record] = await ledger.compaction_log(s)
    assert not record.undone
    # Un-compacting the rolled summary brings the first back exactly.
    assert await ledger.uncompact(s, rolled.id) == len(ids2)
    assert await _rows(ledger, s) == after_first
    assert await ledger.window(s, 0) == window_after_first
    assert [x.id for x in await ledger.active_summaries(s, "main")] == [first.id]
    assert await ledger.uncompact(s, rolled.id) == 0  # twice: nothing more
    assert [x.id for x in await ledger.active_summaries(s, "main")] == [first.id]
    assert await ledger.uncompact(s, first.id) == len(ids1)
    assert await _rows(ledger, s) == original
    assert await ledger.active_summaries(s, "main") == []
    # Rolling over a summary that is not in effect is refused.
    with pytest.raises(LedgerError):
        await ledger.roll_summary(s, "main", "lane", first.id, ids2, "x")


async def test_mark_summarized_refuses_foreign_rows_and_summaries(ledger: Ledger) -> None:
    g1 = await _group(ledger, "a", "mine")
    other = await _group(ledger, "b", "theirs")
    ids = [m.id for m in await ledger.group_messages("a", g1)]
    summary = await ledger.add_summary("a", "main", "compaction", ids[0], ids[-1], "x")
    foreign = await ledger.add_summary("b", "main", "compaction", other, other, "y")
    before = await _rows(ledger, "a") + await _rows(ledger, "b")
    with pytest.raises(LedgerError, match="not in session 'a'"):
        await ledger.mark_summarized("a", [*ids, other], summary.id)
    with pytest.raises(LedgerError, match="no summary"):
        await ledger.mark_summarized("a", ids, foreign.id)
    with pytest.raises(LedgerError, match="no summary"):
        await ledger.uncompact("a", 999)
    with pytest.raises(LedgerError, match="at least one"):
        await ledger.summarize_span("a", "main", "compaction", [], "nothing")
    with pytest.raises(LedgerError):
        await ledger.summarize_span("a", "main", "compaction", [other], "not mine")
    assert await _rows(ledger, "a") + await _rows(ledger, "b") == before
    assert [x.id for x in await ledger.summaries("a")] == [summary.id]
    assert await ledger.mark_summarized("a", [], summary.id) == 0


# -- compaction log --------------------------------------------------------------


async def test_the_compaction_log_records_and_reports_undone_summaries(ledger: Ledger) -> None:
    s = "work"
    g1 = await _group(ledger, s, "one")
    ids = [m.id for m in await ledger.group_messages(s, g1)]
    summary = await ledger.summarize_span(s, "main", "compaction", ids, "sum")
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
    await ledger.uncompact(s, summary.id)
    assert (await ledger.compaction_log(s))[1].undone
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
    await ledger.summarize_span(s, "topic:db", "lane", ids, "topic summary")
    topic = await ledger.lane_info(s, "topic:db")
    assert (topic.groups, topic.messages, topic.summarized) == (1, 2, 2)
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
