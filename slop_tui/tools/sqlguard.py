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

from slop_tui.ledger.edits import TRASH_PREFIX

MAX_VALUE_BYTES = 64 * 1024 * 1024
PROGRESS_OPS = 1000  # VM instructions between deadline checks

# printf/format: `printf('%.*c', 2000000000, 'x')` spends ~30 s of CPU inside one VM
# step (the progress handler never runs, and the width is not checked against the
# length limit), so the time limit would not hold. round(), ||, substr() and
# quote() cover what a query needs.
DENIED_FUNCTIONS = frozenset(
    {"load_extension", "readfile", "writefile", "edit", "fts3_tokenizer", "lsdir", "zipfile",
     "printf", "format"}
)  # fmt: skip
# The trash (ledger/edits.py): rows the user took out of the history, kept only so
# they can be restored. The model never reads them.
HIDDEN_TABLE_PREFIX = TRASH_PREFIX
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

    def __init__(self) -> None:
        self.top: int | None = None  # the first action of the user's statement
        self.refused: str | None = None

    def __call__(
        self, action: int, arg1: str | None, arg2: str | None, db: str | None, src: str | None
    ) -> int:
        if self.top is None:
            self.top = action
        if self.top == sqlite3.SQLITE_SELECT:
            if action == sqlite3.SQLITE_READ and (arg1 or "").startswith(HIDDEN_TABLE_PREFIX):
                self.refused = self.refused or (
                    f"reading {arg1} (the trash: rows the user removed from the history)"
                )
                return sqlite3.SQLITE_DENY
            if action in (sqlite3.SQLITE_SELECT, sqlite3.SQLITE_READ, sqlite3.SQLITE_RECURSIVE):
                return sqlite3.SQLITE_OK
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
        "SELECT name FROM sqlite_master WHERE type='table' AND sql LIKE 'CREATE VIRTUAL TABLE%'"
    ).fetchall()
    statements = [f"SELECT * FROM {_quote_ident(r[0])} LIMIT 0" for r in rows]
    for sql in (*statements, *_EPONYMOUS):
        try:
            conn.execute(sql).fetchall()
        except sqlite3.Error:  # a module this SQLite lacks: queries on it will fail cleanly
            pass


def open_readonly(
    path: Path, deadline: float, should_stop: Callable[[], bool]
) -> tuple[sqlite3.Connection, Guard]:
    """A guarded read-only connection; `deadline` is a `time.monotonic()` value."""
    uri = Path(path).resolve().as_uri() + "?mode=ro"
    conn = sqlite3.connect(uri, uri=True, isolation_level=None, timeout=1.0)
    try:
        # Text that is not valid UTF-8 is shown with replacement characters.
        conn.text_factory = lambda b: b.decode("utf-8", "replace")
        if hasattr(conn, "enable_load_extension"):
            conn.enable_load_extension(False)
        conn.execute("PRAGMA query_only=ON")
        conn.setlimit(sqlite3.SQLITE_LIMIT_LENGTH, MAX_VALUE_BYTES)
        conn.setlimit(sqlite3.SQLITE_LIMIT_ATTACHED, 0)

        def progress() -> int:
            return 1 if time.monotonic() > deadline or should_stop() else 0

        conn.set_progress_handler(progress, PROGRESS_OPS)
        _connect_virtual_tables(conn)
        guard = Guard()
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
