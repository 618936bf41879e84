"""Opening the ledger: one long-lived aiosqlite connection, pragmas, migrations.

This module and its siblings are the only code that touches SQLite.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sqlite3
import time
from collections.abc import AsyncIterator, Callable, Iterable
from pathlib import Path
from typing import Any

import aiosqlite

from slop_tui.ledger.schema import DEFAULT_SKILLS, MIGRATIONS, SCHEMA_VERSION

SQLITE_MAGIC = b"SQLite format 3\x00"
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


def _header_check(path: Path) -> None:
    """Refuse a file that is not SQLite or is from a newer schema, without writing it."""
    if not path.exists() or path.stat().st_size == 0:
        return
    try:
        with path.open("rb") as fh:
            header = fh.read(100)
    except OSError as exc:  # a folder, or a file we may not read
        raise LedgerError(f"cannot open the database {path}: {exc.strerror}.") from exc
    if not header.startswith(SQLITE_MAGIC):
        raise LedgerError(
            f"{path} is not a slop-tui database (not SQLite); it was left untouched. "
            "Point --db or SLOP_DB at another file."
        )
    if len(header) >= 64:
        version = int.from_bytes(header[60:64], "big")
        _check_version(path, version)


def _check_version(path: Path, version: int) -> None:
    if version > SCHEMA_VERSION:
        raise LedgerError(
            f"{path} was written by a newer slop-tui (schema {version}, this one knows "
            f"{SCHEMA_VERSION}); it was left untouched. Upgrade slop-tui to open it."
        )


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

    # -- lifecycle ---------------------------------------------------------

    @classmethod
    async def open(
        cls, path: str | os.PathLike[str], count_tokens: Callable[[str], int] | None = None
    ):
        """Open (creating when missing) the ledger at `path` and migrate it forward."""
        p = Path(path).expanduser()
        try:
            p.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise LedgerError(
                f"cannot create the database folder {p.parent}: {exc.strerror}."
            ) from exc
        _header_check(p)
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
            " (SELECT COUNT(*) FROM sqlite_master)"
        )
        version, tables = await cur.fetchone()
        _check_version(self.path, version)
        if version == 0:
            # Tables without our schema version: another program's database. Refuse
            # before the WAL switch or a migration writes to it.
            if tables:
                raise LedgerError(
                    f"{self.path} is a SQLite database of another program, not a slop-tui "
                    "database; it was left untouched. Point --db or SLOP_DB at another file."
                )
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

    async def close(self) -> None:
        with contextlib.suppress(Exception):
            await self._db.close()

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
            except sqlite3.OperationalError as exc:
                problem = _write_problem(exc, self.path)
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
        # aiosqlite's `_execute` runs a function in the connection's thread: the
        # whole read is one round trip instead of one per cursor call (execute,
        # fetch, close), which on a busy machine is a thread switch each.
        args = params if isinstance(params, dict) else tuple(params)
        return await self._db._execute(_read_rows, self._db._conn, sql, args, plain, first)

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
