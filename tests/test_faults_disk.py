"""A full disk and a read-only database: one clear error, nothing half-written,
and the session works again once the disk has room or the file is writable.

A full disk is SQLite's SQLITE_FULL; `PRAGMA max_page_count` on the ledger's own
connection makes SQLite return exactly that error once the file would grow (no
root, no tiny file system needed). A database that turns read-only while open
(a remount) is SQLITE_READONLY, which `PRAGMA query_only` produces on the same
write paths. A read-only file or folder at start is a real `chmod` against a
child process; as root, the child runs without the capabilities that bypass file
permissions (setpriv), so the permission bits apply to it as to any user.
"""

from __future__ import annotations

import os
import stat
import sys
from pathlib import Path

import pytest

from slop_tui.commands import dispatch
from slop_tui.orchestrator import ErrorEvent, Orchestrator, TextChunk
from tests.fakeserver import Reply
from tests.fault_support import (
    check_openai_request,
    child_env,
    counters_match,
    integrity,
    openai_env,
    unprivileged,
)
from tests.workspace_fixtures import open_workspace

NO_LIMIT = 1_073_741_823  # SQLite's default max_page_count


async def _snapshot(ws) -> list[tuple]:
    rows = await ws.ledger._all("SELECT * FROM messages ORDER BY id")
    sessions = await ws.ledger._all("SELECT * FROM sessions ORDER BY name")
    state = await ws.ledger._all("SELECT * FROM app_state WHERE key != 'token_counts'")
    return [tuple(r) for r in (*rows, *sessions, *state)]


@pytest.fixture
async def session(tmp_path, fake_llm):
    ws = await open_workspace(tmp_path, env=openai_env(fake_llm))
    orch = Orchestrator(ws)
    fake_llm.enqueue(Reply(text="a first answer"))
    assert (await orch.run_turn("hello")).error is None
    await orch.wait_background()
    yield ws, orch
    await orch.aclose()
    await ws.close()


async def test_disk_full_gives_one_clear_error_and_writes_nothing_half(session, fake_llm, tmp_path):
    ws, orch = session
    db = ws.ledger._db
    pages = (await (await db.execute("PRAGMA page_count")).fetchone())[0]
    await db.execute(f"PRAGMA max_page_count={pages + 2}")  # two more pages, then "full"
    before = await _snapshot(ws)
    sent_before = len(fake_llm.chat_requests)

    # 1. A large paste: the user message itself does not fit. Nothing is stored or sent.
    events: list = []
    out = await orch.run_turn("paste: " + "x" * 300_000, events.append)
    assert out.error and "disk" in out.error and "full" in out.error and "\n" not in out.error
    assert [e.error_kind for e in events if isinstance(e, ErrorEvent)] == ["ledger"]
    assert await _snapshot(ws) == before
    assert len(fake_llm.chat_requests) == sent_before

    # 2. The prompt fits, the (big) answer does not: the group keeps its prompt, like any
    # failed request, and the answer was shown as it streamed.
    fake_llm.enqueue(Reply(text="y" * 400_000, chunk_size=50_000))
    events = []
    out = await orch.run_turn("write a lot", events.append)
    assert out.error and "full" in out.error
    assert "".join(e.text for e in events if isinstance(e, TextChunk)) == "y" * 400_000
    rows = await ws.ledger.group_messages(ws.session, out.group_id)
    assert [(m.role, m.content) for m in rows] == [("user", "write a lot")]
    assert not await ws.ledger.inflight_records()

    # 3. A command on a full disk: one line, the scratchpad unchanged.
    pad = (await ws.current()).scratchpad
    res = await dispatch(ws, "/session scratchpad set " + "z" * 300_000)
    assert not res.ok and "full" in res.text and "\n" not in res.text
    assert (await ws.current()).scratchpad == pad

    assert integrity(ws.ledger.path) == "ok"
    counters_match(ws.ledger.path)

    # Room again: the session goes on, and its next request is well formed.
    await db.execute(f"PRAGMA max_page_count={NO_LIMIT}")
    fake_llm.enqueue(Reply(text="space again"))
    out = await orch.run_turn("and now?")
    assert out.error is None and out.text == "space again"
    check_openai_request(fake_llm.last_chat.messages)


async def test_database_turning_read_only_mid_session(session, fake_llm):
    ws, orch = session
    before = await _snapshot(ws)
    await ws.ledger._db.execute("PRAGMA query_only=ON")  # SQLITE_READONLY on every write
    try:
        events: list = []
        out = await orch.run_turn("are you there?", events.append)
        assert out.error and "read-only" in out.error and "\n" not in out.error
        assert [e.error_kind for e in events if isinstance(e, ErrorEvent)] == ["ledger"]
        res = await dispatch(ws, "/session scratchpad set plan")
        assert not res.ok and "read-only" in res.text
        res = await dispatch(ws, "/message list")  # reading still works
        assert res.ok and "hello" in res.text
        assert await _snapshot(ws) == before
    finally:
        await ws.ledger._db.execute("PRAGMA query_only=OFF")
    fake_llm.enqueue(Reply(text="writable again"))
    assert (await orch.run_turn("now?")).text == "writable again"


def _run_cli(tmp_path: Path, db: Path, line: str):
    import subprocess

    cmd = unprivileged([sys.executable, "-m", "slop_tui.cli", "exec", "--db", str(db), line])
    if cmd is None:
        pytest.skip("running as root without setpriv: file permissions cannot be made to apply")
    return subprocess.run(
        cmd, cwd=tmp_path, env=child_env(tmp_path), capture_output=True, text=True, timeout=60
    )


@pytest.mark.parametrize(
    ("file_mode", "dir_mode", "message"),
    [
        (0o444, 0o755, "permission denied"),
        (0o644, 0o555, "folder is read-only"),
    ],
    ids=["file", "folder"],
)
async def test_read_only_database_at_start(tmp_path, file_mode, dir_mode, message):
    folder = tmp_path / "project-db"
    folder.mkdir()
    db = folder / "slop.db"
    ws = await open_workspace(tmp_path)
    await ws.ledger.close()
    os.replace(ws.ledger.path, db)
    for leftover in ws.ledger.path.parent.glob("slop.db-*"):
        leftover.unlink()
    before = db.read_bytes()
    os.chmod(db, file_mode)
    os.chmod(folder, dir_mode)
    try:
        r = _run_cli(tmp_path, db, "/session scratchpad set a plan")
    finally:
        os.chmod(folder, 0o755)
        os.chmod(db, 0o644)
    assert r.returncode == 1, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and message in r.stderr, r.stderr
    assert r.stderr.startswith("slop-tui: cannot open the database")
    assert db.read_bytes() == before
    assert sorted(p.name for p in folder.iterdir()) == ["slop.db"]  # no journal files
    assert stat.S_IMODE(db.stat().st_mode) == 0o644
