"""The slash-command dispatcher: every surface runs these same paths."""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest

from slop_tui.commands import TABLE, commands_doc, dispatch, help_markdown
from slop_tui.records import NewMessage
from tests.workspace_fixtures import open_workspace


@pytest.fixture
async def ws(tmp_path):
    w = await open_workspace(tmp_path)
    yield w
    await w.close()


async def ledger_fingerprint(ws) -> str:
    rows = []
    for table in ("sessions", "messages", "state_versions", "usage", "memos", "skills", "tools"):
        cur = await ws.ledger._db.execute(f"SELECT * FROM {table} ORDER BY 1")
        rows.append(repr([tuple(r) for r in await cur.fetchall()]))
    return hashlib.sha256("".join(rows).encode()).hexdigest()


async def add_group(ws, prompt: str, answer: str, session: str | None = None) -> int:
    user = await ws.ledger.append_user(session or ws.session, prompt)
    await ws.ledger.append(
        session or ws.session, user.group_id, [NewMessage(role="assistant", content=answer)]
    )
    return user.group_id


async def test_unknown_command_changes_nothing(ws):
    before = await ledger_fingerprint(ws)
    result = await dispatch(ws, "/frobnicate now")
    assert (result.ok, result.text, result.exit_code) == (False, "Unknown command: /frobnicate", 2)
    assert await ledger_fingerprint(ws) == before


@pytest.mark.parametrize(
    "line",
    [
        "/context window abc",
        "/context window -1",
        "/message show x",
        "/message list 0",
        "/session activate",
        "/session clone   ",
        "/memo add onlytags",
        "/history search",
        "/history search foo --role robot",
        "/history search foo --limit",
        "/session nope",
        "/context show --yaml",
        "/throttle soon",
        "/undo now",
        "/skill activate",
    ],
)
async def test_wrong_arguments_give_one_usage_line(ws, line):
    before = await ledger_fingerprint(ws)
    result = await dispatch(ws, line)
    assert not result.ok
    assert result.error_kind == "usage", result.text
    assert "\n" not in result.text and result.text
    assert await ledger_fingerprint(ws) == before


async def test_plain_text_is_not_a_command(ws):
    result = await dispatch(ws, "  hello /not a command")
    assert result.ok and result.send == "  hello /not a command"


@pytest.mark.parametrize(
    "name", ['it\'s "quoted"', "with spaces here", "ünïcödé 会话", "x' OR '1'='1", "session[1]"]
)
async def test_session_names_are_taken_literally(ws, name):
    result = await dispatch(ws, f"/session activate {name}")
    assert result.ok
    await add_group(ws, "hi", "hello")
    assert ws.session == name
    names = [s.name for s in await ws.ledger.list_sessions()]
    assert names == [name]
    listing = await dispatch(ws, "/session list")
    assert name in listing.text


async def test_session_lifecycle(ws):
    await add_group(ws, "first prompt", "answer")
    await dispatch(ws, "/session scratchpad set plan: step 1")
    clone = await dispatch(ws, "/session clone copy")
    assert clone.ok and ws.session == "copy"
    assert (await ws.current()).scratchpad == "plan: step 1"
    assert len(await ws.ledger.session_messages("copy")) == 2
    again = await dispatch(ws, "/session clone copy")
    assert not again.ok and "already exists" in again.text
    await dispatch(ws, "/context window 3")
    cleared = await dispatch(ws, "/session clear")
    assert cleared.ok
    sess = await ws.current()
    assert (sess.scratchpad, sess.window_size, sess.message_count) == ("plan: step 1", 3, 0)
    removed = await dispatch(ws, "/session remove copy")
    assert removed.ok and ws.session == "default_session"
    missing = await dispatch(ws, "/session remove copy")
    assert not missing.ok and missing.exit_code == 1


async def test_current_session_survives_restart(tmp_path):
    ws = await open_workspace(tmp_path)
    await dispatch(ws, "/session activate work")
    await dispatch(ws, "/skill activate planner")
    await dispatch(ws, "/throttle 2")
    await ws.close()
    ws2 = await open_workspace(tmp_path)
    try:
        assert ws2.session == "work"
        assert ws2.active_skills == ["planner"]
        assert ws2.throttle == 2.0
        await dispatch(ws2, "/session activate other")
        assert ws2.active_skills == ["planner"]  # skills belong to the workspace
    finally:
        await ws2.close()


async def test_a_session_given_at_open_is_stored_then_or_when_the_caller_says(tmp_path):
    from slop_tui.config import load_config
    from slop_tui.workspace import KEY_SESSION, Workspace

    config = load_config(db=str(tmp_path / ".slop" / "slop.db"), env={}, cwd=tmp_path)
    ws = await Workspace.open(config, "work")
    assert await ws.ledger.get_setting(KEY_SESSION) == "work"  # at once, by default
    await ws.close()
    # The app's first screen shows before anything is written.
    ws = await Workspace.open(config, "other", defer_writes=True)
    try:
        assert ws.session == "other"
        assert await ws.ledger.get_setting(KEY_SESSION) == "work"
        await ws.save_session()
        assert await ws.ledger.get_setting(KEY_SESSION) == "other"
    finally:
        await ws.close()
    # Closed before the caller stored it (quit before the first screen): stored then.
    ws = await Workspace.open(config, "third", defer_writes=True)
    await ws.close()
    ws = await Workspace.open(config)
    try:
        assert ws.session == "third"
    finally:
        await ws.close()


async def test_drop_restore_undo_and_state_versions(ws):
    g1 = await add_group(ws, "one", "a\n### STATE\nGoal: one")
    await ws.ledger.add_state(ws.session, g1, "### STATE\nGoal: one")
    g2 = await add_group(ws, "two", "b\n### STATE\nGoal: two")
    await ws.ledger.add_state(ws.session, g2, "### STATE\nGoal: two")
    dropped = await dispatch(ws, f"/context drop {g2}")
    assert dropped.ok and f"STATE now from group {g1}" in dropped.text
    prompt = await ws.prompt("openai")
    assert "Goal: one" in prompt.system_text and "two" not in "".join(
        m.text for m in prompt.messages
    )
    await dispatch(ws, f"/context restore {g2}")
    assert (await ws.ledger.current_state(ws.session)).content.endswith("two")
    undo = await dispatch(ws, "/undo")
    assert undo.ok and str(g2) in undo.text
    assert (await ws.ledger.current_state(ws.session)).content.endswith("one")
    missing = await dispatch(ws, "/message show 9999")
    assert not missing.ok and "no group 9999" in missing.text


async def test_message_remove_is_scoped_to_the_session(ws):
    other = await add_group(ws, "elsewhere", "x", session="other")
    result = await dispatch(ws, f"/message remove {other}")
    assert not result.ok
    assert len(await ws.ledger.session_messages("other")) == 2


async def test_message_list_and_show(ws):
    g = await add_group(ws, "what | is this", "an answer")
    listing = await dispatch(ws, "/message list 5")
    assert f"| {g} | 2 |" in listing.text and "| what \\| is this |" in listing.text
    shown = await dispatch(ws, f"/message show {g}")
    assert "an answer" in shown.text and "user" in shown.text


async def test_history_search_across_sessions(ws):
    await add_group(ws, "the Needle here", "ok", session="a")
    await add_group(ws, "another needle", "ok", session="b")
    result = await dispatch(ws, "/history search NEEDLE --role user --limit 5")
    assert result.ok and [h.session for h in result.data] == ["b", "a"]


async def test_context_show_layers_and_window(ws):
    await dispatch(ws, "/session scratchpad set - [ ] write tests")
    await add_group(ws, "please read the file", "done")
    shown = await dispatch(ws, "/context show")
    assert shown.ok and "write tests" in shown.text and "please read the file" in shown.text
    assert (await dispatch(ws, "/context window 0")).text == "Full history mode."


async def test_context_rebuild_asks_the_model_without_a_turn_running(ws):
    # `slop-tui exec "/context rebuild"`: no orchestrator has set one up; the command asks
    # the configured model itself (here the offline demo), and counts the call.
    await add_group(ws, "go", "done\n### STATE\nGoal: rebuilt")
    result = await dispatch(ws, "/context rebuild")
    assert result.ok and "rebuilt by the model" in result.text
    assert ws.rebuild_state is None  # nothing left behind
    assert [p for p, *_ in await ws.ledger.usage_by_purpose(ws.session)] == ["rebuild"]


async def test_context_rebuild_without_a_model_rederives(ws):
    g = await add_group(ws, "go", "done\n### STATE\nGoal: rebuilt")

    async def unreachable() -> None:
        return None

    ws.rebuild_state = unreachable
    result = await dispatch(ws, "/context rebuild")
    assert result.ok and "re-derived" in result.text
    state = await ws.ledger.current_state(ws.session)
    assert state.group_id == g and "Goal: rebuilt" in state.content


async def test_memos_and_editor(ws):
    added = await dispatch(ws, "/memo add arch-decision,db We use SQLite in WAL mode")
    assert added.ok
    found = await dispatch(ws, "/memo search arch")
    assert "SQLite" in found.text
    ws.editor = lambda text, suffix: text.replace("WAL mode", "WAL mode always")
    assert (await dispatch(ws, "/memo edit 1")).ok
    assert (await ws.ledger.get_memo(1)).content.endswith("always")
    ws.editor = lambda text, suffix: ""
    assert "moved to the trash" in (await dispatch(ws, "/memo edit 1")).text
    assert await ws.ledger.get_memo(1) is None


async def test_skills(ws):
    assert "planner" in (await dispatch(ws, "/skill list")).text
    assert (await dispatch(ws, "/skill add tester Always write a failing test first.")).ok
    assert (await dispatch(ws, "/skill activate tester")).ok
    prompt = await ws.prompt("openai")
    assert "Always write a failing test first." in prompt.system_text
    assert (await dispatch(ws, "/skill deactivate tester")).ok
    assert "failing test" not in (await ws.prompt("openai")).system_text
    unknown = await dispatch(ws, "/skill activate nosuch")
    assert not unknown.ok and ws.active_skills == []


async def test_tools_enable_disable(ws):
    listing = await dispatch(ws, "/tool list")
    assert "query_db" in listing.text
    assert (await dispatch(ws, "/tool disable execute_bash")).ok
    assert "execute_bash" not in [t.name for t in await ws.enabled_tools()]
    assert (await dispatch(ws, "/tool enable execute_bash")).ok
    assert "execute_bash" in [t.name for t in await ws.enabled_tools()]


async def test_help_lists_every_command_and_docs_match():
    text = help_markdown()
    for cmd in TABLE.commands:
        assert cmd.usage.replace("|", "\\|") in text
    doc = Path(__file__).resolve().parent.parent / "docs" / "commands.md"
    assert doc.read_text(encoding="utf-8") == commands_doc(), "run `make docs` to regenerate"


async def test_config_window_is_the_default_for_new_sessions(tmp_path):
    from dataclasses import replace

    from slop_tui.config import load_config
    from slop_tui.workspace import Workspace
    from tests.workspace_fixtures import rough

    config = load_config(db=str(tmp_path / "slop.db"), env={}, cwd=tmp_path)
    ws = await Workspace.open(
        replace(config, context={"window": 2}), "fresh", count_tokens=rough, env={}
    )
    try:
        assert (await ws.current()).window_size == 2
        await add_group(ws, "hello", "hi")
        assert (await ws.ledger.get_session("fresh")).window_size == 2
    finally:
        await ws.close()
