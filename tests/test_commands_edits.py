"""/undo, /redo, /message remove, /context drop, /session clear|remove, /trash and /retry
through the one dispatcher (and `slop-tui exec`): every edit is reversible, bad
input is one line with exit code 1 or 2 and changes nothing."""

from __future__ import annotations

import hashlib
import json

import pytest

from slop_tui.commands import dispatch
from slop_tui.orchestrator import Orchestrator
from slop_tui.providers.retry import RetryPolicy
from slop_tui.records import NewMessage
from tests.fakeserver import Reply
from tests.test_cli import run
from tests.workspace_fixtures import open_workspace


@pytest.fixture
async def ws(tmp_path):
    w = await open_workspace(tmp_path)
    yield w
    await w.close()


async def add_group(ws, prompt: str, state: str | None = None) -> int:
    user = await ws.ledger.append_user(ws.session, prompt)
    answer = f"answer to {prompt}" + (f"\n### STATE\n{state}" if state else "")
    await ws.ledger.append(ws.session, user.group_id, [NewMessage("assistant", answer)])
    if state:
        await ws.ledger.add_state(ws.session, user.group_id, state)
    return user.group_id


async def fingerprint(ws) -> str:
    rows = []
    tables = ["sessions", "messages", "state_versions", "edits"]
    tables += [t for t in await _trash_tables(ws)]
    for table in tables:
        cur = await ws.ledger._db.execute(f"SELECT * FROM {table} ORDER BY rowid")
        rows.append(repr([tuple(r) for r in await cur.fetchall()]))
    return hashlib.sha256("".join(rows).encode()).hexdigest()


async def _trash_tables(ws) -> list[str]:
    rows = await ws.ledger._tuples(
        "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'trash%' ORDER BY name"
    )
    return [r[0] for r in rows]


async def live_groups(ws, session: str | None = None) -> list[int]:
    return [r[0] for r in await ws.ledger.group_rows(session or ws.session)]


async def test_undo_and_remove_go_to_the_trash_and_redo_brings_them_back(ws):
    g1 = await add_group(ws, "one", state="Goal: one")
    g2 = await add_group(ws, "two", state="Goal: two")
    g3 = await add_group(ws, "three")

    undo = await dispatch(ws, "/undo")
    assert undo.ok and undo.revert == "/redo" and f"group {g3}" in undo.text
    assert undo.announcement() == undo.text + " /redo brings it back."
    assert undo.announcement("ctrl+y").endswith("ctrl+y brings it back.")
    removed = await dispatch(ws, f"/message remove {g1}")
    assert removed.ok and "trash entry" in removed.text and removed.revert == "/redo"
    assert await live_groups(ws) == [g2]
    assert (await ws.ledger.current_state(ws.session)).content == "Goal: two"

    listed = await dispatch(ws, "/trash list")
    assert listed.ok and [e.group_id for e in listed.data] == [g1, g3]
    assert (
        "removed group" in listed.text
        and "undone group" in listed.text
        and "| one |" in (listed.text)
    )

    again = await dispatch(ws, "/redo")  # the newest takeaway first: the removal
    assert again.ok and f"group {g1}" in again.text
    again = await dispatch(ws, "/redo")
    assert again.ok and f"group {g3}" in again.text
    assert await live_groups(ws) == [g1, g2, g3]
    assert (await ws.ledger.current_state(ws.session)).content == "Goal: two"


async def test_drop_restore_and_redo_of_a_drop(ws):
    g1 = await add_group(ws, "one")
    dropped = await dispatch(ws, f"/context drop {g1}")
    assert dropped.ok and dropped.revert == "/redo"
    restored = await dispatch(ws, "/redo")
    assert restored.ok and restored.text.startswith(f"Restored group {g1}")
    assert {m.status for m in await ws.ledger.group_messages(ws.session, g1)} == {"completed"}
    # /context restore is not a takeaway: nothing on the stack afterwards.
    await dispatch(ws, f"/context drop {g1}")
    assert (await dispatch(ws, f"/context restore {g1}")).revert is None
    assert not (await dispatch(ws, "/redo")).ok


async def test_session_clear_and_remove_are_reversible(ws):
    g1 = await add_group(ws, "one")
    await dispatch(ws, "/session clone other")  # now in 'other'
    assert ws.session == "other"
    cleared = await dispatch(ws, "/session clear")
    assert cleared.ok and "moved to the trash" in cleared.text and cleared.revert == "/redo"
    assert await live_groups(ws) == []
    nothing = await dispatch(ws, "/session clear")
    assert nothing.ok and "no history to clear" in nothing.text
    assert (await dispatch(ws, "/redo")).ok
    assert len(await live_groups(ws)) == 1

    removed = await dispatch(ws, "/session remove other")
    assert removed.ok and ws.session == "default_session" and removed.revert == "/redo"
    assert await ws.ledger.get_session("other") is None
    back = await dispatch(ws, "/redo")
    assert back.ok and "session 'other'" in back.text
    assert len(await live_groups(ws, "other")) == 1
    assert await live_groups(ws) == [g1]


@pytest.mark.parametrize(
    ("line", "code", "says"),
    [
        ("/redo", 1, "nothing to redo"),
        ("/redo now", 2, "takes no arguments"),
        ("/trash restore 999", 1, "no entry 999"),
        ("/trash restore x", 2, "whole number"),
        ("/trash empty", 2, "add --yes"),
        ("/trash empty now", 2, "add --yes"),
        ("/trash list extra", 2, "takes no arguments"),
        ("/retry", 1, "no failed prompt"),
        ("/retry 5", 1, "not a failed prompt"),
    ],
)
async def test_bad_input_is_one_line_and_changes_nothing(ws, line, code, says):
    g1 = await add_group(ws, "one")
    await dispatch(ws, f"/message remove {g1}")  # something in the trash
    turn = await ws.ledger.open_turn(ws.session, "a turn", strategy="openai")
    await ws.ledger.clear_inflight(turn.id)  # it ended: nothing is left to /redo
    before = await fingerprint(ws)
    result = await dispatch(ws, line)
    assert not result.ok and result.exit_code == code, result
    assert says in result.text and "\n" not in result.text
    assert await fingerprint(ws) == before


async def test_trash_restore_and_empty(ws):
    g1 = await add_group(ws, "one")
    g2 = await add_group(ws, "two")
    first = (await dispatch(ws, f"/message remove {g1}")).data
    await dispatch(ws, f"/message remove {g2}")
    restored = await dispatch(ws, f"/trash restore {first.id}")
    assert restored.ok and f"group {g1}" in restored.text
    assert await live_groups(ws) == [g1]
    twice = await dispatch(ws, f"/trash restore {first.id}")
    assert not twice.ok and "restored already" in twice.text
    emptied = await dispatch(ws, "/trash empty --yes")
    assert emptied.ok and "1 entry (2 messages) deleted for good" in emptied.text
    assert (await dispatch(ws, "/trash list")).text == "The trash is empty."
    assert (await dispatch(ws, "/trash empty --yes")).text.startswith("The trash is empty")


async def test_a_running_turn_refuses_edits_of_its_group_and_session_switches(ws):
    g1 = await add_group(ws, "one")
    # The turn's prompt and in-flight record, as `Orchestrator.run_turn` opens them.
    turn = await ws.ledger.open_turn(ws.session, "running", strategy="openai")
    assert await ws.ledger.running_here() == (ws.session, turn.id)
    before = await fingerprint(ws)
    for line in (
        "/undo",
        f"/message remove {turn.id}",
        f"/context drop {turn.id}",
        "/session clear",
        "/session remove default_session",
        "/session activate elsewhere",
        "/session clone elsewhere",
        "/retry",
        "/lane new side",
        f"/reply {g1} and then?",
    ):
        result = await dispatch(ws, line)
        assert not result.ok and result.exit_code == 1, line
        assert f"group {turn.id}'s turn is still running" in result.text, (line, result.text)
    assert await fingerprint(ws) == before
    assert ws.session == "default_session"
    # Other groups stay editable while it runs.
    assert (await dispatch(ws, f"/context drop {g1}")).ok


async def test_a_failed_prompt_is_marked_not_replayed_and_retry_sends_it_again(tmp_path, fake_llm):
    env = {"OPENAI_API_KEY": "x", "OPENAI_BASE_URL": fake_llm.openai_base_url}
    ws = await open_workspace(tmp_path, env=env)
    orch = Orchestrator(ws, retry_policy=RetryPolicy(max_retries=0))
    try:
        fake_llm.enqueue(Reply(text="first answer"))
        await orch.run_turn("first question")
        fake_llm.enqueue(Reply(status=500, error_message="server down"))
        failed = await orch.run_turn("the question that failed")
        assert failed.error and "server down" in failed.error
        prompt = await ws.ledger.get_message(failed.group_id)
        assert prompt.status == "error"
        assert await ws.ledger.failed_prompts(ws.session) == [failed.group_id]

        # Another prompt is not merged with the failed one: it is not replayed.
        fake_llm.enqueue(Reply(text="second answer"))
        await orch.run_turn("second question")
        users = "".join(m["content"] for m in fake_llm.last_chat.messages if m["role"] == "user")
        assert "first question" in users and "second question" in users
        assert "the question that failed" not in json.dumps(fake_llm.last_chat.body)

        result = await dispatch(ws, "/retry")
        assert result.ok and result.send == "the question that failed"
        assert failed.group_id not in await live_groups(ws)  # the attempt is in the trash
        fake_llm.enqueue(Reply(text="answered at last"))
        again = await orch.run_turn(result.send)
        assert again.text == "answered at last"
        assert json.dumps(fake_llm.last_chat.body).count("the question that failed") == 1
        assert await ws.ledger.failed_prompts(ws.session) == []
        assert not await ws.ledger.inflight_records()
    finally:
        await orch.aclose()
        await ws.close()


def test_exec_needs_yes_to_empty_the_trash_and_says_what_to_do(tmp_path):
    assert run(["exec", "/session scratchpad set x"], tmp_path).returncode == 0
    r = run(["exec", "/trash empty"], tmp_path)
    assert r.returncode == 2 and r.stdout == ""
    assert r.stderr.strip() == (
        "slop-tui: /trash empty deletes 0 entries (0 messages) for good; add --yes to confirm: "
        "/trash empty --yes"
    )
    r = run(["exec", "/redo"], tmp_path)
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "nothing to redo" in r.stderr
    r = run(["exec", "/trash restore 3"], tmp_path)
    assert r.returncode == 1 and "no entry 3" in r.stderr
    assert run(["exec", "/trash empty --yes"], tmp_path).returncode == 0


async def test_memos_and_skills_go_to_the_trash_and_come_back(ws, tmp_path):
    from slop_tui.tools import ToolContext, run_tool

    added = await dispatch(ws, "/memo add --tags ops the deploy window is Tuesday 14:00")
    assert added.ok
    (memo,) = await ws.ledger.list_memos()
    removed = await dispatch(ws, f"/memo remove {memo.id}")
    assert removed.ok and "trash" in removed.text and removed.revert == "/redo"
    assert await ws.ledger.list_memos() == []
    # Gone from retrieval and from what the model can read, kept in the trash.
    assert (await ws.ledger.memo_candidates(["deploy"]))[0] == []
    ctx = ToolContext(ledger=ws.ledger, session=ws.session, project_root=tmp_path)
    seen = await run_tool("query_db", {"sql": "SELECT * FROM trash_memos"}, ctx)
    assert "Tuesday" not in seen.text and "refused" in seen.text
    listing = (await dispatch(ws, "/trash list")).text
    assert "removed memo" in listing and "the deploy window" in listing
    back = await dispatch(ws, "/redo")
    assert back.ok and "the deploy window" in back.text
    assert [(m.id, m.content) for m in await ws.ledger.list_memos()] == [(memo.id, memo.content)]
    assert [m.id for m in (await ws.ledger.memo_candidates(["deploy"]))[0]] == [memo.id]

    gone = await dispatch(ws, "/skill delete planner")
    assert gone.ok and await ws.ledger.get_skill("planner") is None
    entry = gone.data if gone.data is not None else None
    (trashed,) = [e for e in await ws.ledger.trash() if e.kind == "skill_remove"]
    assert entry is None or entry.id == trashed.id
    # A new skill of the same name: restoring says so in one line and changes nothing.
    await ws.ledger.add_skill("planner", "mine", "my patch")
    before = await fingerprint(ws)
    refused = await dispatch(ws, f"/trash restore {trashed.id}")
    assert not refused.ok and "exists again" in refused.text
    assert await fingerprint(ws) == before
    mine = await ws.ledger.get_skill("planner")
    assert (await dispatch(ws, f"/skill delete {mine.id}")).ok
    assert (await dispatch(ws, f"/trash restore {trashed.id}")).ok
    restored = await ws.ledger.get_skill("planner")
    assert restored is not None and restored.description != "mine"
