"""query_db and describe_db: the model reads its own session's rows, and cannot change them.

Each call runs in a child process (`sqlworker.py`, on the guarded read-only
connection of `sqlguard`) that is killed at the time limit, so the limit
holds for any statement, a single long function call included; cancelling
the tool call kills it at once. Results are a JSON array of row objects, one
row per line, capped by rows and by characters with a note on how to page.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

from slop_tui.tools.base import KIND_READ, ToolContext, ToolError, tool
from slop_tui.tools.sqlworker import READY, time_limit_error

WORKER = Path(__file__).resolve().parent / "sqlworker.py"
# The child stops an ordinary statement itself at the limit (and says so); this much
# later the parent kills it, whatever it is doing.
KILL_GRACE = 0.1
POLL = 0.05
STARTUP_TIMEOUT = 30.0  # starting Python on a badly overloaded machine


async def _in_worker(ctx: ToolContext, sql: str | None) -> str:
    """Run one request in a fresh worker process; kill it at the deadline or on cancel.

    The clock starts when the worker has read the request (it answers `READY`
    first): starting Python is not the statement's time, and on a loaded machine
    it can take a good part of a short limit.
    """
    request = {
        "path": str(Path(ctx.ledger.path).resolve()),
        "session": ctx.session,
        "sql": sql,
        "time_limit": ctx.db_time_limit,
        "max_rows": ctx.db_max_rows,
        "max_chars": ctx.db_max_chars,
    }
    data = json.dumps(request, ensure_ascii=True).encode("ascii")
    try:
        proc = await asyncio.create_subprocess_exec(
            sys.executable,
            "-I",
            "-S",
            str(WORKER),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            cwd=Path(ctx.ledger.path).resolve().parent,
            env={},  # the worker needs no variable, and gets no key
            start_new_session=True,
        )
    except OSError as exc:
        raise ToolError(f"query_db: cannot start the query process: {exc.strerror}") from None
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    errors = asyncio.ensure_future(proc.stderr.read())
    try:
        proc.stdin.write(data)
        with contextlib.suppress(ConnectionError):
            await proc.stdin.drain()
        proc.stdin.close()
        ready = await _until(ctx, proc.stdout.readexactly(len(READY)), STARTUP_TIMEOUT, None)
        if ready != READY:
            raise ToolError("query_db: the query process did not start")
        out = await _until(ctx, proc.stdout.read(), ctx.db_time_limit + KILL_GRACE, ctx)
        await proc.wait()
    except (asyncio.IncompleteReadError, ConnectionError):
        out = b""
    except BaseException:
        with contextlib.suppress(ProcessLookupError):
            proc.kill()
        errors.cancel()
        with contextlib.suppress(BaseException):
            await asyncio.shield(proc.wait())
        raise
    try:
        reply = json.loads(out)
    except ValueError:
        await proc.wait()
        err = (await errors).decode("utf-8", "replace").strip().splitlines()[-1:]
        raise ToolError(
            f"query_db: the query process failed (exit code {proc.returncode}): "
            f"{err[0] if err else 'no output'}"
        ) from None
    errors.cancel()
    if not reply.get("ok"):
        raise ToolError("query_db: " + str(reply.get("error", "failed")))
    return str(reply["text"])


async def _until(ctx: ToolContext, step, seconds: float, limit_of: ToolContext | None):
    """Await `step`, polling for cancellation; at `seconds` it is the time limit
    (`limit_of` given) or a start-up failure."""
    task = asyncio.ensure_future(step)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    try:
        while not task.done():
            if ctx.cancelled():
                raise asyncio.CancelledError("tool call cancelled")
            remaining = deadline - loop.time()
            if remaining <= 0:
                if limit_of is None:
                    raise ToolError(f"query_db: the query process did not start in {seconds:g} s")
                raise ToolError("query_db: " + str(time_limit_error(limit_of.db_time_limit)))
            await asyncio.wait({task}, timeout=min(POLL, remaining))
    finally:
        if not task.done():
            task.cancel()
    return task.result()


@tool(
    "query_db",
    "Run one read-only SQL SELECT on your own SQLite ledger (this session's history, "
    "tool results, summaries and usage; the shared memos, skills and tools) and get a JSON "
    "array of rows. Use describe_db for the schema. Results are capped (200 rows, 100,000 characters): page with "
    "LIMIT/OFFSET and long text with substr(). Writes, PRAGMA and ATTACH are refused.",
    KIND_READ,
    {"sql": {"type": "string", "description": "One SELECT statement."}},
    ["sql"],
)
async def query_db(args: dict[str, Any], ctx: ToolContext) -> str:
    sql: str = args["sql"]
    if not sql.strip():
        raise ToolError("query_db: the SQL is empty")
    return await _in_worker(ctx, sql)


@tool(
    "describe_db",
    "Show the schema (CREATE statements) of your SQLite ledger, for use with query_db.",
    KIND_READ,
    {},
)
async def describe_db(args: dict[str, Any], ctx: ToolContext) -> str:
    return await _in_worker(ctx, None)


TOOLS = [query_db, describe_db]
