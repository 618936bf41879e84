"""A read-only SQLite connection to the ledger that the model cannot write through.

Layers, each sufficient for writes on its own:
1. the file is opened with the URI `mode=ro`;
2. `PRAGMA query_only=ON`;
3. an authorizer that allows only what a single SELECT needs (SELECT, READ,
   FUNCTION minus a deny list (extension loading, file access, and printf, whose
   width runs past the time limit), RECURSIVE) and refuses everything else:
   INSERT/UPDATE/DELETE, CREATE/DROP/ALTER, ATTACH/DETACH (so VACUUM INTO too),
   PRAGMA, transactions and savepoints, ANALYZE, REINDEX;
4. extension loading off, at most 0 attached databases, and a 64 MiB cap on
   any string or blob (so `randomblob(1e9)` fails instead of allocating 1 GB);
5. a progress handler that interrupts the statement at its deadline or when
   the caller gives up.

What the model may read is scoped (`scope_views`): the session's own rows of
every per-session table and the global memos (not quarantined ones), skills
and tools, each through a TEMP view of the same name that shadows the
ledger's table. The authorizer lets a statement read a ledger table only
through those views (the READ action names the view it comes through), so
`main.messages`, `app_state` (prompt history, in-flight records of other
sessions) and any table not listed in `SCOPED_ROWS`/`GLOBAL_ROWS` are refused.
One predicate per table decides which rows are visible (`SCOPED_ROWS`).

The ledger's full-text index `memos_fts` (and its shadow tables, whose blobs
hold the words of every memo, quarantined ones included) is refused like any
other ledger table. A statement that names it gets a TEMP FTS5 table of the
same name instead, built from the visible memos only (`SEARCH_INDEXES`), so
`MATCH`, `bm25()`, `highlight()` and `snippet()` work on what the model may see.

A single function call (`instr` over megabytes, `replace`) is one VM step:
neither the progress handler nor `sqlite3_interrupt` stops it. That is why
query_db runs each statement in a child process (`sqlworker.py`) that is
killed at the deadline; this module is what that process runs.

Two things a legitimate SELECT needs are arranged *before* the authorizer is
installed, so the authorizer never has to allow a write-shaped action:
virtual tables (FTS5 `memos_fts`, `json_each`, `pragma_table_info`) are
connected up front, because connecting one declares its schema through an
internal `UPDATE sqlite_master` that is parsed but never run. The FTS5 and
pragma table functions then prepare internal read-only pragmas while the
query runs (`data_version`, `table_info`, ...); those few are allowed, and
only when the statement itself began as a SELECT, so a top-level PRAGMA is
always refused.

One connection per call, used in one worker thread and closed after.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable
from pathlib import Path

MAX_VALUE_BYTES = 64 * 1024 * 1024
# A statement longer than this is refused before SQLite parses it: parsing a
# 2,000,000-item IN list took 5.6 s, all inside one call.
MAX_SQL_CHARS = 100_000
PROGRESS_OPS = 1000  # VM instructions between deadline checks

# printf/format: `printf('%.*c', 2000000000, 'x')` spends ~30 s of CPU inside one VM
# step (the progress handler never runs, and the width is not checked against the
# length limit), so the time limit would not hold. round(), ||, substr() and
# quote() cover what a query needs.
DENIED_FUNCTIONS = frozenset(
    {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "lsdir", "zipfile",
     "printf", "format"}
)  # fmt: skip
INTERNAL_PRAGMAS = frozenset(
    {"data_version", "table_info", "table_xinfo", "index_list", "index_info", "foreign_key_list"}
)
# Eponymous virtual tables connected up front (see the module docstring).
_EPONYMOUS = (
    "SELECT * FROM json_each('[]') LIMIT 0",
    "SELECT * FROM json_tree('[]') LIMIT 0",
    "SELECT * FROM pragma_table_info('sqlite_master') LIMIT 0",
    "SELECT * FROM pragma_index_list('sqlite_master') LIMIT 0",
    "SELECT * FROM pragma_foreign_key_list('sqlite_master') LIMIT 0",
)

# Which ledger rows query_db sees: one predicate per table, `:session` being the
# current session's name as an SQL literal. Every per-session table is listed;
# a table in neither map is not visible at all (app_state holds the prompt
# history and other sessions' in-flight text).
SCOPED_ROWS = {
    "sessions": "name = :session",
    "messages": "session_id = :session",
    "state_versions": "session_id = :session",
    "usage": "session_id = :session",
    "summaries": "session_id = :session",
    "compaction_log": "session_id = :session",
    "handoffs": "session_id = :session",
    "context_files": "session_id = :session",
}
GLOBAL_ROWS = {
    "memos": "quarantined = 0",  # a memo waiting for the user's confirmation is not shown
    "skills": "1",
    "tools": "1",
}
# Read directly: the schema.
DIRECT_READS = frozenset({"sqlite_master", "sqlite_schema"})
# Full-text indexes of the ledger, rebuilt per statement from a scope view (the
# ledger's own index covers rows the view hides): name -> (view, columns).
SEARCH_INDEXES = {"memos_fts": ("memos", ("content", "tags"))}

_ACTION_NAMES = {
    getattr(sqlite3, name): name.removeprefix("SQLITE_").replace("_", " ")
    for name in (
        "SQLITE_INSERT",
        "SQLITE_UPDATE",
        "SQLITE_DELETE",
        "SQLITE_CREATE_TABLE",
        "SQLITE_CREATE_TEMP_TABLE",
        "SQLITE_CREATE_INDEX",
        "SQLITE_CREATE_TEMP_INDEX",
        "SQLITE_CREATE_TRIGGER",
        "SQLITE_CREATE_TEMP_TRIGGER",
        "SQLITE_CREATE_VIEW",
        "SQLITE_CREATE_TEMP_VIEW",
        "SQLITE_CREATE_VTABLE",
        "SQLITE_DROP_TABLE",
        "SQLITE_DROP_TEMP_TABLE",
        "SQLITE_DROP_INDEX",
        "SQLITE_DROP_TEMP_INDEX",
        "SQLITE_DROP_TRIGGER",
        "SQLITE_DROP_TEMP_TRIGGER",
        "SQLITE_DROP_VIEW",
        "SQLITE_DROP_TEMP_VIEW",
        "SQLITE_DROP_VTABLE",
        "SQLITE_ALTER_TABLE",
        "SQLITE_ATTACH",
        "SQLITE_DETACH",
        "SQLITE_PRAGMA",
        "SQLITE_TRANSACTION",
        "SQLITE_SAVEPOINT",
        "SQLITE_ANALYZE",
        "SQLITE_REINDEX",
        "SQLITE_FUNCTION",
    )
    if hasattr(sqlite3, name)
}


class Guard:
    """The authorizer; remembers the first refusal so the error can name it."""

    def __init__(
        self, views: frozenset[str] = frozenset(), through_views: frozenset[str] = frozenset()
    ) -> None:
        self.top: int | None = None  # the first action of the user's statement
        self.refused: str | None = None
        # The scope views, and the ledger tables a statement may read only through them
        # (every table but the schema and the memo search index).
        self.views = views
        self.through_views = through_views

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
    ) -> int:
        if self.top is None:
            self.top = action
        if self.top == sqlite3.SQLITE_SELECT:
            if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_RECURSIVE):
                return sqlite3.SQLITE_OK
            if action == sqlite3.SQLITE_READ:
                if self._may_read(arg1 or "", db, src):
                    return sqlite3.SQLITE_OK
                self.refused = self.refused or (
                    f"reading {arg1} (query_db sees this session's rows and the global memos, "
                    f"skills and tools: {', '.join(sorted(self.views))})"
                )
                return sqlite3.SQLITE_DENY
            if action == sqlite3.SQLITE_FUNCTION and (arg2 or "").lower() not in DENIED_FUNCTIONS:
                return sqlite3.SQLITE_OK
            if action == sqlite3.SQLITE_PRAGMA and (arg1 or "").lower() in INTERNAL_PRAGMAS:
                return sqlite3.SQLITE_OK  # prepared by FTS5 / pragma_* inside a SELECT
            if action == sqlite3.SQLITE_UPDATE and arg1 == "sqlite_master":
                # A virtual table not connected up front declaring its schema.
                self.refused = self.refused or (
                    "this virtual table or table-valued function (available: the ledger's "
                    "own tables, json_each, json_tree, pragma_table_info, pragma_index_list, "
                    "pragma_foreign_key_list)"
                )
                return sqlite3.SQLITE_DENY
        if self.refused is None:
            self.refused = _describe(action, arg1, arg2)
        return sqlite3.SQLITE_DENY

    def _may_read(self, table: str, db: str | None, src: str | None) -> bool:
        if db == "temp" or table.lower() not in self.through_views:
            return True  # a scope view itself, a CTE, a table function, the schema
        if db is None and table.lower() in self.views:
            # SQLite names no database for `count(*)` on an unqualified virtual table;
            # unqualified, the name is the TEMP one, which shadows the ledger's.
            return True
        return src is not None and src in self.views


def _describe(action: int, arg1: str | None, arg2: str | None) -> str:
    name = _ACTION_NAMES.get(action, f"action {action}")
    if action == sqlite3.SQLITE_FUNCTION:
        return f"the function {arg2}()"
    if action == sqlite3.SQLITE_PRAGMA:
        return f"PRAGMA {arg1}" + (f"={arg2}" if arg2 else "")
    if action == sqlite3.SQLITE_TRANSACTION:
        return f"transaction control ({arg1})"
    if action == sqlite3.SQLITE_SAVEPOINT:
        return f"savepoint ({arg1} {arg2})"
    if action == sqlite3.SQLITE_ATTACH:
        return "ATTACH (also used by VACUUM)"
    target = arg1 if arg1 and not arg1.startswith("sqlite_autoindex") else None
    return f"{name} on {target}" if target else name


def _quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _connect_virtual_tables(conn: sqlite3.Connection) -> None:
    rows = conn.execute(
        "SELECT name FROM main.sqlite_master WHERE type='table' "
        "AND sql LIKE 'CREATE VIRTUAL TABLE%'"
    ).fetchall()
    statements = [f"SELECT * FROM main.{_quote_ident(r[0])} LIMIT 0" for r in rows]
    for sql in (*statements, *_EPONYMOUS):
        try:
            conn.execute(sql).fetchall()
        except sqlite3.Error:  # a module this SQLite lacks: queries on it will fail cleanly
            pass


def sql_literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def scope_views(
    conn: sqlite3.Connection, session: str, search: bool = False
) -> tuple[frozenset[str], frozenset[str]]:
    """Create the TEMP views that shadow the ledger's tables with the visible rows;
    with `search`, also the TEMP full-text indexes over them (`SEARCH_INDEXES`).

    Returns (the views, the ledger tables a statement may read only through them).
    """
    tables = {
        name: sql
        for name, sql in conn.execute("SELECT name, sql FROM main.sqlite_master WHERE type='table'")
    }
    views: set[str] = set()
    for name, predicate in (*SCOPED_ROWS.items(), *GLOBAL_ROWS.items()):
        if name not in tables:
            continue
        where = predicate.replace(":session", sql_literal(session))
        conn.execute(
            f"CREATE TEMP VIEW {_quote_ident(name)} AS SELECT * FROM main.{_quote_ident(name)} "
            f"WHERE {where}"
        )
        views.add(name)
    if search:
        for name, (view, columns) in SEARCH_INDEXES.items():
            if name in tables and view in views:
                _search_index(conn, name, view, columns)
                views.add(name)
    # Every ledger table but the schema, the full-text indexes and their shadow
    # tables included: their blobs hold the words of rows the views hide.
    hidden = {name.lower() for name in tables if name.lower() not in DIRECT_READS}
    return frozenset(views), frozenset(hidden)


def _search_index(conn: sqlite3.Connection, name: str, view: str, columns: tuple[str, ...]) -> None:
    """A TEMP FTS5 table `name` over the rows of the TEMP view `view` (same rowids)."""
    cols = ", ".join(_quote_ident(c) for c in columns)
    conn.execute(f"CREATE VIRTUAL TABLE temp.{_quote_ident(name)} USING fts5({cols})")
    conn.execute(
        f"INSERT INTO temp.{_quote_ident(name)}(rowid, {cols}) "
        f"SELECT rowid, {cols} FROM temp.{_quote_ident(view)}"
    )


def names_search_index(sql: str) -> bool:
    """Whether a statement may read a full-text index (it names one; SQLite folds
    only ASCII case in identifiers, as `lower` does)."""
    text = sql.lower()
    return any(name in text for name in SEARCH_INDEXES)


def open_readonly(
    path: Path,
    deadline: float,
    should_stop: Callable[[], bool],
    session: str | None = None,
    *,
    search: bool = False,
) -> tuple[sqlite3.Connection, Guard]:
    """A guarded read-only connection; `deadline` is a `time.monotonic()` value.

    With `session`, the statement sees only that session's rows and the global
    memos, skills and tools (`scope_views`); `search` builds the scoped full-text
    indexes too (for a statement that `names_search_index`).
    """
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=1.0)
    try:
        # Text that is not valid UTF-8 is shown with replacement characters.
        conn.text_factory = lambda b: b.decode("utf-8", "replace")
        if hasattr(conn, "enable_load_extension"):
            conn.enable_load_extension(False)
        views, hidden = (
            scope_views(conn, session, search)
            if session is not None
            else (frozenset(), frozenset())
        )
        conn.execute("PRAGMA query_only=ON")
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)
        conn.setlimit(sqlite3.SQLITE_LIMIT_SQL_LENGTH, MAX_SQL_CHARS * 4)

        def progress() -> int:
            return 1 if time.monotonic() > deadline or should_stop() else 0

        conn.set_progress_handler(progress, PROGRESS_OPS)
        _connect_virtual_tables(conn)
        guard = Guard(views, hidden)
        conn.set_authorizer(guard)
    except BaseException:
        conn.close()
        raise
    return conn, guard


class StopFlag:
    """Set from the event loop when the caller gives up; read by the progress handler."""

    def __init__(self, extra: Callable[[], bool] | None = None) -> None:
        self._event = threading.Event()
        self._extra = extra

    def set(self) -> None:
        self._event.set()

    def __call__(self) -> bool:
        return self._event.is_set() or bool(self._extra and self._extra())
