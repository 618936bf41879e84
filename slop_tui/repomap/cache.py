"""The on-disk cache of parsed files: `.slop/repomap.db` (SQLite).

One row per file, keyed by its path and checked against its size and mtime,
so a start or a turn parses only what changed since. The value is the file's
`FileTags` as plain tuples in `marshal` form (the fastest stdlib codec for
them). A cache that cannot be opened or read is replaced by an empty one: it
only ever saves time.
"""

from __future__ import annotations

import marshal
import sqlite3
from collections.abc import Iterable
from pathlib import Path

from slop_tui.repomap.tags import Definition, FileTags

_VERSION = 1
Stamp = tuple[int, int]  # (size, mtime_ns)


def encode(tags: FileTags) -> bytes:
    defs = [tuple(d) for d in tags.definitions]
    return marshal.dumps((defs, sorted(tags.references), tags.error))


def decode(blob: bytes) -> FileTags:
    defs, refs, error = marshal.loads(blob)
    return FileTags(tuple(map(Definition._make, defs)), frozenset(refs), error)


class TagCache:
    """Stored tags by path; `path=None` keeps nothing on disk."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        self._db: sqlite3.Connection | None = None
        if path is not None:
            try:
                self._db = self._open(path)
            except (sqlite3.Error, OSError):
                self._db = None
                try:
                    path.unlink(missing_ok=True)
                    self._db = self._open(path)
                except (sqlite3.Error, OSError):
                    self._db = None

    @staticmethod
    def _open(path: Path) -> sqlite3.Connection:
        db = sqlite3.connect(path, check_same_thread=False, isolation_level=None)
        version = db.execute("PRAGMA user_version").fetchone()[0]
        if version != _VERSION:
            db.execute("DROP TABLE IF EXISTS tags")
            db.execute(
                "CREATE TABLE tags(path TEXT PRIMARY KEY, size INT, mtime_ns INT, data BLOB)"
            )
            db.execute(f"PRAGMA user_version={_VERSION}")
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=NORMAL")
        return db

    def load(self) -> dict[str, tuple[Stamp, bytes]]:
        """Every stored row: path -> ((size, mtime_ns), encoded tags)."""
        if self._db is None:
            return {}
        try:
            rows = self._db.execute("SELECT path, size, mtime_ns, data FROM tags").fetchall()
        except sqlite3.Error:
            return {}
        return {p: ((s, m), d) for p, s, m, d in rows}

    def store(self, rows: Iterable[tuple[str, Stamp, bytes]], gone: Iterable[str]) -> None:
        """Write changed rows and forget vanished paths, in one transaction."""
        if self._db is None:
            return
        rows, gone = list(rows), list(gone)
        if not rows and not gone:
            return
        try:
            self._db.execute("BEGIN")
            self._db.executemany(
                "INSERT OR REPLACE INTO tags(path, size, mtime_ns, data) VALUES (?, ?, ?, ?)",
                [(p, s[0], s[1], d) for p, s, d in rows],
            )
            self._db.executemany("DELETE FROM tags WHERE path=?", [(p,) for p in gone])
            self._db.execute("COMMIT")
        except sqlite3.Error:
            try:
                self._db.execute("ROLLBACK")
            except sqlite3.Error:
                pass

    def close(self) -> None:
        if self._db is not None:
            self._db.close()
            self._db = None
