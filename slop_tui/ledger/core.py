"""Opening the ledger: one long-lived aiosqlite connection, pragmas, migrations.

This module and its siblings are the only code that touches SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import sqlite3
import stat
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import aiosqlite

from slop_tui.ledger.schema import DEFAULT_SKILLS, MIGRATIONS, SCHEMA_VERSION

SQLITE_MAGIC = b"SQLite format 3\x00"
# `PRAGMA application_id` of a slop-tui ledger ("SLOP"), stamped when one is created
# or first opened by this code.
APPLICATION_ID = 0x534C4F50
# Tables the first migration creates: what marks a slop-tui ledger written before
# the application id was stamped.
CORE_TABLES = frozenset(
    {"sessions", "messages", "state_versions", "usage", "memos", "skills", "tools", "app_state"}
)
BUSY_TIMEOUT_MS = 5000
# Beyond the busy timeout, a write that still meets a lock is retried this many
# times with a short pause, so two workspaces on one database never surface
# "database is locked" to the user.
LOCK_RETRIES = 20


class LedgerError(Exception):
    """A ledger problem the user can act on; the message is one sentence."""


def now() -> float:
    return time.time()


def _fold(text: object) -> str | None:
    """SQL `slop_fold(x)`: `x` case-folded (`str.casefold`), NULL stays NULL."""
    return text.casefold() if isinstance(text, str) else None


def _chars_over_four(text: str) -> int:
    return (len(text) + 3) // 4 if text else 0


def _refuse_sqlite_name(path: Path) -> None:
    """Refuse SQLite's `:memory:` and `file:` URI names: SQLite would take them as a
    plain file name here and create a file called `:memory:`.

    The ledger is a file on purpose: another slop-tui process (`exec` beside the
    TUI) and the `query_db` tool open it too, and it keeps every turn after exit.
    """
    name = path.name
    if name == ":memory:" or name.startswith("file:"):
        raise LedgerError(
            f"the ledger must be a file, not SQLite's {name!r}; nothing was created. "
            "For a throwaway ledger point --db or SLOP_DB at a temporary file, "
            'e.g. --db "$(mktemp -d)/slop.db".'
        )


def _header_check(path: Path) -> None:
    """Refuse what is not a SQLite file (a FIFO, a folder, another format) without writing it."""
    try:
        st = path.stat()
    except FileNotFoundError:
        return
    except OSError as exc:
        raise LedgerError(f"cannot open the database {path}: {exc.strerror}.") from exc
    if stat.S_ISDIR(st.st_mode):
        raise LedgerError(
            f"{path} is a folder, not a database file. Point --db or SLOP_DB at a file."
        )
    if not stat.S_ISREG(st.st_mode):
        # SQLite would block on a FIFO (or read a device) until the process is killed.
        raise LedgerError(
            f"{path} is {_file_kind(st.st_mode)}, not a database file; it was left untouched. "
            "Point --db or SLOP_DB at a file."
        )
    if st.st_size == 0:
        return
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
    except OSError as exc:  # a file we may not read
        raise LedgerError(f"cannot open the database {path}: {exc.strerror}.") from exc
    if not header.startswith(SQLITE_MAGIC):
        raise LedgerError(
            f"{path} is not a slop-tui database (not SQLite); it was left untouched. "
            "Point --db or SLOP_DB at another file."
        )


def _file_kind(mode: int) -> str:
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    return "not a regular file"


def _read_only_fs(path: Path) -> bool:
    """True when the file system holding `path` (or its nearest existing folder) is
    mounted read-only."""
    for where in (path, *path.parents):
        try:
            return bool(os.statvfs(where).f_flag & os.ST_RDONLY)
        except FileNotFoundError:
            continue
        except OSError:
            return False
    return False


def _identify(path: Path, version: int, app_id: int, tables: set[str]) -> None:
    """Refuse another program's database, and a slop-tui database newer than this code.

    A slop-tui database carries `APPLICATION_ID` (since it was stamped) or, if
    older, the tables of the first migration. `user_version` alone proves
    nothing: any program may use it, and new migrations keep raising ours.
    """
    if app_id == APPLICATION_ID:
        ours = True
    elif app_id != 0:
        ours = False
    elif version == 0:
        ours = not tables  # a fresh file; tables without a version: another program's
    else:
        ours = CORE_TABLES <= tables
    if not ours:
        raise LedgerError(
            f"{path} is a SQLite database of another program, not a slop-tui database; "
            "it was left untouched. Point --db or SLOP_DB at another file."
        )
    if version > SCHEMA_VERSION:
        raise LedgerError(
            f"{path} was written by a newer slop-tui (schema {version}, this one knows "
            f"{SCHEMA_VERSION}); it was left untouched. Upgrade slop-tui to open it."
        )


def database_problem(exc: sqlite3.Error, path: object = None, *, opening: bool = False) -> str:
    """The user's sentence for a database SQLite cannot read (damaged pages, not a
    database after all)."""
    where = f"the database {path}" if path else "the database"
    head = f"cannot open {where}: it is damaged" if opening else f"{where} is damaged"
    return (
        f"{head} and cannot be read ({exc}); nothing was changed. Keep a copy of the "
        "file, then try `sqlite3 FILE .recover`, or point --db or SLOP_DB at another file."
    )


def _damaged(exc: BaseException) -> bool:
    code = getattr(exc, "sqlite_errorname", "") or ""
    return code.startswith(("SQLITE_CORRUPT", "SQLITE_NOTADB"))


def _write_problem(exc: sqlite3.Error, path: Path) -> str | None:
    """The user's sentence for a write the disk or the file system refused; None otherwise."""
    code = getattr(exc, "sqlite_errorname", "") or ""
    if code == "SQLITE_FULL":
        return (
            f"the disk holding {path} is full (or the database reached its size limit); "
            "this change was not saved and nothing was half-written. Free some space and "
            "try again."
        )
    if code.startswith("SQLITE_READONLY"):
        return (
            f"the database {path} is read-only now (file, folder or file system); this "
            "change was not saved and nothing was half-written."
        )
    if code.startswith(("SQLITE_IOERR", "SQLITE_CANTOPEN")):
        return (
            f"the disk refused a write to {path} ({exc}); this change was not saved and "
            "nothing was half-written."
        )
    return None


def _read_rows(
    conn: sqlite3.Connection, sql: str, params: tuple | dict, plain: bool, first: bool
) -> Any:
    """One read, run in the connection's thread: the first row or all of them.

    `plain` gives tuples instead of `sqlite3.Row`s (no wrapper object per row).
    """
    cur = conn.cursor()
    try:
        if plain:
            cur.row_factory = None
        cur.execute(sql, params)
        return cur.fetchone() if first else cur.fetchall()
    finally:
        cur.close()


def _read_arrays(
    conn: sqlite3.Connection, sql: str, params: tuple | dict, build: Callable[..., Any]
) -> Any:
    """A read whose one row holds a whole result as JSON arrays, one a column (SQLite's
    `json_group_array` over the rows), run in the connection's thread: `build` gets the
    arrays parsed and makes the result there too.

    Python's sqlite3 module gives the interpreter lock up around each step of a query
    and takes it back for each row it returns. A read of 5,000 rows run while the
    event loop runs Python waits for the lock at each row (up to the switch interval,
    5 ms) and makes the loop give it up as often: the read ends long after its SQL,
    and the loop loses time at each hand-over. One row is one hand-over; SQLite
    builds the arrays and `json.loads` parses them, both in C.
    """
    cur = conn.cursor()
    try:
        cur.row_factory = None
        cur.execute(sql, params)
        return build(*map(json.loads, cur.fetchone()))
    finally:
        cur.close()


class LedgerBase:
    """Connection, transactions and migrations; query mixins build on this."""

    def __init__(
        self, db: aiosqlite.Connection, path: Path, count_tokens: Callable[[str], int]
    ) -> None:
        self._db = db
        self.path = path
        self.count_tokens = count_tokens
        # Window size of sessions created from now on (config `[context] window`).
        self.default_window = 5
        self._write_lock = asyncio.Lock()
        self._stamp = False  # set by _prepare: the application id is still to be written

    # -- lifecycle ---------------------------------------------------------

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], count_tokens: Callable[[str], int] | None = None
    ):
        """Open (creating when missing) the ledger at `path` and migrate it forward."""
        p = Path(path).expanduser()
        _refuse_sqlite_name(p)
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(
                f"cannot create the database folder {p.parent}: {exc.strerror}."
            ) from exc
        _header_check(p)
        if (p.exists() or not os.access(p.parent, os.W_OK)) and _read_only_fs(p):
            raise LedgerError(
                f"cannot open the database {p}: the file system holding it is mounted "
                "read-only, and slop-tui writes every turn to its ledger. Point --db or "
                "SLOP_DB at a writable place."
            )
        if p.exists() and not os.access(p, os.R_OK | os.W_OK):
            raise LedgerError(f"cannot open the database {p}: permission denied.")
        if (
            p.exists()
            and not os.access(p.parent, os.W_OK | os.X_OK)
            and not all(os.access(f"{p}{end}", os.W_OK) for end in ("-wal", "-shm"))
        ):
            raise LedgerError(
                f"cannot open the database {p}: its folder is read-only, and SQLite needs "
                "to create its journal files (-wal, -shm) next to it."
            )
        if not p.exists() and not os.access(p.parent, os.W_OK):
            raise LedgerError(f"cannot create the database {p}: the folder is not writable.")
        try:
            db = await aiosqlite.connect(
                str(p), isolation_level=None, timeout=BUSY_TIMEOUT_MS / 1000
            )
        except sqlite3.Error as exc:
            raise LedgerError(f"cannot open the database {p}: {exc}.") from exc
        ledger = cls(db, p, count_tokens or _chars_over_four)
        try:
            await ledger._prepare()
        except sqlite3.DatabaseError as exc:
            await db.close()
            if _damaged(exc):
                raise LedgerError(database_problem(exc, p, opening=True)) from exc
            raise LedgerError(f"cannot open the database {p}: {exc}.") from exc
        except BaseException:
            await db.close()
            raise
        return ledger

    async def _prepare(self) -> None:
        db = self._db
        db.row_factory = sqlite3.Row
        # One statement, so one read snapshot: read apart, another workspace
        # creating this file could commit its first migration in between, and
        # its fresh tables would look like another program's database.
        cur = await db.execute(
            "SELECT (SELECT user_version FROM pragma_user_version),"
            " (SELECT application_id FROM pragma_application_id),"
            " (SELECT group_concat(name, char(31)) FROM sqlite_master WHERE type = 'table')"
        )
        version, app_id, names = await cur.fetchone()
        # Refuse another program's database before the WAL switch or a migration
        # writes to it.
        _identify(self.path, version, app_id, set(names.split("\x1f")) if names else set())
        self._stamp = app_id != APPLICATION_ID
        await db.execute(f"PRAGMA busy_timeout={BUSY_TIMEOUT_MS}")
        await db.execute("PRAGMA foreign_keys=ON")
        # Some file systems refuse WAL; the ledger still works, only slower,
        # and `journal_mode` says which one is in force.
        mode = await self._journal_mode_wal()
        self.journal_mode = str(mode[0]).lower() if mode else "unknown"
        await db.execute("PRAGMA synchronous=NORMAL")
        # A long session's full history is a few MB; the default 2 MB page
        # cache would re-read it from the OS on every full-history request.
        await db.execute("PRAGMA cache_size=-32000")
        # Unicode case folding for `/history search` (SQLite's LIKE folds ASCII only).
        await db.create_function("slop_fold", 1, _fold, deterministic=True)
        await self._migrate(version)

    async def _journal_mode_wal(self) -> sqlite3.Row | None:
        # Switching a fresh file to WAL needs an exclusive lock and SQLite does not
        # call the busy handler for it, so two workspaces creating the database at
        # once would see "database is locked" here without this retry.
        for attempt in range(LOCK_RETRIES):
            try:
                return await (await self._db.execute("PRAGMA journal_mode=WAL")).fetchone()
            except sqlite3.OperationalError as exc:
                if ("locked" not in str(exc) and "busy" not in str(exc)) or (
                    attempt == LOCK_RETRIES - 1
                ):
                    raise
                await asyncio.sleep(0.05 * (attempt + 1))
        return None

    async def _migrate(self, version: int) -> None:
        for target in range(version + 1, SCHEMA_VERSION + 1):
            async with self.transaction() as db:
                cur = await db.execute("PRAGMA user_version")
                current = (await cur.fetchone())[0]
                if current >= target:  # another process migrated meanwhile
                    continue
                for stmt in MIGRATIONS[target - 1]:
                    await db.execute(stmt)
                if target == 1:
                    await db.executemany(
                        "INSERT OR IGNORE INTO skills(name, description, prompt_patch) VALUES (?,?,?)",
                        DEFAULT_SKILLS,
                    )
                await db.execute(f"PRAGMA user_version={target}")
                await self._stamp_id(db)
        if self._stamp:  # a ledger of a slop-tui that did not stamp its files
            async with self.transaction() as db:
                await self._stamp_id(db)

    async def _stamp_id(self, db: aiosqlite.Connection) -> None:
        if self._stamp:
            await db.execute(f"PRAGMA application_id={APPLICATION_ID}")
            self._stamp = False

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._db.close()

    async def release_memory(self) -> None:
        """Free SQLite's page cache (`PRAGMA shrink_memory`): up to `cache_size` of
        pages, filled by a turn's reads and writes. The next read takes its pages
        from the operating system's file cache again. For an idle caller; the freed
        memory goes back to the system with `tokens.trim_heap`."""
        await self._read("PRAGMA shrink_memory", (), plain=True)

    async def __aenter__(self):
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    # -- transactions ------------------------------------------------------

    @contextlib.asynccontextmanager
    async def transaction(self) -> AsyncIterator[aiosqlite.Connection]:
        """One write transaction (BEGIN IMMEDIATE), serialised within this process.

        All or nothing: when a statement or the COMMIT fails, the transaction is
        rolled back. A full disk or a database that became read-only is a
        `LedgerError` with one sentence the user can act on."""
        async with self._write_lock:
            try:
                try:
                    await self._begin_immediate()
                except asyncio.CancelledError:
                    # Cancelled (Esc, quitting) while BEGIN was queued on the
                    # connection's thread: it still runs there, and a transaction
                    # left open would make every later write fail with "cannot
                    # start a transaction within a transaction". The connection
                    # runs calls in order, so a ROLLBACK queued now undoes it.
                    with contextlib.suppress(sqlite3.Error):
                        await asyncio.shield(self._db.execute("ROLLBACK"))
                    raise
                try:
                    yield self._db
                    await self._db.execute("COMMIT")
                except BaseException:
                    with contextlib.suppress(sqlite3.Error):
                        await self._db.execute("ROLLBACK")
                    raise
            except sqlite3.DatabaseError as exc:
                problem = (
                    database_problem(exc, self.path)
                    if _damaged(exc)
                    else _write_problem(exc, self.path)
                )
                if problem is None:
                    raise
                raise LedgerError(problem) from exc

    async def _begin_immediate(self) -> None:
        for attempt in range(LOCK_RETRIES):
            try:
                await self._db.execute("BEGIN IMMEDIATE")
                return
            except sqlite3.OperationalError as exc:
                if "locked" not in str(exc) and "busy" not in str(exc):
                    raise
                if attempt == LOCK_RETRIES - 1:
                    raise LedgerError(
                        "the database stayed locked by another process for too long; try again."
                    ) from exc
                await asyncio.sleep(0.05 * (attempt + 1))

    # -- small query helpers ----------------------------------------------

    async def _read(
        self, sql: str, params: Iterable[object] | dict, *, plain: bool = False, first: bool = False
    ) -> Any:
        return await self._run(_read_rows, sql, params, plain, first)

    async def _arrays(
        self, sql: str, params: Iterable[object] | dict, build: Callable[..., Any]
    ) -> Any:
        """A long result read as one row of JSON arrays (`_read_arrays`), `build` making
        it in the connection's thread."""
        return await self._run(_read_arrays, sql, params, build)

    async def _run(self, read: Callable[..., Any], sql: str, params, *args: Any) -> Any:
        # aiosqlite's `_execute` runs a function in the connection's thread: the
        # whole read is one round trip instead of one per cursor call (execute,
        # fetch, close), which on a busy machine is a thread switch each.
        params = params if isinstance(params, dict) else tuple(params)
        try:
            return await self._db._execute(read, self._db._conn, sql, params, *args)
        except sqlite3.DatabaseError as exc:
            if _damaged(exc):
                raise LedgerError(database_problem(exc, self.path)) from exc
            raise

    async def _all(self, sql: str, params: Iterable[object] | dict = ()) -> list[sqlite3.Row]:
        return await self._read(sql, params)

    async def _tuples(self, sql: str, params: Iterable[object] | dict = ()) -> list[tuple]:
        """Plain tuples (no sqlite3.Row per row): for long reads mapped positionally."""
        return await self._read(sql, params, plain=True)

    async def _one(self, sql: str, params: Iterable[object] | dict = ()) -> sqlite3.Row | None:
        return await self._read(sql, params, first=True)

    async def schema_sql(self) -> list[tuple[str, str]]:
        """`CREATE` statements of the user tables (for `/schema` and `describe_db`)."""
        rows = await self._all(
            "SELECT name, sql FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' "
            "AND name NOT LIKE 'memos_fts_%' ORDER BY name"
        )
        return [(r["name"], r["sql"]) for r in rows]

    async def data_version(self) -> int:
        """SQLite's `PRAGMA data_version`: it changes when another connection (another
        process: `slop-tui exec` beside the TUI) commits to the database, never for
        this connection's own writes."""
        row = await self._read("PRAGMA data_version", (), plain=True, first=True)
        return int(row[0])

    # -- app state ---------------------------------------------------------

    async def get_setting(self, key: str, default: str | None = None) -> str | None:
        row = await self._one("SELECT value FROM app_state WHERE key=?", (key,))
        return row["value"] if row else default

    async def set_setting(self, key: str, value: str) -> None:
        async with self.transaction() as db:
            await db.execute(
                "INSERT INTO app_state(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, value),
            )
