"""query_db and describe_db: the model reads its own ledger, and cannot change it.

See `sqlguard` for why the connection is read-only by construction. Results
are a JSON array of row objects, one row per line, capped by rows and by
characters with a note on how to page.
"""

from __future__ import annotations

import asyncio
import json
import math
import sqlite3
import time
from collections.abc import Callable
from typing import Any, TypeVar

from slop_tui.tools.base import KIND_READ, ToolContext, ToolError, tool
from slop_tui.tools.sqlguard import (
    HIDDEN_TABLE_PREFIX,
    MAX_VALUE_BYTES,
    Guard,
    StopFlag,
    open_readonly,
)

HEX_BLOB_BYTES = 64  # smaller blobs are shown as hex, bigger ones as "<blob N bytes>"
_SHADOW_SUFFIXES = ("data", "idx", "content", "docsize", "config", "segments", "segdir", "stat")
T = TypeVar("T")


async def _in_worker(ctx: ToolContext, fn: Callable[[StopFlag, float], T]) -> T:
    """Run `fn(stop, deadline)` in a thread; cancellation interrupts the statement."""
    stop = StopFlag(ctx.cancelled)
    deadline = time.monotonic() + ctx.db_time_limit
    try:
        result = await asyncio.to_thread(fn, stop, deadline)
    except asyncio.CancelledError:
        stop.set()  # the thread stops at its next progress check
        raise
    except ToolError:
        if ctx.cancelled():  # the interruption was ours, not the query's fault
            raise asyncio.CancelledError("tool call cancelled") from None
        raise
    if ctx.cancelled():
        raise asyncio.CancelledError("tool call cancelled")
    return result


def _value(v: Any) -> Any:
    if isinstance(v, bytes):
        return "0x" + v.hex() if len(v) <= HEX_BLOB_BYTES else f"<blob {len(v)} bytes>"
    if isinstance(v, float) and not math.isfinite(v):
        return str(v)
    return v


def _columns(description: tuple) -> list[str]:
    """Column names, with duplicates (`SELECT 1 AS a, 2 AS a`) made distinct."""
    out: list[str] = []
    for col in description:
        name = col[0]
        base, n = name, 1
        while name in out:
            n += 1
            name = f"{base} ({n})"
        out.append(name)
    return out


def _cut(obj: dict[str, Any], budget: int) -> dict[str, Any]:
    """Shorten long strings of a row that alone is over the size cap."""
    each = max(100, budget // max(1, len(obj)))
    out: dict[str, Any] = {}
    for key, val in obj.items():
        if isinstance(val, str) and len(val) > each:
            val = (
                val[:each] + f"… [cut: {len(val):,} characters; page with "
                f"substr({key}, {each + 1}, {each})]"
            )
        out[key] = val
    return out


def _rows_json(cur: sqlite3.Cursor, max_rows: int, max_chars: int) -> str:
    names = _columns(cur.description)
    lines: list[str] = []
    used = 2
    capped = False
    while (row := cur.fetchone()) is not None:
        if len(lines) >= max_rows:
            capped = True
            break
        obj = {k: _value(v) for k, v in zip(names, row, strict=True)}
        text = json.dumps(obj, ensure_ascii=False)
        if used + len(text) + 2 > max_chars:
            capped = True
            if lines:
                break
            text = json.dumps(_cut(obj, max_chars - 300), ensure_ascii=False)
            lines.append(text)
            break
        lines.append(text)
        used += len(text) + 2
    body = "[\n" + ",\n".join(lines) + "\n]" if lines else "[]"
    if capped:
        body += f"\n[capped: {len(lines)} rows shown; add LIMIT/OFFSET or substr() to page]"
    return body


def _refusal(guard: Guard) -> ToolError:
    return ToolError(
        f"query_db: refused: {guard.refused} is not allowed. query_db is read-only: "
        "one SELECT (or WITH ... SELECT) statement per call"
    )


def _query(ctx: ToolContext, sql: str) -> Callable[[StopFlag, float], str]:
    def work(stop: StopFlag, deadline: float) -> str:
        conn, guard = open_readonly(ctx.ledger.path, deadline, stop)
        try:
            try:
                cur = conn.execute(sql)
                if cur.description is None:  # only comments, or a statement with no rows
                    raise ToolError("query_db: the statement returned no columns; write a SELECT")
                return _rows_json(cur, ctx.db_max_rows, ctx.db_max_chars)
            except sqlite3.ProgrammingError as exc:
                if "one statement" in str(exc):
                    raise ToolError(
                        "query_db: only one statement per call; remove everything after the first ';'"
                    ) from None
                raise ToolError(f"query_db: {exc}") from None
            except sqlite3.DatabaseError as exc:
                raise _translate(exc, guard, stop, ctx.db_time_limit) from None
            except ValueError as exc:  # e.g. a NUL character in the SQL text
                raise ToolError(f"query_db: {exc}") from None
        finally:
            conn.close()

    return work


def _translate(exc: sqlite3.Error, guard: Guard, stop: StopFlag, limit: float) -> ToolError:
    text = str(exc)
    if guard.refused is not None:
        return _refusal(guard)
    if "interrupted" in text:
        if stop():
            return ToolError("query_db: cancelled")
        return ToolError(
            f"query_db: stopped at the {limit:g} s time limit; add LIMIT or a narrower WHERE"
        )
    if "too big" in text:
        return ToolError(
            f"query_db: a value is over the {MAX_VALUE_BYTES // 2**20} MiB limit; "
            "use length() or substr() to read it in parts"
        )
    if "readonly" in text or "read-only" in text:
        return ToolError("query_db: refused: the ledger is read-only for query_db")
    return ToolError(f"query_db: {text}")


@tool(
    "query_db",
    "Run one read-only SQL SELECT on your own SQLite ledger (the conversation history, "
    "tool results, memos, skills, usage) and get a JSON array of rows. Use describe_db "
    "for the schema. Results are capped (200 rows, 100,000 characters): page with "
    "LIMIT/OFFSET and long text with substr(). Writes, PRAGMA and ATTACH are refused.",
    KIND_READ,
    {"sql": {"type": "string", "description": "One SELECT statement."}},
    ["sql"],
)
async def query_db(args: dict[str, Any], ctx: ToolContext) -> str:
    sql: str = args["sql"]
    if not sql.strip():
        raise ToolError("query_db: the SQL is empty")
    return await _in_worker(ctx, _query(ctx, sql))


def _schema(ctx: ToolContext) -> Callable[[StopFlag, float], str]:
    def work(stop: StopFlag, deadline: float) -> str:
        conn, guard = open_readonly(ctx.ledger.path, deadline, stop)
        try:
            rows = conn.execute(
                "SELECT type, name, tbl_name, sql FROM sqlite_master WHERE sql IS NOT NULL "
                "AND type IN ('table', 'view', 'index') "
                "ORDER BY CASE type WHEN 'table' THEN 0 WHEN 'view' THEN 1 ELSE 2 END, name"
            ).fetchall()
        except sqlite3.DatabaseError as exc:
            raise _translate(exc, guard, stop, ctx.db_time_limit) from None
        finally:
            conn.close()
        return _schema_text(rows, ctx)

    return work


def _schema_text(rows: list[tuple[str, str, str, str]], ctx: ToolContext) -> str:
    virtual = [name for kind, name, _, sql in rows if sql.upper().startswith("CREATE VIRTUAL")]
    shadow = {f"{v}_{s}" for v in virtual for s in _SHADOW_SUFFIXES}

    def internal(name: str) -> bool:
        return name.startswith(("sqlite_", HIDDEN_TABLE_PREFIX)) or name in shadow

    keep = [
        (kind, sql) for kind, name, tbl, sql in rows if not internal(name) and not internal(tbl)
    ]
    tables = sum(1 for kind, _ in keep if kind == "table")
    note = (
        f"-- {tables} tables. query_db shows at most {ctx.db_max_rows} rows and "
        f"{ctx.db_max_chars:,} characters per call: page rows with LIMIT/OFFSET and long text "
        "with substr(col, start, length), e.g. SELECT length(content), substr(content, 1, 4000) "
        "FROM messages WHERE id = 42; then substr(content, 4001, 4000)."
    )
    return note + "\n\n" + "\n\n".join(sql.strip() + ";" for _, sql in keep)


@tool(
    "describe_db",
    "Show the schema (CREATE statements) of your SQLite ledger, for use with query_db.",
    KIND_READ,
    {},
)
async def describe_db(args: dict[str, Any], ctx: ToolContext) -> str:
    return await _in_worker(ctx, _schema(ctx))


TOOLS = [query_db, describe_db]
