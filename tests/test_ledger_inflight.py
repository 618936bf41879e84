"""The in-flight record of a running turn and its recovery on open (ledger/inflight.py).

The end-to-end kills are in tests/test_faults_kill.py; these check the rules that
make recovery safe with two workspaces on one database: only a dead owner's
record is finished, a reply stored after all is not duplicated, a reused pid is
not taken for the owner.
"""

from __future__ import annotations

import json
import subprocess
import sys

from slop_tui.ledger import Ledger, TurnJournal
from slop_tui.ledger.inflight import KEY_PREFIX, owner_alive
from slop_tui.records import NewMessage, ToolCall


def _reaped() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


async def _orphan(led: Ledger, gid: int, **changes) -> None:
    """Rewrite a record as if a process that is gone had written it."""
    key = f"{KEY_PREFIX}{gid}"
    record = json.loads((await led._one("SELECT value FROM app_state WHERE key=?", (key,)))[0])
    record.update(changes)
    await led.set_setting(key, json.dumps(record))


async def test_a_live_owner_is_left_alone_and_a_dead_one_is_finished(tmp_path):
    db = tmp_path / "l.db"
    async with await Ledger.open(db) as led:
        user = await led.append_user("s", "question")
        await led.save_inflight("s", user.id, "openai", text="half an ans")
    async with await Ledger.open(db) as led:  # this process wrote it: alive
        assert led.recovered == [] and len(await led.inflight_records()) == 1
        await _orphan(led, user.id, pid=_reaped())
    async with await Ledger.open(db) as led:
        (got,) = led.recovered
        assert (got.session, got.group_id, got.text_chars, got.calls) == ("s", user.id, 11, ())
        assert "kept as interrupted" in got.note()
        rows = await led.session_messages("s")
        assert not await led.inflight_records()
    assert [(m.role, m.status, m.content) for m in rows] == [
        ("user", "completed", "question"),
        ("assistant", "interrupted", "half an ans"),
    ]
    async with await Ledger.open(db) as led:  # once only
        assert led.recovered == [] and len(await led.session_messages("s")) == 2


async def test_a_reply_stored_after_all_is_not_duplicated_and_answered_calls_stay(tmp_path):
    db = tmp_path / "l.db"
    calls = [ToolCall("c1", "read_file"), ToolCall("c2", "execute_bash")]
    async with await Ledger.open(db) as led:
        a = await led.append_user("s", "one")
        await led.save_inflight("s", a.id, "openai", text="the whole answer")
        await led.append("s", a.id, [NewMessage("assistant", "the whole answer")])
        b = await led.append_user("s", "two")
        await led.save_inflight("s", b.id, "openai", calls=calls)
        await led.append(
            "s", b.id, [NewMessage("tool", "done", tool_call_id="c1", tool_name="read_file")]
        )
        for gid in (a.id, b.id):
            await _orphan(led, gid, pid=_reaped())
    async with await Ledger.open(db) as led:
        (got,) = led.recovered
        assert got.group_id == b.id and got.calls == ("c2",) and got.text_chars == 0
        rows = await led.session_messages("s")
    assert [(m.role, m.status, m.tool_call_id) for m in rows] == [
        ("user", "completed", None),
        ("assistant", "completed", None),
        ("user", "completed", None),
        ("tool", "completed", "c1"),
        ("tool", "error", "c2"),
    ]
    assert "before execute_bash finished" in rows[-1].content


async def test_owner_checks():
    import os
    import socket

    me = {"host": socket.gethostname(), "pid": os.getpid()}
    assert owner_alive(me)
    assert not owner_alive({**me, "pid": _reaped()})
    assert not owner_alive({**me, "started": "1"})  # our pid, another start: pid reused
    assert owner_alive({**me, "host": "another-machine", "pid": _reaped()})  # cannot tell
    assert not owner_alive({})  # unreadable: cleared


async def test_an_unreadable_record_or_a_removed_group_is_just_cleared(tmp_path):
    db = tmp_path / "l.db"
    async with await Ledger.open(db) as led:
        user = await led.append_user("s", "q")
        await led.set_setting(f"{KEY_PREFIX}999", "{not json")
        await led.save_inflight("s", user.id, "openai", text="partial")
        await _orphan(led, user.id, pid=_reaped())
        await led.remove_group("s", user.id)
    async with await Ledger.open(db) as led:
        assert led.recovered == [] and not await led.inflight_records()
        assert await led.session_messages("s") == []


async def test_the_journal_writes_at_most_every_interval_and_clears_at_the_end(tmp_path):
    now = [0.0]
    async with await Ledger.open(tmp_path / "l.db") as led:
        user = await led.append_user("s", "q")
        journal = TurnJournal(led, "s", user.id, interval=0.25, clock=lambda: now[0])
        journal.stream_started()
        parts = []
        saved = []
        for i in range(10):  # 10 deltas, 0.1 s apart
            now[0] += 0.1
            parts.append(f"p{i} ")
            await journal.text(parts, "openai")
            records = await led.inflight_records()
            saved.append(next(iter(records.values()))["text"] if records else None)
        assert saved[:2] == [None, None] and saved[2] == "p0 p1 p2 "  # first save at 0.3 s
        assert len(set(saved) - {None}) == 3  # at 0.3, 0.6 and 0.9 s, not per delta
        await journal.text(["the final text"], "openai", final=True)
        (record,) = (await led.inflight_records()).values()
        assert record["text"] == "the final text" and record["since"] == user.id
        await journal.close()
        assert not await led.inflight_records()

        quick = TurnJournal(led, "s", user.id, interval=0.25, clock=lambda: now[0])
        quick.stream_started()
        await quick.text(["fast"], "openai")
        await quick.text(["fast reply"], "openai", final=True)
        assert not await led.inflight_records() and not quick.written  # a short stream: no write


async def test_the_workspace_says_what_it_recovered_from_a_killed_turn(tmp_path, monkeypatch):
    """The app tells the user, as the CLI does, that a killed turn was finished on open."""
    from slop_tui.ui.app import SlopApp
    from tests.test_app import started

    for var in ("OPENAI_API_KEY", "GEMINI_API_KEY", "GOOGLE_API_KEY", "SLOP_DB", "SLOP_SESSION"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("SLOP_CONFIG", str(tmp_path / "no-config.toml"))
    monkeypatch.chdir(tmp_path)
    db = tmp_path / "slop.db"
    async with await Ledger.open(db) as led:
        user = await led.append_user("default", "question")
        await led.save_inflight("default", user.id, "openai", text="half an ans")
        await _orphan(led, user.id, pid=_reaped())
    app = SlopApp(db=str(db), user_themes=False, blink=False)
    async with app.run_test(size=(120, 40)) as pilot:
        await started(pilot)
        notes = [n.message for n in app._notifications]
        assert any(
            f"group {user.id} of session 'default'" in n and "kept as interrupted" in n
            for n in notes
        ), notes
