"""Helpers shared by the tool tests: a real ledger in tmp_path and a ToolContext.

Each tool test module declares its own `ctx` fixture with `tool_context`, so
fixtures are not imported across modules.
"""

from __future__ import annotations

import contextlib
import hashlib
import sqlite3
from collections.abc import AsyncIterator
from pathlib import Path

from slop_tui.ledger import Ledger
from slop_tui.tools import ToolContext, ToolResult, registry_rows

SESSION = "tools-test"
# Every tool, in the order they are declared to the model.
EXPECTED = [
    "query_db",
    "describe_db",
    "manage_scratchpad",
    "save_memo",
    "retrieve_memos",
    "use_skill",
    "read_file",
    "write_file",
    "apply_patch",
    "list_directory",
    "grep",
    "execute_bash",
    "fetch_url",
]


@contextlib.asynccontextmanager
async def tool_context(tmp_path: Path, **kw: object) -> AsyncIterator[ToolContext]:
    root = tmp_path / "project"
    root.mkdir(exist_ok=True)
    ledger = await Ledger.open(tmp_path / "slop.db")
    await ledger.register_tools(registry_rows())
    try:
        yield ToolContext(ledger=ledger, session=SESSION, project_root=root, **kw)  # type: ignore[arg-type]
    finally:
        await ledger.close()


def body(result: ToolResult) -> str:
    assert result.text.startswith(f"### TOOL_RESULT: {result.name}\n")
    assert result.text.endswith("\n\n---")
    return result.body


def db_checksum(path: Path) -> str:
    """A digest of every row of every table, the schema and the header pragmas."""
    conn = sqlite3.connect(path)
    try:
        h = hashlib.sha256()
        for pragma in ("user_version", "journal_mode", "schema_version"):
            h.update(repr(conn.execute(f"PRAGMA {pragma}").fetchall()).encode())
        tables = conn.execute(
            "SELECT name, sql FROM sqlite_master WHERE type='table' ORDER BY name"
        ).fetchall()
        h.update(
            repr(conn.execute("SELECT * FROM sqlite_master ORDER BY name").fetchall()).encode()
        )
        for name, sql in tables:
            if (sql or "").upper().startswith("CREATE VIRTUAL"):
                continue  # its shadow tables are hashed instead
            rows = sorted(repr(r) for r in conn.execute(f'SELECT * FROM "{name}"'))
            h.update(name.encode() + repr(rows).encode())
        return h.hexdigest()
    finally:
        conn.close()


def test_checksum_sees_a_change(tmp_path: Path) -> None:
    db = tmp_path / "x.db"
    conn = sqlite3.connect(db)
    conn.execute("CREATE TABLE t(a)")
    conn.commit()
    before = db_checksum(db)
    conn.execute("INSERT INTO t VALUES (1)")
    conn.commit()
    conn.close()
    assert db_checksum(db) != before
