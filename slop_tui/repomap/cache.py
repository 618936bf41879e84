"""The map's store: `.slop/repomap.db` (SQLite; in memory when there is no `.slop/`).

- `files`: one row per mapped file, keyed by its path and checked against its
  size and mtime, so a start or a turn parses only what changed since. The
  value is the file's definitions and parse error as plain tuples in
  `marshal` form (the fastest stdlib codec for them).
- `defs` and `refs`: which files define and which use each name, indexed by
  name, so a change to one file finds the files whose edges it moves
  without reading every file; `uses`: how many files use each name, kept
  up to date with `refs` (the render weighs definitions by it).
- `state`: what a warm start needs besides the files' stamps: the listing
  (with its folders' times) and the graph (its nodes, its edges as arrays),
  one row each, each written only when it changed, in the same transaction
  as the rows it describes, so they never disagree.

A store that cannot be opened or read is replaced by an empty one: it only
ever saves time. A change's write is committed in a thread (`commit_later`),
after the map is returned; the next use of the store waits for it, and one
that failed, or never happened because the process ended first, leaves the
store as it was before: the next look parses the file again.
"""

from __future__ import annotations

import _thread
import marshal
import queue
import sqlite3
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from slop_tui.repomap.tags import Definition, FileTags

_VERSION = 3
Stamp = tuple[int, int]  # (size, mtime_ns)
BUSY_WAIT = 5.0  # seconds a write waits for another process holding the store
_CHUNK = 900  # bound parameters per statement (SQLite's default limit is 999 on old builds)

_SCHEMA = (
    "CREATE TABLE files(path TEXT PRIMARY KEY, size INT, mtime_ns INT, data BLOB)",
    "CREATE TABLE defs(name TEXT, path TEXT)",
    "CREATE INDEX defs_name ON defs(name)",
    "CREATE INDEX defs_path ON defs(path)",
    "CREATE TABLE refs(name TEXT, path TEXT)",
    "CREATE INDEX refs_name ON refs(name)",
    "CREATE INDEX refs_path ON refs(path)",
    "CREATE TABLE uses(name TEXT PRIMARY KEY, n INT) WITHOUT ROWID",
    "CREATE TABLE state(k INTEGER PRIMARY KEY, data BLOB)",
)


def encode(tags: FileTags) -> bytes:
    """A file's definitions and error (its references are rows of `refs`)."""
    return marshal.dumps(([tuple(d) for d in tags.definitions], tags.error))


def decode(blob: bytes, refs: frozenset[str] = frozenset()) -> FileTags:
    defs, error = marshal.loads(blob)
    return FileTags(tuple(map(Definition._make, defs)), refs, error)


def _chunks(items: Sequence[str]) -> Iterable[Sequence[str]]:
    for i in range(0, len(items), _CHUNK):
        yield items[i : i + _CHUNK]


class TagCache:
    """The store (see the module docstring); `path=None` keeps it in memory."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        self._pending = False  # a commit handed to the committer, maybe still running
        self._committer = False  # its thread, started at the first commit
        self._commits: queue.Queue[sqlite3.Connection | None] = queue.Queue()
        self._lost = False  # that commit failed: its transaction was rolled back
        if path is not None:
            try:
                self._db = self._open(path)
            except (sqlite3.Error, OSError):
                self._db = None
                try:
                    for extra in ("", "-wal", "-shm"):
                        Path(f"{path}{extra}").unlink(missing_ok=True)
                    self._db = self._open(path)
                except (sqlite3.Error, OSError):
                    self._db = None
        if self._db is None:
            self._db = self._open(None)

    @staticmethod
    def _open(path: Path | None) -> sqlite3.Connection:
        db = sqlite3.connect(
            ":memory:" if path is None else path,
            check_same_thread=False,
            isolation_level=None,
            timeout=BUSY_WAIT,
        )
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != _VERSION:
            db.execute("BEGIN")
            for table in ("tags", "files", "defs", "refs", "uses", "state"):
                db.execute(f"DROP TABLE IF EXISTS {table}")
            for statement in _SCHEMA:
                db.execute(statement)
            db.execute(f"PRAGMA user_version={_VERSION}")
            db.execute("COMMIT")
        if path is not None:
            db.execute("PRAGMA journal_mode=WAL")
            db.execute("PRAGMA synchronous=NORMAL")
        return db

    @property
    def is_open(self) -> bool:
        return self._db is not None

    @property
    def db(self) -> sqlite3.Connection:
        if self._pending:
            self._wait()
        assert self._db is not None, "the store is closed"
        return self._db

    # -- reading ------------------------------------------------------------------------

    def state(self, key: int) -> object | None:
        """A stored state row (whatever `put_state` was given), or None."""
        try:
            row = self.db.execute("SELECT data FROM state WHERE k=?", (key,)).fetchone()
            return marshal.loads(row[0]) if row else None
        except (sqlite3.Error, ValueError, EOFError, TypeError):
            return None

    def stamps(self) -> dict[str, Stamp]:
        """Every stored file's stamp."""
        rows = self.db.execute("SELECT path, size, mtime_ns FROM files").fetchall()
        return {p: (s, m) for p, s, m in rows}

    def tags(self, paths: Sequence[str], references: bool = True) -> dict[str, FileTags]:
        """The stored tags of `paths` (those it has); without their references (an
        empty set) when `references` is false."""
        out: dict[str, FileTags] = {}
        refs: dict[str, set[str]] = {}
        for part in _chunks(paths):
            marks = ",".join("?" * len(part))
            if references:
                for p, n in self.db.execute(
                    f"SELECT path, name FROM refs WHERE path IN ({marks})", part
                ):
                    refs.setdefault(p, set()).add(n)
            for p, d in self.db.execute(
                f"SELECT path, data FROM files WHERE path IN ({marks})", part
            ):
                out[p] = decode(d, frozenset(refs.get(p, ())))
        return out

    def definers(self, names: Sequence[str]) -> dict[str, list[str]]:
        """name -> the files defining it, for the `names` defined anywhere."""
        out: dict[str, list[str]] = {}
        for part in _chunks(names):
            marks = ",".join("?" * len(part))
            for n, p in self.db.execute(
                f"SELECT name, path FROM defs WHERE name IN ({marks})", part
            ):
                out.setdefault(n, []).append(p)
        return out

    def all_definers(self) -> dict[str, list[str]]:
        out: dict[str, list[str]] = {}
        for n, p in self.db.execute("SELECT name, path FROM defs"):
            out.setdefault(n, []).append(p)
        return out

    def users(self, names: Sequence[str]) -> set[str]:
        """The files that use any of `names`."""
        out: set[str] = set()
        for part in _chunks(names):
            marks = ",".join("?" * len(part))
            out.update(
                p
                for (p,) in self.db.execute(f"SELECT path FROM refs WHERE name IN ({marks})", part)
            )
        return out

    def use_counts(self, names: Sequence[str]) -> dict[str, int]:
        """name -> how many files use it."""
        out: dict[str, int] = {}
        for part in _chunks(names):
            marks = ",".join("?" * len(part))
            out.update(
                self.db.execute(
                    f"SELECT name, n FROM uses WHERE name IN ({marks}) AND n > 0", part
                ).fetchall()
            )
        return out

    # -- writing ------------------------------------------------------------------------

    def begin(self) -> None:
        """Start a write transaction, holding the write lock from the start: what is
        read inside it cannot be changed by another process until `commit`."""
        self.db.execute("BEGIN IMMEDIATE")

    def commit(self) -> None:
        self.db.execute("COMMIT")

    def commit_later(self) -> None:
        """Commit the open transaction in a thread; the next use of the store waits for
        it (`settle`)."""
        db = self.db
        if not self._committer:
            # `_thread`: `threading.Thread.start` waits until the thread runs, which on a
            # busy machine costs the change the wait; `close` waits for it instead.
            _thread.start_new_thread(self._run_commits, ())
            self._committer = True
        self._pending = True
        self._commits.put(db)

    def _run_commits(self) -> None:
        while (db := self._commits.get()) is not None:
            try:
                self._commit(db)
            finally:
                self._commits.task_done()
        self._commits.task_done()

    def _commit(self, db: sqlite3.Connection) -> None:
        try:
            db.execute("COMMIT")
        except sqlite3.Error:
            self._lost = True
            try:
                db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def settle(self) -> bool:
        """Wait for a commit running in a thread. True once after one that failed: the
        store lacks that write (the caller starts again from what the store holds)."""
        self._wait()
        lost, self._lost = self._lost, False
        return lost

    def _wait(self) -> None:
        if self._pending:
            self._commits.join()
            self._pending = False

    def rollback(self) -> None:
        """Undo the open transaction, if any: the store stays as it was."""
        self._wait()
        if self._db is not None and self._db.in_transaction:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def put(self, rows: dict[str, tuple[Stamp, FileTags] | None]) -> None:
        """Store changed files (None: the file is gone); inside `begin`/`commit`."""
        db = self.db
        gone = [(p,) for p in rows]
        db.executemany(
            "UPDATE uses SET n = n - 1 WHERE name IN (SELECT name FROM refs WHERE path=?)", gone
        )
        db.executemany("DELETE FROM files WHERE path=?", gone)
        db.executemany("DELETE FROM defs WHERE path=?", gone)
        db.executemany("DELETE FROM refs WHERE path=?", gone)
        files, defs, refs = [], [], []
        for path, row in rows.items():
            if row is None:
                continue
            (size, mtime), tags = row
            files.append((path, size, mtime, encode(tags)))
            defs.extend((n, path) for n in {d.name for d in tags.definitions})
            refs.extend((n, path) for n in tags.references)
        db.executemany("INSERT INTO files VALUES (?, ?, ?, ?)", files)
        db.executemany("INSERT INTO defs VALUES (?, ?)", defs)
        db.executemany("INSERT INTO refs VALUES (?, ?)", refs)
        added = Counter(n for n, _ in refs)
        db.executemany(
            "INSERT INTO uses VALUES (?, ?) ON CONFLICT(name) DO UPDATE SET n = n + excluded.n",
            sorted(added.items()),
        )

    def put_state(self, key: int, value: object) -> None:
        self.db.execute(
            "INSERT OR REPLACE INTO state(k, data) VALUES (?, ?)", (key, marshal.dumps(value))
        )

    def close(self) -> None:
        self._wait()
        if self._committer:
            self._commits.put(None)
            self._commits.join()
            self._committer = False
        if self._db is not None:
            self._db.close()
            self._db = None
