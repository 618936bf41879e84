"""SIGKILL mid-turn: while a reply streams, while a tool runs, while the
ledger writes. On restart the database passes `PRAGMA integrity_check`, the user
message is there, what was shown of the reply is there as `interrupted`, a running
call has an `error` result, and the next turn works.

The turn runs in a real child process (`slop-tui ask`, or tests/fault_child.py
for the held COMMIT) against the fake server of this process; the kill comes
when a marker says the moment has come (the in-flight record holds streamed
text, the tool's process started, the transaction is open).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
from pathlib import Path

from slop_tui.ledger import Ledger
from slop_tui.ledger.inflight import KILLED_RESULT
from slop_tui.orchestrator import Orchestrator
from tests.fakeserver import FakeToolCall, Reply
from tests.fault_support import (
    CHILD,
    check_openai_request,
    child_env,
    counters_match,
    inflight,
    integrity,
    kill_hard,
    openai_env,
    orphan_calls,
    pids_with_cmdline,
    query,
    spawn,
    wait_until,
)
from tests.workspace_fixtures import open_workspace

WORDS = [f"word{i:03d} " for i in range(400)]
LOOP_BODY = "".join(f"line {i} of a long tool result\n" for i in range(600))  # as fault_child


def _ask(tmp_path: Path, fake_llm, prompt: str, *extra: str):
    return spawn(
        ["-m", "slop_tui.cli", "ask", *extra, prompt],
        cwd=tmp_path,
        env=child_env(tmp_path, openai_env(fake_llm)),
    )


async def _next_turn_works(tmp_path: Path, fake_llm) -> list[dict]:
    """A fresh workspace (the restart) runs a turn; returns the request it sent."""
    ws = await open_workspace(tmp_path, env=openai_env(fake_llm))
    orch = Orchestrator(ws)
    try:
        fake_llm.enqueue(Reply(text="back to work"))
        out = await orch.run_turn("are you there?")
        assert out.error is None and out.text == "back to work"
        messages = fake_llm.last_chat.messages
        check_openai_request(messages)
        rows = await ws.ledger.session_messages(ws.session)
        assert not orphan_calls(rows)
        return messages
    finally:
        await orch.aclose()
        await ws.close()


async def test_sigkill_while_a_reply_streams(tmp_path, fake_llm):
    db = tmp_path / ".slop" / "slop.db"
    fake_llm.enqueue(Reply(text=WORDS, delay=0.02))  # 8 s if nobody stops it
    proc = _ask(tmp_path, fake_llm, "tell me a long story")
    try:
        # The marker: the in-flight record already holds part of the streamed reply.
        record = wait_until(
            lambda: [r for r in inflight(db) if len(r.get("text") or "") >= 80],
            "streamed text journalled",
            proc=proc,
        )[0]
    finally:
        kill_hard(proc)
    assert proc.returncode == -signal.SIGKILL
    assert integrity(db) == "ok"
    # Before anyone opens it again: the user message is stored, no answer row yet.
    assert [r[0] for r in query(db, "SELECT role FROM messages")] == ["user"]

    # The restart: `slop-tui exec` opens the ledger, finishes the dead turn, says so.
    r = spawn(
        ["-m", "slop_tui.cli", "exec", "/message list"],
        cwd=tmp_path,
        env=child_env(tmp_path, openai_env(fake_llm)),
    )
    out, err = r.communicate(timeout=120)  # bounds a hang; start-up alone may take a minute
    assert r.returncode == 0, err
    assert "was cut off when slop-tui was killed" in err and "kept as interrupted" in err
    assert "| interrupted |" in out

    async with await Ledger.open(db) as led:
        rows = await led.session_messages("default_session")
        assert not await led.inflight_records()
        assert not led.recovered  # recovered once, by the first open
    assert [(m.role, m.status) for m in rows] == [
        ("user", "completed"),
        ("assistant", "interrupted"),
    ]
    assert rows[0].content == "tell me a long story"
    partial = rows[1].content
    full = "".join(WORDS)
    assert full.startswith(partial) and len(partial) >= len(record["text"]) >= 80
    assert len(partial) < len(full)
    counters_match(db)

    sent = await _next_turn_works(tmp_path, fake_llm)
    assert partial not in json.dumps(sent)  # shown, never replayed
    users = [m["content"] for m in sent if m["role"] == "user"]
    assert users[-2].endswith("tell me a long story") and users[-1].endswith("are you there?")


async def test_sigkill_while_a_tool_runs(tmp_path, fake_llm):
    db = tmp_path / ".slop" / "slop.db"
    pidfile = tmp_path / "tool.pid"
    # `$$` inside the shell's sandbox is a pid of its own namespace: the tool's process is
    # found from outside by its command line.
    call = FakeToolCall("execute_bash", {"command": f"echo $$ > {pidfile}; exec sleep 60.777"})
    fake_llm.enqueue(Reply(text="Let me check.", tool_calls=[call]))
    proc = _ask(tmp_path, fake_llm, "run the slow thing", "--approve", "all")
    try:
        wait_until(
            lambda: pidfile.exists() and pidfile.read_text().strip(), "tool started", proc=proc
        )
        kill_hard(proc)
    finally:
        kill_hard(proc)  # also closes its pipes when it already exited
        for pid in pids_with_cmdline(b"sleep\x0060.777\x00"):  # unsandboxed, it outlives its parent
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
    assert integrity(db) == "ok"
    async with await Ledger.open(db) as led:
        (recovered,) = led.recovered
        assert recovered.text_chars == 0 and len(recovered.calls) == 1
        rows = await led.session_messages("default_session")
    assert [(m.role, m.status) for m in rows] == [
        ("user", "completed"),
        ("assistant", "tool_call"),
        ("tool", "error"),
    ]
    assert rows[1].content == "Let me check."
    assert KILLED_RESULT.format(name="execute_bash") in rows[2].content
    assert rows[2].tool_call_id == recovered.calls[0]
    assert not orphan_calls(rows)
    counters_match(db)

    sent = await _next_turn_works(tmp_path, fake_llm)
    tool_msgs = [m for m in sent if m["role"] == "tool"]
    assert len(tool_msgs) == 1 and "killed or crashed" in tool_msgs[0]["content"]


async def test_sigkill_while_the_ledger_writes(tmp_path, fake_llm):
    """Killed inside the transaction that stores the final answer, its pages already
    in the WAL: the transaction is gone whole, the journalled reply comes back."""
    db = tmp_path / ".slop" / "slop.db"
    db.parent.mkdir()
    answer = [f"{i:05d} " + "x" * 1994 for i in range(750)]  # 1.5 MB in 750 deltas
    fake_llm.enqueue(Reply(text=answer, delay=0.001))
    proc = spawn(
        [str(CHILD), "hold-commit", str(db), "write me a big file"],
        cwd=tmp_path,
        env=child_env(tmp_path, openai_env(fake_llm)),
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline().split()
        assert line[:1] == ["holding"], (line, proc.stderr.read() if proc.poll() else "")
        assert int(line[1]) > 1_000_000  # the uncommitted answer is in the WAL file
    finally:
        kill_hard(proc)
    assert integrity(db) == "ok"
    statuses = query(db, "SELECT role, status FROM messages ORDER BY id")
    assert statuses == [("user", "completed")]  # nothing of the open transaction
    counters_match(db)
    async with await Ledger.open(db) as led:
        assert [r.text_chars for r in led.recovered] == [len("".join(answer))]
        rows = await led.session_messages("default_session")
    assert [(m.role, m.status) for m in rows] == [
        ("user", "completed"),
        ("assistant", "interrupted"),
    ]
    assert rows[1].content == "".join(answer)  # the journal held the whole reply
    await _next_turn_works(tmp_path, fake_llm)


def test_sigkill_at_arbitrary_points_of_a_write_loop(tmp_path):
    """Killed three times at whatever point writes had reached: every committed group
    is whole, the totals kept by triggers match the rows, the file is sound."""
    db = tmp_path / "loop.db"
    env = child_env(tmp_path)
    cut: set[int] = set()
    for round_, wanted in enumerate((3, 11, 29)):
        proc = spawn([str(CHILD), "write-loop", str(db)], cwd=tmp_path, env=env)
        try:
            assert proc.stdout is not None
            for line in proc.stdout:  # the marker: this many more groups were committed
                if line.startswith("group ") and int(line.split()[1]) + 1 >= wanted:
                    break
        finally:
            kill_hard(proc)
        assert integrity(db) == "ok", round_
        counters_match(db)
        groups = query(
            db,
            "SELECT group_id, group_concat(role || ':' || status, ' ') FROM "
            "(SELECT * FROM messages ORDER BY id) GROUP BY group_id ORDER BY group_id",
        )
        whole = "user:completed assistant:tool_call tool:completed assistant:completed"
        # Only the group last at a kill may be short (killed between its transactions).
        cut.add(groups[-1][0])
        for gid, shape in groups:
            assert shape == whole or (gid in cut and whole.startswith(shape)), (gid, shape)
        for n, content in query(
            db,
            "SELECT CAST(substr(content, 1, instr(content, ':') - 1) AS INT), content "
            "FROM messages WHERE role = 'tool'",
        ):
            assert content == f"{n}:{LOOP_BODY}"  # no torn row
    assert len(groups) >= 29
