"""Continuity commands: /lane, /reply, /handoff, /file, /context log|uncompact."""

from __future__ import annotations

import hashlib
import os

import pytest

from slop_tui.commands import dispatch
from slop_tui.context import render_prompt
from slop_tui.records import Changed, NewMessage
from tests.workspace_fixtures import open_workspace, rough

SECRET = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


@pytest.fixture
async def ws(tmp_path, monkeypatch):
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path.parent))
    w = await open_workspace(tmp_path)
    yield w
    await w.close()


TABLES = (
    "sessions",
    "messages",
    "state_versions",
    "usage",
    "memos",
    "skills",
    "tools",
    "summaries",
    "compaction_log",
    "handoffs",
    "context_files",
)


async def fingerprint(ws) -> str:
    rows = []
    for table in TABLES:
        cur = await ws.ledger._db.execute(f"SELECT * FROM {table} ORDER BY 1")
        rows.append(repr([tuple(r) for r in await cur.fetchall()]))
    return hashlib.sha256("".join(rows).encode()).hexdigest()


async def add_group(ws, prompt: str, answer: str = "answer") -> int:
    """What the orchestrator does with a sent line: a user row in the session's lane."""
    user = await ws.ledger.append_user(ws.session, prompt)
    await ws.ledger.append(ws.session, user.group_id, [NewMessage("assistant", answer)])
    return user.group_id


async def lane_groups(ws, lane: str) -> set[int]:
    return {m.group_id for m in await ws.ledger.window(ws.session, 0, lane=lane)}


# -- lanes and replies -------------------------------------------------------------


async def test_reply_starts_a_reply_lane_whose_window_holds_only_its_groups(ws):
    g1 = await add_group(ws, "first question")
    g2 = await add_group(ws, "second question")
    result = await dispatch(ws, f"/reply {g1} what about the port?")
    assert result.ok and result.send == "what about the port?"
    assert Changed.LANE in result.changed and f"reply:{g1}" in result.text
    assert (await ws.current()).lane == f"reply:{g1}"
    r1 = await add_group(ws, result.send)
    # continuing the same reply lane
    again = await dispatch(ws, f"/reply {g1} and the host?")
    assert again.ok and again.send == "and the host?"
    r2 = await add_group(ws, again.send)
    assert await lane_groups(ws, f"reply:{g1}") == {r1, r2}
    sess = await ws.current()
    window = await ws.ledger.window(ws.session, sess.window_size, lane=sess.lane)
    assert {m.group_id for m in window} == {r1, r2}
    prompt = await ws.prompt("openai")
    sent = "\n".join(m.text for m in prompt.messages)
    assert "second question" not in sent and "what about the port?" in sent

    back = await dispatch(ws, "/lane switch main")
    assert back.ok and (await ws.current()).lane == "main"
    assert await lane_groups(ws, "main") == {g1, g2}
    g3 = await add_group(ws, "back in main")
    assert await lane_groups(ws, "main") == {g1, g2, g3}
    assert await lane_groups(ws, f"reply:{g1}") == {r1, r2}
    same = await dispatch(ws, "/lane switch main")
    assert same.ok and "Already" in same.text


async def test_lane_new_list_and_switch(ws):
    await add_group(ws, "in main")
    result = await dispatch(ws, "/lane new db-migration")
    assert result.ok and (await ws.current()).lane == "topic:db-migration"
    t1 = await add_group(ws, "topic work")
    listing = await dispatch(ws, "/lane list")
    assert listing.ok
    assert "| * topic:db-migration | 1 | 2 |" in listing.text
    assert "| main | 1 | 2 |" in listing.text
    assert (await dispatch(ws, "/lane")).text == listing.text  # list is the default
    again = await dispatch(ws, "/lane new topic:db-migration")
    assert not again.ok and again.error_kind == "failed" and "already exists" in again.text
    await dispatch(ws, "/lane switch main")
    assert (await dispatch(ws, "/lane switch topic:db-migration")).ok
    assert await lane_groups(ws, "topic:db-migration") == {t1}
    # a fresh lane is listed (and marked) before it has messages
    await dispatch(ws, "/lane new empty")
    assert "| * topic:empty | 0 | 0 |" in (await dispatch(ws, "/lane list")).text


@pytest.mark.parametrize(
    "line",
    [
        "/lane switch",
        "/lane switch bogus",
        "/lane switch topic:",
        "/lane switch reply:abc",
        "/lane switch reply:0",
        "/lane switch main extra",
        "/lane new",
        "/lane new two words",
        "/lane new bad/name",
        "/lane list now",
        "/lane fly",
        "/reply",
        "/reply 1",
        "/reply x hello",
        "/reply 0 hello",
        "/handoff show all",
        "/handoff write now",
        "/handoff export",
        "/handoff export a.md b.md",
        "/handoff export 'unclosed",
        "/file add",
        "/file add 'unclosed",
        "/file remove",
        "/file remove a b",
        "/file list all",
        "/context log 0",
        "/context log abc",
        "/context uncompact",
        "/context uncompact x",
    ],
)
async def test_wrong_arguments_give_one_usage_line_and_change_nothing(ws, line):
    await add_group(ws, "something")
    before = await fingerprint(ws)
    result = await dispatch(ws, line)
    assert not result.ok and result.error_kind == "usage", result.text
    assert "\n" not in result.text and result.text
    assert result.send is None
    assert await fingerprint(ws) == before


@pytest.mark.parametrize(
    "line",
    [
        "/reply 999 hello",
        "/lane switch reply:999",
        "/context uncompact 42",
        "/file add ../outside.txt",
        "/file add /etc/passwd",
        "/file add missing.txt",
        "/file add .",
        "/file add blob.bin",
        "/file add ok.txt blob.bin",
        "/file add link.txt",
        "/file remove ok.txt",
        "/handoff export notes.md",
        "/handoff export ../escape.md",
    ],
)
async def test_refusals_are_one_line_and_change_nothing(ws, tmp_path, line):
    await add_group(ws, "something")
    (tmp_path / "ok.txt").write_text("fine\n")
    (tmp_path / "blob.bin").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00\x00")
    (tmp_path.parent / "outside.txt").write_text("secret")
    os.symlink(tmp_path.parent / "outside.txt", tmp_path / "link.txt")
    before = await fingerprint(ws)
    result = await dispatch(ws, line)
    assert not result.ok and result.error_kind == "failed", result.text
    assert "\n" not in result.text and result.text
    assert result.send is None
    assert await fingerprint(ws) == before
    assert not (tmp_path.parent / "escape.md").exists()


# -- files in context ---------------------------------------------------------------


async def test_file_add_list_remove(ws, tmp_path):
    (tmp_path / "src").mkdir()
    a = "def main():\n    return 42\n"
    (tmp_path / "src" / "a.py").write_text(a)
    notes = "# Notes\n" * 10
    (tmp_path / "notes with space.md").write_text(notes)
    result = await dispatch(ws, "/file add src/a.py 'notes with space.md'")
    assert result.ok, result.text
    assert f"src/a.py ({rough(a)} tokens)" in result.text
    assert Changed.FILES in result.changed
    # the absolute form of a stored file is the same file
    again = await dispatch(ws, f"/file add {tmp_path / 'src' / 'a.py'}")
    assert again.ok and "Already in the context: src/a.py" in again.text and not again.changed
    assert [f.path for f in await ws.ledger.context_files(ws.session)] == [
        "src/a.py",
        "notes with space.md",
    ]
    listing = await dispatch(ws, "/file list")
    assert f"| src/a.py | {rough(a)} |" in listing.text
    assert f"| notes with space.md | {rough(notes)} |" in listing.text
    assert f"Total: {rough(a) + rough(notes)} tokens in 2 file(s)." in listing.text
    # a file that became binary is reported, not read
    (tmp_path / "src" / "a.py").write_bytes(b"\x00\x01")
    assert "binary file refused" in (await dispatch(ws, "/file list")).text
    removed = await dispatch(ws, "/file remove ./src/../src/a.py")
    assert removed.ok and "src/a.py" in removed.text
    assert [f.path for f in await ws.ledger.context_files(ws.session)] == ["notes with space.md"]
    assert (await dispatch(ws, "/file")).ok  # list is the default


async def test_file_add_refuses_binary_and_outside_paths(ws, tmp_path):
    (tmp_path / "img.png").write_bytes(b"\x89PNG\r\n\x1a\n\x00\x00")
    (tmp_path / "latin1.txt").write_bytes("caf\xe9".encode("latin-1"))
    binary = await dispatch(ws, "/file add img.png")
    assert binary.error_kind == "failed" and "binary file refused" in binary.text
    assert binary.text.startswith("/file add: ")
    assert "not UTF-8" in (await dispatch(ws, "/file add latin1.txt")).text
    outside = await dispatch(ws, "/file add ../../etc/passwd")
    assert "outside the project root" in outside.text
    assert await ws.ledger.context_files(ws.session) == []


# -- handoffs ------------------------------------------------------------------------


async def test_handoff_write_show_export(ws, tmp_path):
    assert "no handoff yet" in (await dispatch(ws, "/handoff show")).text
    await ws.ledger.set_scratchpad(ws.session, "## Task\nShip it\n- [x] plan\n- [ ] build\n")
    written = await dispatch(ws, "/handoff write")
    assert written.ok and written.text.startswith("# Handoff: Ship it")
    assert "- Git: not a git repository" in written.text
    shown = await dispatch(ws, "/handoff")
    assert shown.ok and shown.text == written.text
    h = await ws.ledger.latest_handoff(ws.session)
    assert h is not None and h.reason == "manual" and h.remaining == ("build",)

    exported = await dispatch(ws, "/handoff export docs/handoff.md")
    assert exported.ok, exported.text
    target = tmp_path / "docs" / "handoff.md"
    assert target.read_text() == written.text
    target.write_text("keep me")
    refused = await dispatch(ws, "/handoff export docs/handoff.md")
    assert not refused.ok and "--force" in refused.text
    assert target.read_text() == "keep me"
    forced = await dispatch(ws, "/handoff export --force docs/handoff.md")
    assert forced.ok and target.read_text() == written.text
    folder = await dispatch(ws, "/handoff export docs --force")
    assert not folder.ok and "directory" in folder.text


async def test_handoff_never_holds_a_secret(ws, tmp_path):
    await ws.ledger.set_scratchpad(
        ws.session, f"## Task\nDeploy with {SECRET}\n- [ ] rotate {SECRET}\n"
    )
    written = await dispatch(ws, "/handoff write")
    assert written.ok and SECRET not in written.text
    await dispatch(ws, "/handoff export h.md")
    assert SECRET not in (tmp_path / "h.md").read_text()
    cur = await ws.ledger._db.execute("SELECT * FROM handoffs")
    assert SECRET not in repr([tuple(r) for r in await cur.fetchall()])


# -- compaction log and un-compaction --------------------------------------------------


async def test_context_log_and_uncompact(ws):
    assert "no compactions yet" in (await dispatch(ws, "/context log")).text
    await dispatch(ws, "/context window 1")
    g1 = await add_group(ws, "old question", "old answer")
    g2 = await add_group(ws, "new question", "new answer")
    # g1 left the window; no summary covers it yet: one line lists it, it is not sent
    before = await ws.prompt("openai")
    assert "old question" not in render_prompt(before)
    assert f"group {g1} (2 message(s)): not summarized yet" in before.system_text
    ids = [m.id for m in await ws.ledger.group_messages(ws.session, g1)]
    summary = await ws.ledger.add_summary(ws.session, "main", "lane", ids, "it was old")
    await ws.ledger.log_compaction(
        ws.session,
        case_kind="summarize",
        trigger="history 25100 > 24000 tokens",
        tokens_before=25100,
        tokens_after=4100,
        summary_id=summary.id,
        first_message_id=ids[0],
        last_message_id=ids[-1],
        detail="topic boundary: low confidence",
    )
    covered = await ws.prompt("openai")
    assert "old question" not in render_prompt(covered) and "it was old" in covered.system_text
    # the window is a view: the ledger's rows are untouched
    assert {m.group_id for m in await ws.ledger.window(ws.session, 0)} == {g1, g2}

    log = await dispatch(ws, "/context log")
    assert log.ok
    assert "**summarize**" in log.text and "tokens 25100 → 4100 (−83%)" in log.text
    assert "trigger: history 25100 > 24000 tokens" in log.text
    assert f"covered messages {ids[0]}–{ids[-1]}" in log.text
    assert f"summary {summary.id}: in the request; /context uncompact {summary.id}" in log.text
    assert (
        f'query_db(sql="SELECT id, role, content FROM messages WHERE session_id='
        f"'{ws.session}' AND id BETWEEN {ids[0]} AND {ids[-1]}\")" in log.text
    )

    result = await dispatch(ws, f"/context uncompact {summary.id}")
    assert result.ok and f"Un-compacted summary {summary.id}" in result.text
    assert Changed.HISTORY in result.changed
    after = await ws.prompt("openai")
    assert after.messages == before.messages
    assert "discarded by /context uncompact" in (await dispatch(ws, "/context log")).text
    repeat = await dispatch(ws, f"/context uncompact {summary.id}")
    assert repeat.ok and "already discarded" in repeat.text


async def test_log_and_uncompact_agree_on_a_summary_outside_the_request(ws):
    """A stored summary the request does not hold (the window widened over it) is shown
    as stored, and uncompact says so instead of claiming to restore anything."""
    await dispatch(ws, "/context window 1")
    g1 = await add_group(ws, "old question", "old answer")
    await add_group(ws, "new question", "new answer")
    summary = await ws.ledger.add_summary(ws.session, "main", "lane", [g1], "it was old")
    await ws.ledger.log_compaction(
        ws.session,
        case_kind="summarize",
        trigger="t",
        tokens_before=2,
        tokens_after=1,
        summary_id=summary.id,
    )
    await dispatch(ws, "/context window 0")
    assert "stored, not in the request now" in (await dispatch(ws, "/context log")).text
    result = await dispatch(ws, f"/context uncompact {summary.id}")
    assert result.ok and "it was not in the request" in result.text
    # an edit under a summary: out of date, said the same way by both commands
    second = await ws.ledger.add_summary(ws.session, "main", "lane", [g1], "again")
    await ws.ledger.log_compaction(
        ws.session,
        case_kind="summarize",
        trigger="t",
        tokens_before=2,
        tokens_after=1,
        summary_id=second.id,
    )
    await dispatch(ws, f"/context drop {g1}")
    assert f"summary {second.id}: out of date" in (await dispatch(ws, "/context log")).text
    stale = await dispatch(ws, f"/context uncompact {second.id}")
    assert stale.ok and "out of date" in stale.text


async def test_uncompact_refuses_another_sessions_summary(ws):
    g1 = await add_group(ws, "q")
    summary = await ws.ledger.add_summary(ws.session, "main", "compaction", [g1], "s")
    await dispatch(ws, "/session activate other")
    before = await fingerprint(ws)
    result = await dispatch(ws, f"/context uncompact {summary.id}")
    assert not result.ok and "no summary" in result.text
    assert await fingerprint(ws) == before
