"""Sessions (seed 001): lazy creation, list, remove, clear, clone, literal names."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from slop_tui.ledger import Ledger, LedgerError
from slop_tui.records import Message, NewMessage

PER_SESSION_TABLES = ("messages", "usage", "state_versions", "summaries")


@pytest.fixture
async def ledger(tmp_path: Path):
    # Tokens = characters, so totals are easy to state exactly.
    led = await Ledger.open(tmp_path / "slop.db", count_tokens=len)
    yield led
    await led.close()


async def _count(led: Ledger, table: str, session: str) -> int:
    row = await led._one(f"SELECT COUNT(*) FROM {table} WHERE session_id=?", (session,))
    assert row is not None
    return row[0]


async def _session_tables(led: Ledger) -> list[str]:
    out = []
    for name, _ in await led.schema_sql():
        columns = await led._all(f"PRAGMA table_info({name})")
        if any(c["name"] == "session_id" for c in columns):
            out.append(name)
    return out


async def _group(
    led: Ledger,
    session: str,
    prompt: str,
    *,
    answer: str = "done",
    state: str | None = None,
    call_id: str = "c1",
) -> int:
    """One realistic group: user, assistant tool call, two tool results, final answer."""
    user = await led.append_user(session, prompt)
    gid = user.id
    payload = json.dumps(
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "a"}'},
                },
                {
                    "id": call_id + "b",
                    "type": "function",
                    "function": {"name": "read_file", "arguments": '{"path": "b"}'},
                },
            ],
        }
    )
    await led.append(
        session,
        gid,
        [
            NewMessage("assistant", "", status="tool_call", payload=payload, strategy="openai"),
            NewMessage("tool", "A" * 30, tool_call_id=call_id, tool_name="read_file"),
            NewMessage("tool", "B" * 40, tool_call_id=call_id + "b", tool_name="read_file"),
        ],
    )
    await led.append(session, gid, [NewMessage("assistant", answer, strategy="openai")])
    if state is not None:
        await led.add_state(session, gid, state)
    return gid


def _shape(messages: list[Message]) -> list[tuple]:
    """Messages without ids: group position, role, content, status, tool data, tokens."""
    order: dict[int | None, int | None] = {None: None}
    for m in messages:
        if m.group_id not in order:
            order[m.group_id] = len(order)
    return [
        (
            order[m.group_id],
            m.lane,
            m.role,
            m.content,
            m.status,
            m.payload,
            m.tool_call_id,
            m.tool_name,
            m.strategy,
            m.tokens,
            m.created_at,
        )
        for m in messages
    ]


# --- lazy creation and list ----------------------------------------------------------


async def test_session_is_created_lazily_on_first_write(ledger: Ledger) -> None:
    assert await ledger.list_sessions() == []
    assert await ledger.get_session("work") is None
    default = await ledger.session_or_default("work")
    assert (default.name, default.window_size, default.scratchpad) == ("work", 5, "")
    # Reads do not create it.
    assert await ledger.window("work", 5) == []
    assert await ledger.list_groups("work") == []
    assert await ledger.current_state("work") is None
    assert await ledger.get_session("work") is None
    msg = await ledger.append_user("work", "first prompt")
    session = await ledger.get_session("work")
    assert session is not None
    assert (session.message_count, session.token_total) == (1, len("first prompt"))
    assert session.created_at <= session.updated_at
    assert msg.session == "work"


@pytest.mark.parametrize(
    "write",
    [
        lambda led: led.set_scratchpad("w", "pad"),
        lambda led: led.set_window("w", 3),
        lambda led: led.add_state("w", None, "S"),
        lambda led: led.record_usage("w", None, "openai", "gpt-4o", 1, 2),
        lambda led: led.ensure_session("w"),
        lambda led: led.set_provider("w", "openai", "gpt-4o"),
    ],
    ids=["scratchpad", "window", "state", "usage", "ensure", "provider"],
)
async def test_every_first_write_creates_the_session(ledger: Ledger, write) -> None:
    await write(ledger)
    assert await ledger.get_session("w") is not None


async def test_list_sessions(ledger: Ledger) -> None:
    long_prompt = "  Please   refactor\nthe parser " + "x" * 100
    await _group(ledger, "alpha", long_prompt)
    await _group(ledger, "alpha", "second")
    await _group(ledger, "beta", "beta prompt")
    await ledger.set_scratchpad("empty", "only a scratchpad")

    listed = {s.name: s for s in await ledger.list_sessions()}
    assert set(listed) == {"alpha", "beta", "empty"}
    alpha, beta, empty = listed["alpha"], listed["beta"], listed["empty"]
    assert (alpha.groups, alpha.messages) == (2, 10)
    assert (beta.groups, beta.messages) == (1, 5)
    assert (empty.groups, empty.messages, empty.tokens, empty.preview) == (0, 0, 0, "")
    # Tokens equal the stored sum (count_tokens=len).
    for name in ("alpha", "beta"):
        rows = await ledger.session_messages(name)
        assert listed[name].tokens == sum(m.tokens for m in rows) > 0
    # Preview: the first prompt, whitespace collapsed, cut to 60 characters.
    assert alpha.preview.startswith("Please refactor the parser xxx")
    assert len(alpha.preview) == 60 and alpha.preview.endswith("…")
    assert beta.preview == "beta prompt"
    # Most recently used first.
    assert [s.name for s in await ledger.list_sessions()] == ["empty", "beta", "alpha"]
    await ledger.append_user("alpha", "again")
    assert [s.name for s in await ledger.list_sessions()][0] == "alpha"


async def test_list_counts_dropped_groups_and_keeps_first_prompt_preview(ledger: Ledger) -> None:
    g1 = await _group(ledger, "s", "the very first")
    await _group(ledger, "s", "later")
    await ledger.set_group_dropped("s", g1, True)
    (summary,) = await ledger.list_sessions()
    assert (summary.groups, summary.messages) == (2, 10)
    assert summary.preview == "the very first"


# --- remove --------------------------------------------------------------------------


async def _populate(led: Ledger, session: str) -> int:
    gid = await _group(led, session, f"{session} prompt", state=f"STATE of {session}")
    await led.record_usage(session, gid, "openai", "gpt-4o", 100, 20, 5)
    await led.add_summary(session, "main", "lane", [gid, gid + 4], f"summary of {session}")
    await led.set_scratchpad(session, f"pad of {session}")
    await led.set_window(session, 3)
    return gid


async def test_remove_session_cascades_everything(ledger: Ledger) -> None:
    await _populate(ledger, "doomed")
    await _populate(ledger, "kept")
    kept_before = await ledger.get_session("kept")
    for table in PER_SESSION_TABLES:
        assert await _count(ledger, table, "doomed") > 0

    assert await ledger.remove_session("doomed") is True
    assert await ledger.get_session("doomed") is None
    for table in PER_SESSION_TABLES:
        assert await _count(ledger, table, "kept") > 0, table
    # Every table with a session column, including ones later schema versions add, except
    # the edit journal and the trash, which keep the session for /trash restore.
    tables = await _session_tables(ledger)
    assert set(PER_SESSION_TABLES) <= set(tables)
    for table in tables:
        if table != "edits" and not table.startswith("trash_"):
            assert await _count(ledger, table, "doomed") == 0, table
    assert await ledger.usage_totals("doomed") == []
    assert await ledger.get_session("kept") == kept_before
    assert [s.name for s in await ledger.list_sessions()] == ["kept"]
    assert await ledger.remove_session("doomed") is False
    assert await ledger.remove_session("never-existed") is False


async def test_clear_session_keeps_scratchpad_and_window(ledger: Ledger) -> None:
    await _populate(ledger, "s")
    await _populate(ledger, "other")
    await ledger.clear_session("s")
    for table in PER_SESSION_TABLES:
        assert await _count(ledger, table, "s") == 0, table
        assert await _count(ledger, table, "other") > 0, table
    session = await ledger.get_session("s")
    assert session is not None
    assert (session.scratchpad, session.window_size) == ("pad of s", 3)
    assert (session.message_count, session.token_total) == (0, 0)
    assert await ledger.current_state("s") is None
    assert await ledger.window("s", 0) == []
    assert await ledger.usage_totals("s") == []
    assert await ledger.summaries("s") == []
    # The session goes on normally afterwards.
    gid = await _group(ledger, "s", "fresh start")
    assert [m.group_id for m in await ledger.window("s", 5)] == [gid] * 5


# --- clone ---------------------------------------------------------------------------


async def _assert_clone_equal(led: Ledger, source: str, target: str) -> None:
    src_rows = await led.session_messages(source)
    dst_rows = await led.session_messages(target)
    assert _shape(dst_rows) == _shape(src_rows)
    src_ids = {m.id for m in src_rows}
    dst_ids = {m.id for m in dst_rows}
    assert not src_ids & dst_ids
    # Group ids point at the clone's own user rows: each group's id is its prompt's id.
    by_id = {m.id: m for m in dst_rows}
    for m in dst_rows:
        if m.group_id is not None:
            head = by_id[m.group_id]
            assert (head.role, head.group_id, head.session) == ("user", head.id, target)
    # The window reads the same conversation.
    for n in (0, 1, 2, 5):
        assert _shape(await led.window(target, n)) == _shape(await led.window(source, n))
    # STATE versions: same contents, tied to the corresponding clone groups.
    gid_map = {s.group_id: d.group_id for s, d in zip(src_rows, dst_rows, strict=True)}
    src_states = await led.state_versions(source)
    dst_states = await led.state_versions(target)
    assert [s.content for s in dst_states] == [s.content for s in src_states]
    assert [s.group_id for s in dst_states] == [gid_map.get(s.group_id) for s in src_states]
    cur_src, cur_dst = await led.current_state(source), await led.current_state(target)
    assert (cur_src and cur_src.content) == (cur_dst and cur_dst.content)
    # Session fields, totals, usage, summaries.
    s, d = await led.get_session(source), await led.get_session(target)
    assert s is not None and d is not None
    assert (d.scratchpad, d.window_size, d.provider, d.model, d.lane) == (
        s.scratchpad,
        s.window_size,
        s.provider,
        s.model,
        s.lane,
    )
    assert (d.message_count, d.token_total) == (s.message_count, s.token_total)
    assert await led.usage_totals(target) == await led.usage_totals(source)
    id_map = {a.id: b.id for a, b in zip(src_rows, dst_rows, strict=True)}
    src_sums, dst_sums = await led.summaries(source), await led.summaries(target)
    assert [(x.lane, x.kind, x.content, x.version) for x in dst_sums] == [
        (x.lane, x.kind, x.content, x.version) for x in src_sums
    ]
    for a, b in zip(src_sums, dst_sums, strict=True):
        assert (b.first_message_id, b.last_message_id) == (
            id_map[a.first_message_id],
            id_map[a.last_message_id],
        )


async def test_clone_copies_everything_with_remapped_groups(ledger: Ledger) -> None:
    g1 = await _populate(ledger, "src")
    g2 = await _group(ledger, "src", "second", state="STATE two", call_id="k")
    await _group(ledger, "other", "interleaved")  # ids of another session in between
    g3 = await _group(ledger, "src", "third", call_id="z")
    await ledger.append("src", None, [NewMessage("system", "ungrouped note")])
    await ledger.set_provider("src", "gemini", "gemini-2.5-flash")
    # Statuses that must survive: a dropped group (restorable), an interrupted row.
    await ledger.set_group_dropped("src", g3, True)
    rows = await ledger.group_messages("src", g2)
    await ledger.set_message_status(rows[-1].id, "interrupted")

    clone = await ledger.clone_session("src", "copy")
    assert clone.name == "copy"
    await _assert_clone_equal(ledger, "src", "copy")

    # The copy is independent: restoring its dropped group restores original statuses.
    dst_groups = [g.group_id for g in await ledger.list_groups("copy")]
    assert len(dst_groups) == 3 and g1 not in dst_groups
    newest = max(dst_groups)
    assert await ledger.set_group_dropped("copy", newest, False) == 5
    restored = await ledger.group_messages("copy", newest)
    assert [m.status for m in restored] == [
        "completed",
        "tool_call",
        "completed",
        "completed",
        "completed",
    ]
    assert all(m.status == "dropped" for m in await ledger.group_messages("src", g3))
    # Removing a group in the copy restores the copy's previous STATE, not the source's.
    copy_g2 = sorted(dst_groups)[1]
    await ledger.remove_group("copy", copy_g2)
    assert (await ledger.current_state("copy")).content == "STATE of src"  # type: ignore[union-attr]
    assert (await ledger.current_state("src")).content == "STATE two"  # type: ignore[union-attr]


async def test_clone_refuses_an_existing_target(ledger: Ledger) -> None:
    await _populate(ledger, "src")
    await _group(ledger, "taken", "mine")
    await ledger.set_scratchpad("pad-only", "x")
    before = {s.name: s for s in await ledger.list_sessions()}
    for target in ("taken", "pad-only", "src"):
        with pytest.raises(LedgerError, match="already exists"):
            await ledger.clone_session("src", target)
    assert {s.name: s for s in await ledger.list_sessions()} == before
    assert [m.content for m in await ledger.session_messages("taken")][0] == "mine"


async def test_clone_onto_itself_is_refused(ledger: Ledger) -> None:
    with pytest.raises(LedgerError):
        await ledger.clone_session("fresh", "fresh")


@pytest.mark.parametrize("target", ["", "   ", "\t\n"])
async def test_clone_refuses_an_empty_target(ledger: Ledger, target: str) -> None:
    await _populate(ledger, "src")
    with pytest.raises(LedgerError, match="empty"):
        await ledger.clone_session("src", target)
    assert [s.name for s in await ledger.list_sessions()] == ["src"]


async def test_clone_twice_and_chained(ledger: Ledger) -> None:
    await _populate(ledger, "a")
    await _group(ledger, "a", "more", state="STATE more", call_id="m")
    await ledger.clone_session("a", "b")
    await ledger.clone_session("a", "c")
    await ledger.clone_session("b", "d")
    await _group(ledger, "d", "only in d", call_id="d")
    await ledger.clone_session("d", "e")
    for target in ("b", "c"):
        await _assert_clone_equal(ledger, "a", target)
    await _assert_clone_equal(ledger, "d", "e")
    assert len(await ledger.session_messages("e")) == 15
    assert len(await ledger.session_messages("a")) == 10
    # Every id in the database is unique and every group id still names its own prompt.
    row = await ledger._one("SELECT COUNT(*), COUNT(DISTINCT id) FROM messages")
    assert row[0] == row[1] == 10 * 3 + 15 * 2
    bad = await ledger._one(
        "SELECT COUNT(*) FROM messages m JOIN messages u ON u.id = m.group_id "
        "WHERE u.session_id != m.session_id OR u.role != 'user'"
    )
    assert bad[0] == 0


async def test_clone_of_an_empty_session(ledger: Ledger) -> None:
    await ledger.set_scratchpad("blank", "plan")
    await ledger.add_state("blank", None, "STATE without group")
    clone = await ledger.clone_session("blank", "blank2")
    assert (clone.scratchpad, clone.message_count) == ("plan", 0)
    assert (await ledger.current_state("blank2")).content == "STATE without group"  # type: ignore[union-attr]
    gid = await _group(ledger, "blank2", "go")
    assert len(await ledger.window("blank2", 1)) == 5
    assert await ledger.window("blank", 0) == [] and gid


async def test_clone_of_a_hundred_messages_and_long_scratchpad(ledger: Ledger) -> None:
    for i in range(20):
        await _group(ledger, "big", f"prompt {i} " + "é" * i, state=f"STATE {i}", call_id=f"c{i}")
    scratchpad = ("- [ ] step ünïcødé 'quoted' \"double\"\n" * 40)[:1000]
    assert len(scratchpad) == 1000
    await ledger.set_scratchpad("big", scratchpad)
    for i in range(10):
        await ledger.record_usage("big", None, "openai", f"m{i % 3}", i, 2 * i, 1)
    assert len(await ledger.session_messages("big")) == 100
    clone = await ledger.clone_session("big", "big copy")
    assert clone.scratchpad == scratchpad
    assert clone.message_count == 100
    await _assert_clone_equal(ledger, "big", "big copy")


async def test_clone_is_transactional(ledger: Ledger, monkeypatch: pytest.MonkeyPatch) -> None:
    """A failure half-way through leaves no trace of the target."""
    await _populate(ledger, "src")
    real_execute = ledger._db.execute

    async def failing_execute(sql, *args, **kwargs):
        if "INSERT INTO usage" in sql:
            raise RuntimeError("disk on fire")
        return await real_execute(sql, *args, **kwargs)

    monkeypatch.setattr(ledger._db, "execute", failing_execute)
    with pytest.raises(RuntimeError):
        await ledger.clone_session("src", "half")
    monkeypatch.undo()
    assert await ledger.get_session("half") is None
    for table in PER_SESSION_TABLES:
        assert await _count(ledger, table, "half") == 0
    # The ledger is usable afterwards and the clone then succeeds.
    await ledger.clone_session("src", "half")
    await _assert_clone_equal(ledger, "src", "half")


# --- names ---------------------------------------------------------------------------

ODD_NAMES = [
    "it's",
    'say "hi"',
    "two words",
    "  padded  ",
    "ünïcødé 会话 🚀",
    "x' OR '1'='1",
    "x'; DROP TABLE messages; --",
    "session[1]",
    "100%_done",
    "back\\slash",
    "line\nbreak",
]


@pytest.mark.parametrize("name", ODD_NAMES)
async def test_names_are_taken_literally(ledger: Ledger, name: str) -> None:
    await _populate(ledger, "bystander")
    gid = await _group(ledger, name, f"prompt in {name}", state="S")
    session = await ledger.get_session(name)
    assert session is not None and session.name == name
    assert {s.name for s in await ledger.list_sessions()} == {name, "bystander"}
    assert {m.session for m in await ledger.window(name, 0)} == {name}
    assert [g.group_id for g in await ledger.list_groups(name)] == [gid]
    assert len(await ledger.window("bystander", 0)) == 5

    await ledger.clone_session(name, name + " copy")
    await _assert_clone_equal(ledger, name, name + " copy")
    await ledger.clear_session(name + " copy")
    assert await ledger.window(name, 0) != []
    assert await ledger.remove_session(name) is True
    assert {s.name for s in await ledger.list_sessions()} == {"bystander", name + " copy"}
    assert len(await ledger.window("bystander", 0)) == 5
    tables = {t for t, _ in await ledger.schema_sql()}
    assert "messages" in tables


async def test_names_differing_only_in_case_or_spaces_are_distinct(ledger: Ledger) -> None:
    for name in ("Work", "work", "work ", " work"):
        await ledger.append_user(name, name)
    assert len(await ledger.list_sessions()) == 4
    assert [m.content for m in await ledger.window("work ", 0)] == ["work "]


@pytest.mark.parametrize("name", ["", " ", "   ", "\t", "\n \t"])
async def test_empty_names_are_refused(ledger: Ledger, name: str) -> None:
    writes = [
        lambda: ledger.append_user(name, "x"),
        lambda: ledger.ensure_session(name),
        lambda: ledger.set_scratchpad(name, "x"),
        lambda: ledger.set_window(name, 2),
        lambda: ledger.add_state(name, None, "S"),
        lambda: ledger.record_usage(name, None, "p", "m", 1, 1),
        lambda: ledger.append(name, None, [NewMessage("user", "x")]),
    ]
    for write in writes:
        with pytest.raises(LedgerError, match="empty"):
            await write()
    assert await ledger.list_sessions() == []
    assert await _count(ledger, "messages", name) == 0


async def test_window_size_is_validated_and_kept(ledger: Ledger) -> None:
    with pytest.raises(LedgerError):
        await ledger.set_window("s", -1)
    assert (await ledger.set_window("s", 0)).window_size == 0
    assert (await ledger.set_window("s", 12)).window_size == 12
    assert (await ledger.set_lane("s", "side")).lane == "side"
