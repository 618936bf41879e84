"""query_db / describe_db: answers SELECTs on the ledger and cannot change it."""

from __future__ import annotations

import dataclasses
import json
import time
from collections.abc import AsyncIterator
from pathlib import Path

import pytest
import pytest_asyncio

from slop_tui.records import NewMessage
from slop_tui.tools import ToolContext, run_tool
from tests.test_tools_support import SESSION, body, db_checksum, tool_context

# One ledger for the whole module (every test leaves it unchanged, and the hostile
# tests prove it); each test gets its own copy of the context to adjust.
pytestmark = pytest.mark.asyncio(loop_scope="module")


@pytest_asyncio.fixture(scope="module", loop_scope="module")
async def shared_ctx(tmp_path_factory: pytest.TempPathFactory) -> AsyncIterator[ToolContext]:
    async with tool_context(tmp_path_factory.mktemp("db"), db_time_limit=0.5) as c:
        user = await c.ledger.append_user(SESSION, "find the bug in parser.py")
        await c.ledger.append(
            SESSION,
            user.group_id,
            [NewMessage(role="assistant", content="It is on line 42. 🙂")],
        )
        await c.ledger.add_memo("use WAL", ["sqlite", "arch-decision"])
        yield c


@pytest.fixture
def ctx(shared_ctx: ToolContext) -> ToolContext:
    return dataclasses.replace(shared_ctx)


async def query(ctx: ToolContext, sql: str) -> tuple[bool, str]:
    result = await run_tool("query_db", {"sql": sql}, ctx)
    return result.ok, body(result)


async def test_select_messages_appended_with_the_ledger(ctx: ToolContext) -> None:
    ok, text = await query(
        ctx, "SELECT id, role, content FROM messages WHERE session_id = 'tools-test' ORDER BY id"
    )
    assert ok, text
    rows = json.loads(text)
    assert [r["role"] for r in rows] == ["user", "assistant"]
    assert rows[1]["content"] == "It is on line 42. 🙂"


async def test_select_values_functions_cte_and_fts(ctx: ToolContext) -> None:
    ok, text = await query(ctx, "SELECT 1 AS val")
    assert ok and json.loads(text) == [{"val": 1}]
    ok, text = await query(ctx, "WITH x(n) AS (VALUES (1), (2)) SELECT sum(n) AS s FROM x")
    assert ok and json.loads(text) == [{"s": 3}]
    ok, text = await query(
        ctx, "SELECT rowid FROM memos_fts WHERE memos_fts MATCH 'wal'"
    )  # FTS5 works through the guard
    assert ok and json.loads(text) == [{"rowid": 1}], text
    ok, text = await query(
        ctx, "SELECT j.value AS tag FROM memos, json_each(memos.tags) j ORDER BY 1"
    )
    assert ok and [r["tag"] for r in json.loads(text)] == ["arch-decision", "sqlite"]
    ok, text = await query(ctx, "SELECT name FROM pragma_table_info('memos') ORDER BY cid")
    assert ok and [r["name"] for r in json.loads(text)][:2] == ["id", "content"]
    ok, text = await query(ctx, "EXPLAIN QUERY PLAN SELECT * FROM messages WHERE id = 1")
    assert ok, text
    ok, text = await query(ctx, "SELECT 1; -- a trailing comment is fine")
    assert ok, text


async def test_values_are_converted(ctx: ToolContext) -> None:
    ok, text = await query(
        ctx,
        "SELECT x'00ff' AS small, zeroblob(1000) AS big, CAST(x'ff41' AS TEXT) AS bad_utf8, "
        "1e999 AS inf, NULL AS empty, 1 AS a, 2 AS a",
    )
    assert ok, text
    row = json.loads(text)[0]
    assert row["small"] == "0x00ff"
    assert row["big"] == "<blob 1000 bytes>"
    assert row["bad_utf8"] == "\ufffdA"
    assert row["inf"] == "inf" and row["empty"] is None
    assert row["a"] == 1 and row["a (2)"] == 2


async def test_row_cap(ctx: ToolContext) -> None:
    ok, text = await query(
        ctx,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 100000) SELECT x FROM c",
    )
    assert ok
    data, note = text.rsplit("\n", 1)
    assert len(json.loads(data)) == 200
    assert note == "[capped: 200 rows shown; add LIMIT/OFFSET or substr() to page]"


async def test_size_cap_and_single_huge_value(ctx: ToolContext) -> None:
    ok, text = await query(
        ctx,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 150) "
        "SELECT x, replace(hex(zeroblob(1000)), '0', 'y') AS pad FROM c",
    )
    assert ok and len(text) <= ctx.db_max_chars + 200
    data, note = text.rsplit("\n", 1)
    shown = len(json.loads(data))
    assert 0 < shown < 150 and note.startswith(f"[capped: {shown} rows shown;")
    ok, text = await query(ctx, "SELECT replace(hex(zeroblob(150000)), '0', 'z') AS content")
    assert ok and len(text) <= ctx.db_max_chars + 300
    assert "page with substr(content, " in text and "[capped: 1 rows shown" in text


# Each must be refused, and the ledger must be byte-for-byte the same afterwards.
HOSTILE = {
    "drop_table": "DROP TABLE messages",
    "delete": "DELETE FROM messages",
    "update": "UPDATE sessions SET scratchpad = 'pwned'",
    "insert": "INSERT INTO memos(content, tags, created_at) VALUES ('x', '[]', 0)",
    "replace": "REPLACE INTO app_state(key, value) VALUES ('active_skills', '[\"x\"]')",
    "create_table": "CREATE TABLE evil(a)",
    "create_temp_table": "CREATE TEMP TABLE evil(a)",
    "create_trigger": "CREATE TRIGGER t AFTER INSERT ON messages BEGIN DELETE FROM memos; END",
    "create_view": "CREATE VIEW v AS SELECT 1",
    "create_index": "CREATE INDEX ix ON memos(content)",
    "alter_table": "ALTER TABLE memos ADD COLUMN evil TEXT",
    "attach": "ATTACH DATABASE '/tmp/slop-evil.db' AS evil",
    "detach": "DETACH DATABASE main",
    "writable_schema": "PRAGMA writable_schema=ON",
    "journal_mode": "PRAGMA journal_mode=DELETE",
    "query_only_off": "PRAGMA query_only=OFF",
    "pragma_read": "PRAGMA table_info(messages)",
    "load_extension": "SELECT load_extension('x')",
    "vacuum": "VACUUM",
    "vacuum_into": "VACUUM INTO '/tmp/slop-evil-copy.db'",
    "reindex": "REINDEX",
    "analyze": "ANALYZE",
    "begin": "BEGIN",
    "begin_immediate": "BEGIN IMMEDIATE",
    "commit": "COMMIT",
    "savepoint": "SAVEPOINT s1",
    "two_statements": "SELECT 1; DELETE FROM messages",
    "select_then_drop": "SELECT 1;DROP TABLE memos;",
    "cte_delete": "WITH x AS (SELECT 1) DELETE FROM messages",
    "fts_delete_all": "INSERT INTO memos_fts(memos_fts) VALUES ('delete-all')",
    "explain_delete": "EXPLAIN DELETE FROM messages",
    # more of every category
    "insert_returning": "INSERT INTO memos(content, tags, created_at) VALUES ('x', '[]', 0) RETURNING id",
    "upsert": "INSERT INTO app_state(key, value) VALUES ('k', 'v') ON CONFLICT(key) DO UPDATE SET value = 'x'",
    "cte_update": "WITH RECURSIVE x AS (SELECT 1) UPDATE sessions SET scratchpad = 'pwned'",
    "update_sqlite_master": "UPDATE sqlite_master SET sql = 'x'",
    "create_table_as": "CREATE TABLE copy AS SELECT * FROM messages",
    "create_virtual_table": "CREATE VIRTUAL TABLE evil USING fts5(x)",
    "drop_index": "DROP INDEX IF EXISTS ix_messages_group",
    "attach_uri_rwc": "ATTACH 'file:/tmp/slop-evil.db?mode=rwc' AS evil",
    "attach_memory": "ATTACH ':memory:' AS scratch",
    "pragma_foreign_keys_off": "PRAGMA foreign_keys=OFF",
    "pragma_mmap": "PRAGMA mmap_size=1000000000",
    "pragma_user_version": "PRAGMA user_version=99",
    "pragma_function_side_effect": "SELECT * FROM pragma_journal_mode('delete')",
    "pragma_function_compile_options": "SELECT * FROM pragma_compile_options",
    "fts3_tokenizer": "SELECT fts3_tokenizer('simple')",
    "readfile": "SELECT readfile('/etc/passwd')",
    "writefile": "SELECT writefile('/tmp/slop-evil.db', 'x')",
    "rollback": "ROLLBACK",
    "release": "RELEASE s1",
    "end": "END",
    "comment_then_write": "SELECT 1; -- harmless?\nDELETE FROM messages",
    "write_then_select": "DELETE FROM messages; SELECT 1",
}


@pytest.mark.parametrize("sql", list(HOSTILE.values()), ids=list(HOSTILE))
async def test_hostile_statement_refused(ctx: ToolContext, sql: str) -> None:
    db = ctx.ledger.path
    before = db_checksum(db)
    start = time.monotonic()
    ok, text = await query(ctx, sql)
    assert time.monotonic() - start < ctx.db_time_limit + 1.0  # refused, not run to the limit
    assert not ok, text
    assert text.startswith("Error: query_db: ")
    assert "\n" not in text  # one clear line
    assert db_checksum(db) == before
    assert not Path("/tmp/slop-evil-copy.db").exists()
    assert not Path("/tmp/slop-evil.db").exists()


async def test_refusal_names_what_was_refused(ctx: ToolContext) -> None:
    assert "a change to messages is not allowed" in (await query(ctx, "DELETE FROM messages"))[1]
    assert "DELETE on messages" in (await query(ctx, "DELETE FROM main.messages"))[1]
    assert "PRAGMA writable_schema=ON" in (await query(ctx, "PRAGMA writable_schema=ON"))[1]
    assert "load_extension()" in (await query(ctx, "SELECT load_extension('x')"))[1]
    assert "only one statement" in (await query(ctx, "SELECT 1; SELECT 2"))[1]
    ok, text = await query(ctx, "SELECT * FROM pragma_index_info('ix_messages_group')")
    assert not ok and "json_each" in text
    ok, text = await query(ctx, "SELECT 1\x00")
    assert not ok and "null character" in text


async def test_recursive_cte_bomb_stops_at_the_time_limit(ctx: ToolContext) -> None:
    before = db_checksum(ctx.ledger.path)
    start = time.monotonic()
    ok, text = await query(
        ctx, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c"
    )
    elapsed = time.monotonic() - start
    assert not ok and "0.5 s time limit" in text
    assert elapsed < 1.5
    assert db_checksum(ctx.ledger.path) == before


# A time limit no load on the machine reaches, for statements whose outcome is meant to
# be the value limit, a cap or a result, not the clock.
ROOMY = 60.0


async def test_memory_bomb_is_refused(ctx: ToolContext) -> None:
    start = time.monotonic()
    ok, text = await query(ctx, "SELECT randomblob(1e9) AS b")
    assert not ok and "MiB limit" in text
    ok, text = await query(ctx, "SELECT length(zeroblob(2e9)) AS n")
    assert not ok
    assert time.monotonic() - start < 3  # refused before allocating, not run to the limit
    roomy = dataclasses.replace(ctx, db_time_limit=ROOMY)
    ok, text = await query(roomy, "SELECT group_concat(randomblob(1e6)) FROM messages, messages m2")
    assert ok  # small enough: shown as a blob size, not as data


# Statements that are allowed to start but must stop: at the time limit, at the
# 64 MiB value limit, or at the row/character caps.
BOMBS = {
    "cte_cross_join": (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 100000) "
        "SELECT count(*) FROM c a, c b",
        "time limit",
    ),
    "cte_group_concat": (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
        "SELECT length(group_concat(x)) FROM c",
        "time limit",
    ),
    "replace_amplifier": (
        "SELECT length(replace(hex(zeroblob(20000000)), '0', 'xxxxxxxxxx')) AS n",
        "MiB limit",
    ),
    # one function call is one VM step: the progress handler cannot stop it (refused)
    "printf_width": ("SELECT length(printf('%.*c', 2000000000, 'x')) AS n", "printf()"),
    "format_width": ("SELECT length(format('%.*c', 2000000000, 'x')) AS n", "format()"),
    "wide_rows": (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
        "SELECT x, hex(zeroblob(5000)) AS pad FROM c",
        "[capped:",
    ),
    "many_rows": (
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT x FROM c",
        "[capped: 200 rows shown",
    ),
}


@pytest.mark.parametrize("case", list(BOMBS), ids=list(BOMBS))
async def test_bombs_stop_within_the_time_limit(ctx: ToolContext, case: str) -> None:
    sql, expected = BOMBS[case]
    if expected != "time limit":  # the value limit or a cap must stop it, whatever the load
        ctx = dataclasses.replace(ctx, db_time_limit=ROOMY)
    start = time.monotonic()
    ok, text = await query(ctx, sql)
    assert time.monotonic() - start < ctx.db_time_limit + 1.5
    assert expected in text, text[-300:]
    assert len(text) <= ctx.db_max_chars + 1000


async def test_huge_result_set_is_capped(ctx: ToolContext) -> None:
    ok, text = await query(
        ctx,
        "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
        "SELECT x, randomblob(10) FROM c",
    )
    assert ok and "[capped: 200 rows shown" in text


async def test_errors_are_one_line(ctx: ToolContext) -> None:
    ok, text = await query(ctx, "SELEC 1")
    assert not ok and "syntax error" in text
    ok, text = await query(ctx, "SELECT * FROM no_such_table")
    assert not ok and "no such table" in text
    ok, text = await query(ctx, "   ")
    assert not ok and "empty" in text
    ok, text = await query(ctx, "-- only a comment")
    assert not ok


async def test_cancel_event_interrupts_a_query(ctx: ToolContext) -> None:
    import asyncio

    ctx.db_time_limit = 30
    ctx.cancel_event = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.call_later(0.1, ctx.cancel_event.set)
    start = time.monotonic()
    with pytest.raises(asyncio.CancelledError):
        await query(
            ctx,
            "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) SELECT count(*) FROM c",
        )
    assert time.monotonic() - start < 2


async def test_describe_db(ctx: ToolContext) -> None:
    result = await run_tool("describe_db", {}, ctx)
    assert result.ok
    text = body(result)
    assert "CREATE TABLE messages(" in text and "CREATE TABLE memos(" in text
    assert "CREATE VIRTUAL TABLE memos_fts" in text
    assert "memos_fts_data" not in text and "sqlite_sequence" not in text
    assert "substr(" in text.splitlines()[0]
    counted = await ctx.ledger.get_tool("describe_db")
    assert counted is not None and counted.call_count >= 1


async def test_only_this_sessions_rows_are_visible(ctx: ToolContext) -> None:
    other = await ctx.ledger.append_user("other-session", "my key is sk-other-session-key")
    await ctx.ledger.set_scratchpad("other-session", "other plans")
    await ctx.ledger.add_memo("quarantined text", ["q"], source="model", quarantined=True)
    try:
        ok, text = await query(ctx, "SELECT session_id, content FROM messages")
        assert ok and "sk-other-session-key" not in text and "find the bug" in text
        ok, text = await query(ctx, "SELECT name, scratchpad FROM sessions")
        assert ok and "other plans" not in text
        ok, text = await query(ctx, "SELECT count(*) AS n FROM memos WHERE content LIKE 'quar%'")
        assert ok and json.loads(text) == [{"n": 0}]
        for sql, table in (
            ("SELECT content FROM main.messages", "messages"),
            ("SELECT * FROM app_state", "app_state"),
            ("SELECT * FROM main.sessions", "sessions"),
            ("SELECT * FROM sqlite_sequence", "sqlite_sequence"),
            (f"SELECT content FROM main.messages WHERE id = {other.id}", "messages"),
            ("SELECT (SELECT content FROM main.messages LIMIT 1) AS c", "messages"),
        ):
            ok, text = await query(ctx, sql)
            assert not ok and f"refused: reading {table}" in text, (sql, text)
        result = await run_tool("describe_db", {}, ctx)
        assert "-- messages: only this session's rows" in body(result)
        assert "app_state" not in body(result)
    finally:
        await ctx.ledger._db.execute("DELETE FROM messages WHERE session_id = 'other-session'")
        await ctx.ledger._db.execute("DELETE FROM sessions WHERE name = 'other-session'")
        await ctx.ledger._db.execute("DELETE FROM memos WHERE content = 'quarantined text'")
        await ctx.ledger._db.commit()


async def test_the_memo_search_index_holds_only_visible_memos(ctx: ToolContext) -> None:
    """FTS5 on the ledger's own index (or its shadow tables) would reveal the words of
    quarantined memos: those are refused, and `memos_fts` is the visible memos' index."""
    hidden = await ctx.ledger.add_memo(
        "zebracorn override payload", ["q"], source="model", quarantined=True
    )
    try:
        ok, text = await query(
            ctx, "SELECT rowid FROM memos_fts WHERE memos_fts MATCH 'zebracorn OR wal'"
        )
        assert ok and json.loads(text) == [{"rowid": 1}], text
        ok, text = await query(
            ctx,
            "SELECT highlight(memos_fts, 0, '[', ']') AS h, bm25(memos_fts) < 0 AS ranked "
            "FROM memos_fts WHERE memos_fts MATCH 'wal'",
        )
        assert ok and json.loads(text) == [{"h": "use [WAL]", "ranked": 1}], text
        ok, text = await query(ctx, "SELECT count(*) AS n FROM memos_fts")
        assert ok and json.loads(text) == [{"n": 1}], text
        for sql, table in (
            (
                "SELECT rowid FROM main.memos_fts WHERE main.memos_fts MATCH 'zebracorn'",
                "memos_fts",
            ),
            ("SELECT count(*) AS n FROM main.memos_fts", "memos_fts"),
            ("SELECT * FROM main.memos_fts_data", "memos_fts_data"),
            ("SELECT * FROM main.memos_fts_idx", "memos_fts_idx"),
            ("SELECT * FROM MAIN.Memos_FTS_Docsize", "memos_fts_docsize"),
            ("SELECT * FROM main.memos_fts_config", "memos_fts_config"),
        ):
            ok, text = await query(ctx, sql)
            assert not ok and f"refused: reading {table}" in text.lower(), (sql, text)
        # Unqualified, the shadow tables are those of the scoped index: no hidden word.
        ok, text = await query(ctx, "SELECT hex(block) AS b FROM memos_fts_data")
        assert ok and b"zebracorn".hex().upper() not in text
        assert b"wal".hex().upper() in text
        result = await run_tool("describe_db", {}, ctx)
        assert "-- memos_fts: a full-text index of the memos rows you see" in body(result)
    finally:
        await ctx.ledger._db.execute("DELETE FROM memos WHERE id = ?", (hidden.id,))
        await ctx.ledger._db.commit()


# One SQLite function call is one VM step: only killing the worker process stops it.
SINGLE_CALLS = {
    "instr": "SELECT instr(hex(zeroblob(5000000)), hex(zeroblob(100000)) || '1') AS n",
    "replace": "SELECT length(replace(replace(hex(zeroblob(9000000)), '0', '00'), '00', '0')) AS n",
}


@pytest.mark.parametrize("case", list(SINGLE_CALLS), ids=list(SINGLE_CALLS))
async def test_the_time_limit_holds_inside_one_function_call(ctx: ToolContext, case: str) -> None:
    start = time.monotonic()
    ok, text = await query(ctx, SINGLE_CALLS[case])
    elapsed = time.monotonic() - start
    assert elapsed < ctx.db_time_limit + 1.0, elapsed
    if case == "instr":
        assert not ok and "0.5 s time limit" in text


async def test_a_huge_statement_is_refused_before_parsing(ctx: ToolContext) -> None:
    sql = "SELECT 1 WHERE 1 IN (" + ",".join(["1"] * 2_000_000) + ")"  # built off the clock
    start = time.monotonic()
    ok, text = await query(ctx, sql)
    assert not ok and "over the 100,000 limit" in text  # the length check, not SQLite's parser
    # 4 MB to the worker and back: refused, not run to the limit, however busy the machine
    assert time.monotonic() - start < ctx.db_time_limit + 1.0
