"""The edit journal and the trash (ledger/edits.py): nothing an edit takes away is lost.

Each test reads the raw rows of the live tables before an edit and after it is
reverted, and compares them byte for byte (ids, floats, NUL characters and
invalid UTF-8 included); a turn that is running keeps its group.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from slop_tui.context.isolation import isolate
from slop_tui.ledger import Ledger, LedgerError
from slop_tui.ledger.continuity import SUMMARY_VALID
from slop_tui.ledger.inflight import KEY_PREFIX, _proc_stat
from slop_tui.records import (
    EDIT_CLEAR,
    EDIT_DONE,
    EDIT_DROP,
    EDIT_EMPTIED,
    EDIT_RESTORE,
    EDIT_REVERTED,
    EDIT_SESSION_REMOVE,
    EDIT_TRASH_RESTORE,
    EDIT_UNDO,
    NewMessage,
)

HISTORY = ("messages", "state_versions", "usage", "summaries", "handoffs", "compaction_log")


@pytest.fixture
async def ledger(tmp_path: Path):
    led = await Ledger.open(tmp_path / "slop.db", count_tokens=len)
    yield led
    await led.close()


async def _group(led: Ledger, session: str, prompt: str, state: str | None = None) -> int:
    user = await led.append_user(session, prompt, strategy="openai")
    await led.append(
        session,
        user.id,
        [
            NewMessage("tool", "out\x00put", tool_call_id="c", tool_name="read_file"),
            NewMessage("assistant", f"answer to {prompt}", strategy="openai"),
        ],
    )
    if state:
        await led.add_state(session, user.id, state)
    return user.id


async def _poison(led: Ledger, gid: int) -> None:
    """Bytes that are not UTF-8 (as raw tool output may hold) and a float with 17 digits."""
    async with led.transaction() as db:
        await db.execute(
            "UPDATE messages SET payload=CAST(X'66FF6F1B5B' AS TEXT), created_at=created_at+1e-7 "
            "WHERE group_id=? AND role='tool'",
            (gid,),
        )


def _raw(led: Ledger, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows as bytes, through a connection of its own: byte-exact, any encoding."""
    con = sqlite3.connect(led.path)
    try:
        con.text_factory = bytes
        return con.execute(sql, params).fetchall()
    finally:
        con.close()


async def _snapshot(led: Ledger, session: str) -> dict[str, list[tuple]]:
    out = {
        t: _raw(led, f"SELECT * FROM {t} WHERE session_id=? ORDER BY rowid", (session,))
        for t in HISTORY
    }
    # name .. updated_at (the totals are checked on their own)
    out["sessions"] = [r[:8] for r in _raw(led, "SELECT * FROM sessions WHERE name=?", (session,))]
    return out


async def _totals_match(led: Ledger, session: str) -> None:
    sess = await led.get_session(session)
    rows = await led.session_messages(session)
    assert (sess.message_count, sess.token_total) == (len(rows), sum(m.tokens for m in rows))


async def test_undo_moves_the_group_and_its_state_and_redo_brings_them_back_exactly(ledger):
    g1 = await _group(ledger, "s", "first", state="Goal: one")
    g2 = await _group(ledger, "s", "second", state="Goal: two")
    before = await _snapshot(ledger, "s")
    assert (await ledger.current_state("s")).content == "Goal: two"

    edit = await ledger.trash_group("s", g2, EDIT_UNDO)
    assert (edit.kind, edit.group_id, edit.messages, edit.label) == (EDIT_UNDO, g2, 3, "second")
    assert edit.trashed and edit.redoable and edit.state == EDIT_DONE
    assert [m.group_id for m in await ledger.session_messages("s")] == [g1] * 3
    assert (await ledger.current_state("s")).content == "Goal: one"  # the STATE before it
    assert set(await ledger.trashed_message_ids()) == {g2, g2 + 1, g2 + 2}
    await _totals_match(ledger, "s")

    redone = await ledger.redo()
    assert redone.id == edit.id and redone.state == EDIT_REVERTED
    after = await _snapshot(ledger, "s")
    for table in HISTORY:
        assert after[table] == before[table], table
    assert (await ledger.current_state("s")).content == "Goal: two"
    assert await ledger.trashed_message_ids() == []
    await _totals_match(ledger, "s")
    # The journal has both edits; the restore says what it reverted.
    kinds = [(e.kind, e.state) for e in await ledger.edits("s")]
    assert kinds == [(EDIT_TRASH_RESTORE, EDIT_DONE), (EDIT_UNDO, EDIT_REVERTED)]


async def test_trashed_rows_keep_every_byte_and_every_digit(ledger):
    gid = await _group(ledger, "s", "q\x00 with a NUL")
    await _poison(ledger, gid)
    before = await _snapshot(ledger, "s")
    edit = await ledger.trash_group("s", gid)
    assert _raw(ledger, "SELECT payload FROM trash_messages WHERE role='tool'") == [
        (b"f\xffo\x1b[",)
    ]
    assert _raw(ledger, "SELECT * FROM messages") == []
    await ledger.restore_edit(edit.id)
    after = await _snapshot(ledger, "s")
    for table in HISTORY:
        assert after[table] == before[table], table
    assert _raw(ledger, "SELECT * FROM trash_messages") == []


async def test_the_redo_stack_reverts_newest_first_and_a_turn_clears_it(ledger):
    gids = [await _group(ledger, "s", f"q{i}") for i in range(4)]
    for gid in reversed(gids[1:]):
        await ledger.trash_group("s", gid, EDIT_UNDO)
    await ledger.drop_group("s", gids[0], True)
    assert (await ledger.redo()).kind == EDIT_DROP  # the newest takeaway first
    assert {m.status for m in await ledger.group_messages("s", gids[0])} == {"completed"}
    assert (await ledger.redo()).group_id == gids[1]
    assert (await ledger.redo()).group_id == gids[2]
    live = {m.group_id for m in await ledger.session_messages("s")}
    assert live == set(gids[:3])
    # A new turn ends what /redo can bring back; /trash restore still can.
    await ledger.open_turn("s", "a new turn", strategy="openai")
    assert await ledger.redo() is None
    (left,) = await ledger.trash()
    assert left.group_id == gids[3]
    await ledger.restore_edit(left.id)
    assert gids[3] in {m.group_id for m in await ledger.session_messages("s")}


async def test_drop_and_restore_are_journalled_and_d_again_takes_the_drop_off_the_stack(ledger):
    g1 = await _group(ledger, "s", "q1")
    assert await ledger.drop_group("s", g1, True) == 3
    assert await ledger.drop_group("s", g1, True) == 0  # already dropped: no entry
    assert await ledger.drop_group("s", g1, False) == 3
    kinds = [(e.kind, e.state, e.redoable) for e in await ledger.edits("s")]
    assert kinds == [(EDIT_RESTORE, EDIT_DONE, False), (EDIT_DROP, EDIT_REVERTED, False)]
    assert await ledger.redo() is None


async def test_clear_and_restore_give_back_the_whole_history(ledger):
    g1 = await _group(ledger, "s", "q1", state="Goal: g")
    await ledger.record_usage("s", g1, "openai", "m", 10, 2)
    await ledger.add_summary("s", "main", "lane", [g1, g1 + 2], "a summary")
    await ledger.log_compaction(
        "s", case_kind="elide", trigger="t", tokens_before=9, tokens_after=3
    )
    await ledger.set_scratchpad("s", "pad")
    await _group(ledger, "other", "elsewhere")
    before = await _snapshot(ledger, "s")
    other = await _snapshot(ledger, "other")

    edit = await ledger.clear_session("s")
    assert (edit.kind, edit.messages, edit.groups, edit.label) == (EDIT_CLEAR, 3, 1, "q1")
    for table in HISTORY:
        assert _raw(ledger, f"SELECT * FROM {table} WHERE session_id='s'") == [], table
    assert (await ledger.get_session("s")).scratchpad == "pad"  # kept, as before
    assert await _snapshot(ledger, "other") == other
    assert await ledger.clear_session("s") is None  # nothing left: no entry

    await ledger.restore_edit(edit.id)
    after = await _snapshot(ledger, "s")
    for table in HISTORY:
        assert after[table] == before[table], table
    await _totals_match(ledger, "s")


async def test_a_removed_session_comes_back_whole_or_joins_a_new_one_of_its_name(ledger):
    g1 = await _group(ledger, "doomed", "q1", state="Goal: x")
    await ledger.add_context_file("doomed", "a.py")
    await ledger.set_window("doomed", 3)
    before = await _snapshot(ledger, "doomed")
    files = await ledger.context_files("doomed")

    edit = await ledger.trash_session("doomed")
    assert edit.kind == EDIT_SESSION_REMOVE and edit.label == "q1"
    assert await ledger.get_session("doomed") is None
    assert [s.name for s in await ledger.list_sessions()] == []
    # A group of a session in the trash cannot come back on its own.
    await ledger.restore_edit(edit.id)
    after = await _snapshot(ledger, "doomed")
    assert {t: after[t] for t in HISTORY} == {t: before[t] for t in HISTORY}
    assert after["sessions"][0][:7] == before["sessions"][0][:7]  # all but updated_at
    assert await ledger.context_files("doomed") == files
    await _totals_match(ledger, "doomed")

    # Removed again, and a new session of the same name started meanwhile.
    edit = await ledger.trash_session("doomed")
    g2 = await _group(ledger, "doomed", "a fresh start")
    await ledger.restore_edit(edit.id)
    assert [m.group_id for m in await ledger.session_messages("doomed")] == [g1] * 3 + [g2] * 3
    await _totals_match(ledger, "doomed")
    assert _raw(ledger, "SELECT * FROM trash_sessions") == []  # nothing left behind


async def test_a_group_waits_for_its_session_to_be_restored_first(ledger):
    g1 = await _group(ledger, "s", "q1")
    await _group(ledger, "s", "q2")
    removed = await ledger.trash_group("s", g1)
    gone = await ledger.trash_session("s")
    with pytest.raises(LedgerError, match=f"trash entry {gone.id}"):
        await ledger.restore_edit(removed.id)
    await ledger.restore_edit(gone.id)
    await ledger.restore_edit(removed.id)
    assert len(await ledger.session_messages("s")) == 6


async def test_bad_restores_are_one_clear_error_and_change_nothing(ledger):
    g1 = await _group(ledger, "s", "q1")
    edit = await ledger.trash_group("s", g1)
    drop = await _group(ledger, "s", "q2")
    await ledger.drop_group("s", drop, True)
    dropped = (await ledger.edits("s"))[0]
    before = await _snapshot(ledger, "s")
    for bad, pattern in ((999, "no entry 999"), (dropped.id, f"no entry {dropped.id}")):
        with pytest.raises(LedgerError, match=pattern):
            await ledger.restore_edit(bad)
    assert await _snapshot(ledger, "s") == before
    await ledger.restore_edit(edit.id)
    with pytest.raises(LedgerError, match="restored already"):
        await ledger.restore_edit(edit.id)


async def test_empty_is_the_only_hard_delete_and_the_journal_keeps_what_was_there(ledger):
    g1 = await _group(ledger, "s", "q1")
    g2 = await _group(ledger, "s", "q2")
    first = await ledger.trash_group("s", g1)
    await ledger.trash_group("s", g2, EDIT_UNDO)
    emptied = await ledger.empty_trash()
    assert (emptied.messages, emptied.groups) == (6, 2)
    assert await ledger.trashed_message_ids() == [] and await ledger.trash() == []
    assert await ledger.redo() is None  # nothing left to bring back
    assert (await ledger.get_edit(first.id)).state == EDIT_EMPTIED
    with pytest.raises(LedgerError, match="deleted by /trash empty"):
        await ledger.restore_edit(first.id)
    assert await ledger.empty_trash() is None


async def test_a_summary_made_from_a_trashed_group_goes_with_it(ledger):
    g1, g2, g3, g4 = [await _group(ledger, "s", f"q{i}") for i in (1, 2, 3, 4)]
    ids = [m.id for m in await ledger.session_messages("s") if m.group_id in (g1, g2)]
    summary = await ledger.add_summary("s", "main", "lane", ids, "q1 and q2 were asked")
    rolled = await ledger.add_summary(
        "s", "main", "lane", [g3, g3 + 1, g3 + 2], "q1, q2 and q3", previous=summary
    )
    only_g1 = await ledger.add_summary("s", "main", "lane", [g1, g1 + 2], "q1 was asked")
    await ledger.trash_group("s", g2)
    # Neither the summary made from g2 nor the one that rolled it up is left; one that
    # ends before g2 was made without it, and stays in use.
    texts = [r[0] for r in await ledger._tuples("SELECT content FROM summaries")]
    assert texts == ["q1 was asked"]
    assert [x.id for x in await ledger.summaries("s")] == [only_g1.id]
    assert await ledger.summary_state(only_g1.id) == SUMMARY_VALID
    statuses = {m.group_id: m.status for m in await ledger.session_messages("s")}
    assert statuses == {g1: "completed", g3: "completed", g4: "completed"}
    assert rolled.id != summary.id
    # Restored, the summaries come back as a stale cache, never in effect.
    (edit,) = await ledger.trash()
    await ledger.restore_edit(edit.id)
    assert [x.id for x in await ledger.summaries("s")] == [only_g1.id]
    assert len(await ledger._tuples("SELECT id FROM summaries")) == 3


async def test_handoffs_written_since_the_group_began_go_with_it(ledger):
    from slop_tui.records import Handoff

    early = await ledger.add_handoff(Handoff(session="s", reason="manual", task="before"))
    g1 = await _group(ledger, "s", "q1", state="Goal: secret goal")
    late = await ledger.add_handoff(Handoff(session="s", reason="exit", task="secret goal"))
    edit = await ledger.trash_group("s", g1)
    assert [h.id for h in await ledger.handoffs("s")] == [early.id]
    await ledger.restore_edit(edit.id)
    assert [h.id for h in await ledger.handoffs("s")] == [late.id, early.id]


async def test_a_running_turn_keeps_its_group_in_this_process(ledger):
    g1 = await _group(ledger, "s", "q1")
    turn = await ledger.open_turn("s", "running", strategy="openai")
    before = await _snapshot(ledger, "s")
    attempts = (
        lambda: ledger.trash_group("s", turn.id, EDIT_UNDO),
        lambda: ledger.drop_group("s", turn.id, True),
        lambda: ledger.clear_session("s"),
        lambda: ledger.trash_session("s"),
        lambda: ledger.set_lane("s", "topic:elsewhere"),  # its next request reads the lane
    )
    for attempt in attempts:
        with pytest.raises(LedgerError, match=f"group {turn.id}'s turn is still running"):
            await attempt()
    assert await _snapshot(ledger, "s") == before
    assert await ledger.edits("s") == []
    # Other groups stay editable mid-turn.
    assert (await ledger.trash_group("s", g1)).group_id == g1
    await ledger.clear_inflight(turn.id)  # the turn ended
    assert (await ledger.trash_group("s", turn.id, EDIT_UNDO)).group_id == turn.id


async def test_a_turn_of_another_live_process_keeps_its_group_and_a_dead_one_does_not(ledger):
    turn = await ledger.open_turn("s", "running elsewhere", strategy="openai")
    key = f"{KEY_PREFIX}{turn.id}"
    record = json.loads((await ledger.get_setting(key)) or "{}")
    other = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        record.update(pid=other.pid, started=_proc_stat(other.pid)[1])
        await ledger.set_setting(key, json.dumps(record))
        with pytest.raises(LedgerError, match=f"another slop-tui process \\(pid {other.pid}\\)"):
            await ledger.trash_group("s", turn.id, EDIT_UNDO)
    finally:
        other.kill()
        other.wait()
    assert other.pid != os.getpid()
    assert (await ledger.trash_group("s", turn.id, EDIT_UNDO)) is not None  # its owner is gone


async def test_nothing_is_written_into_a_group_that_left_the_ledger(ledger):
    g1 = await _group(ledger, "s", "q1")
    await ledger.trash_group("s", g1)
    with pytest.raises(LedgerError, match=f"group {g1} is no longer in session 's'"):
        await ledger.append("s", g1, [NewMessage("assistant", "a late answer")])
    with pytest.raises(LedgerError):
        await ledger.append("other", g1, [NewMessage("assistant", "into another session")])
    assert await ledger.session_messages("s") == []
    assert await ledger.session_messages("other") == []


async def test_a_prompt_without_any_answer_gets_the_error_mark(ledger):
    bare = await ledger.append_user("s", "no key configured")
    answered = await _group(ledger, "s", "answered")
    partial = await ledger.append_user("s", "cut off")
    await ledger.append("s", partial.id, [NewMessage("assistant", "half", status="interrupted")])
    assert await ledger.mark_failed_prompt("s", bare.id) is True
    assert await ledger.mark_failed_prompt("s", bare.id) is False  # once
    assert await ledger.mark_failed_prompt("s", answered) is False
    assert await ledger.mark_failed_prompt("s", partial.id) is False
    assert await ledger.failed_prompts("s") == [bare.id]
    rows = await ledger.group_rows("s")
    assert [r[5] for r in rows] == ["error", "completed", "interrupted"]
    # Shown with `!`, never replayed: the next request does not carry it.
    replayed = isolate(await ledger.window("s", 0), "openai").messages
    assert [m.text for m in replayed if m.role == "user"] == ["answered", "cut off"]
