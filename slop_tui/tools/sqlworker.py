"""query_db's worker process: one statement on a guarded, session-scoped connection.

A single SQLite function call (`instr` of a long needle in a 10 MB text,
`replace` over megabytes) is one step of SQLite's VM: the progress handler
never runs inside it and `sqlite3_interrupt` only takes effect after it
returns, so an in-process time limit cannot hold (one such call ran 134 s).
The parent (`db.py`) therefore runs each statement in this child process and
kills it at the deadline; the child still stops ordinary long statements
itself (progress handler) so their error says what happened.

Run as `python -I -S sqlworker.py`: isolated (no PYTHON* variables, no
current folder or site-packages on `sys.path`, so nothing in the project can
shadow a module), standard library only plus `sqlguard.py` from this folder.
Request on stdin, answer on stdout, both one ASCII JSON object:

    {"path": ledger, "session": name, "sql": text or null (the schema),
     "time_limit": s, "max_rows": n, "max_chars": n}
    READY, then {"ok": true, "text": ...} | {"ok": false, "error": one line}

`READY` (written once the request is read) starts both clocks: the child's
own deadline and the parent's kill.

The process also caps its address space (`MEMORY_LIMIT`), so a statement
that sorts or builds gigabytes fails with "out of memory" instead of
taking the machine's memory.
"""

from __future__ import annotations

import json
import math
import os
import sqlite3
import sys
import time
from typing import Any

if __package__:
    from slop_tui.tools import sqlguard
else:  # run as a script: this folder is not on sys.path (-I)
    sys.path.append(os.path.dirname(os.path.abspath(__file__)))
    import sqlguard  # type: ignore[no-redef]  # noqa: I001

HEX_BLOB_BYTES = 64  # smaller blobs are shown as hex, bigger ones as "<blob N bytes>"
READY = b"READY\n"  # written once the request is read: the parent's clock starts
MEMORY_LIMIT = 2 * 1024**3  # bytes of address space


class QueryError(Exception):
    """A one-line failure the model can act on (without the `query_db: ` prefix)."""


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


def rows_json(cur: sqlite3.Cursor, max_rows: int, max_chars: int) -> str:
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


def refusal(what: str) -> QueryError:
    return QueryError(
        f"refused: {what} is not allowed. query_db is read-only: "
        "one SELECT (or WITH ... SELECT) statement per call"
    )


def time_limit_error(limit: float) -> QueryError:
    return QueryError(f"stopped at the {limit:g} s time limit; add LIMIT or a narrower WHERE")


def _translate(exc: sqlite3.Error, guard: sqlguard.Guard, limit: float) -> QueryError:
    text = str(exc)
    if guard.refused is not None:
        return refusal(guard.refused)
    if text.startswith("cannot modify ") and "because it is a view" in text:
        return refusal("a change to " + text.split()[2])  # a write to a scope view
    if "interrupted" in text:
        return time_limit_error(limit)
    if "too big" in text:
        return QueryError(
            f"a value is over the {sqlguard.MAX_VALUE_BYTES // 2**20} MiB limit; "
            "use length() or substr() to read it in parts"
        )
    if "readonly" in text or "read-only" in text:
        return QueryError("refused: the ledger is read-only for query_db")
    return QueryError(text)


def run_query(conn: sqlite3.Connection, guard: sqlguard.Guard, request: dict, limit: float) -> str:
    try:
        cur = conn.execute(request["sql"])
        if cur.description is None:  # only comments, or a statement with no rows
            raise QueryError("the statement returned no columns; write a SELECT")
        return rows_json(cur, request["max_rows"], request["max_chars"])
    except sqlite3.ProgrammingError as exc:
        if "one statement" in str(exc):
            raise QueryError(
                "only one statement per call; remove everything after the first ';'"
            ) from None
        raise QueryError(str(exc)) from None
    except sqlite3.DatabaseError as exc:
        raise _translate(exc, guard, limit) from None
    except ValueError as exc:  # e.g. a NUL character in the SQL text
        raise QueryError(str(exc)) from None


_SHADOW_SUFFIXES = ("data", "idx", "content", "docsize", "config", "segments", "segdir", "stat")


def schema_text(conn: sqlite3.Connection, request: dict) -> str:
    """The CREATE statements of what a query can read, each scoped table marked."""
    rows = conn.execute(
        "SELECT type, name, tbl_name, sql FROM main.sqlite_master WHERE sql IS NOT NULL "
        "AND type IN ('table', 'index') "
        "ORDER BY CASE type WHEN 'table' THEN 0 ELSE 1 END, name"
    ).fetchall()
    virtual = [name for kind, name, _, sql in rows if sql.upper().startswith("CREATE VIRTUAL")]
    shadow = {f"{v}_{s}" for v in virtual for s in _SHADOW_SUFFIXES}
    scoped, shared = sqlguard.SCOPED_ROWS, sqlguard.GLOBAL_ROWS

    def shown(name: str) -> bool:
        return name in scoped or name in shared or name in virtual

    keep: list[str] = []
    for kind, name, tbl, sql in rows:
        if name.startswith("sqlite_") or name in shadow or not shown(tbl):
            continue
        note = ""
        if kind == "table" and name in scoped:
            note = f"-- {name}: only this session's rows (WHERE {scoped[name]})\n"
        elif kind == "table" and name in shared and shared[name] != "1":
            note = f"-- {name}: shared by every session (WHERE {shared[name]})\n"
        elif name in sqlguard.SEARCH_INDEXES:
            note = (
                f"-- {name}: a full-text index of the {sqlguard.SEARCH_INDEXES[name][0]} rows "
                "you see (MATCH, bm25(), highlight(), snippet())\n"
            )
        keep.append(note + sql.strip() + ";")
    tables = sum(1 for kind, name, tbl, _ in rows if kind == "table" and shown(name))
    note = (
        f"-- {tables} tables. You see this session's rows and the memos, skills and tools "
        "shared by all sessions; other sessions and the app's own state are not visible. "
        f"query_db shows at most {request['max_rows']} rows and {request['max_chars']:,} "
        "characters per call: page rows with LIMIT/OFFSET and long text with "
        "substr(col, start, length), e.g. SELECT length(content), substr(content, 1, 4000) "
        "FROM messages WHERE id = 42; then substr(content, 4001, 4000)."
    )
    return note + "\n\n" + "\n\n".join(keep)


def answer(request: dict) -> dict:
    """Run one request; never raises for a bad statement."""
    limit = float(request["time_limit"])
    deadline = time.monotonic() + limit
    sql = request.get("sql")
    if sql is not None and len(sql) > sqlguard.MAX_SQL_CHARS:
        return {
            "ok": False,
            "error": f"the statement is {len(sql):,} characters, over the "
            f"{sqlguard.MAX_SQL_CHARS:,} limit; write a shorter query (a long IN list "
            "is better a subquery)",
        }
    try:
        conn, guard = sqlguard.open_readonly(
            request["path"],
            deadline,
            lambda: False,
            request.get("session"),
            search=sql is not None and sqlguard.names_search_index(sql),
        )
    except sqlite3.Error as exc:
        return {"ok": False, "error": f"cannot open the ledger: {exc}"}
    try:
        if sql is None:
            try:
                return {"ok": True, "text": schema_text(conn, request)}
            except sqlite3.DatabaseError as exc:
                raise _translate(exc, guard, limit) from None
        return {"ok": True, "text": run_query(conn, guard, request, limit)}
    except QueryError as exc:
        return {"ok": False, "error": str(exc)}
    except MemoryError:
        return {"ok": False, "error": "the statement ran out of memory; narrow it"}
    finally:
        conn.close()


def _limit_memory() -> None:
    try:
        import resource

        soft, hard = resource.getrlimit(resource.RLIMIT_AS)
        cap = MEMORY_LIMIT if hard == resource.RLIM_INFINITY else min(MEMORY_LIMIT, hard)
        resource.setrlimit(resource.RLIMIT_AS, (cap, hard))
    except (ImportError, ValueError, OSError):
        pass  # no resource module or a lower limit already: keep what there is


def main() -> None:
    _limit_memory()
    request = json.loads(sys.stdin.buffer.read())
    sys.stdout.buffer.write(READY)
    sys.stdout.buffer.flush()
    reply = answer(request)
    sys.stdout.buffer.write(json.dumps(reply, ensure_ascii=True).encode("ascii"))
    sys.stdout.buffer.flush()


if __name__ == "__main__":
    main()
