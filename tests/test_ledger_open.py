"""Opening the ledger: schema version, migrations, pragmas, and files it must refuse untouched."""

from __future__ import annotations

import contextlib
import hashlib
import os
import sqlite3
from pathlib import Path

import pytest

from slop_tui.ledger import SCHEMA_VERSION, Ledger, LedgerError
from slop_tui.ledger.core import APPLICATION_ID, BUSY_TIMEOUT_MS, CORE_TABLES
from slop_tui.ledger.schema import DEFAULT_SKILLS, MIGRATIONS


@pytest.fixture
async def ledger(tmp_path: Path):
    led = await Ledger.open(tmp_path / "slop.db")
    yield led
    await led.close()


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _siblings(path: Path) -> list[str]:
    """The -wal / -shm / -journal files SQLite would leave next to `path`."""
    return sorted(
        p.name for p in path.parent.iterdir() if p.name.startswith(path.name) and p != path
    )


def _sqlite(path: Path, *statements: str) -> None:
    with contextlib.closing(sqlite3.connect(path)) as con:
        for stmt in statements:
            con.execute(stmt)
        con.commit()


async def _pragma(led: Ledger, name: str) -> object:
    row = await led._one(f"PRAGMA {name}")
    assert row is not None
    return row[0]


# --- schema version and migrations ---------------------------------------------------


async def test_new_database_gets_current_schema_version(ledger: Ledger) -> None:
    assert SCHEMA_VERSION >= 1
    assert await _pragma(ledger, "user_version") == SCHEMA_VERSION
    tables = {name for name, _ in await ledger.schema_sql()}
    for table in (
        "sessions",
        "messages",
        "state_versions",
        "usage",
        "memos",
        "skills",
        "tools",
        "summaries",
        "app_state",
    ):
        assert table in tables


async def test_reopen_is_idempotent(tmp_path: Path) -> None:
    path = tmp_path / "slop.db"
    led = await Ledger.open(path)
    schema = await led.schema_sql()
    skills = await led.list_skills()
    await led.append_user("s", "hello")
    await led.close()
    for _ in range(3):
        led = await Ledger.open(path)
        try:
            assert await _pragma(led, "user_version") == SCHEMA_VERSION
            assert await led.schema_sql() == schema
            assert await led.list_skills() == skills  # seeded once, not per open
            assert len(await led.session_messages("s")) == 1
        finally:
            await led.close()


@pytest.mark.parametrize("old", range(1, SCHEMA_VERSION))
async def test_older_database_migrates_forward_keeping_data(tmp_path: Path, old: int) -> None:
    """A database left at any older version reaches the current schema, rows intact."""
    fresh = tmp_path / "fresh.db"
    async with await Ledger.open(fresh) as led:
        want = await led.schema_sql()
    path = tmp_path / f"v{old}.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        for migration in MIGRATIONS[:old]:
            for stmt in migration:
                con.execute(stmt)
        con.execute("INSERT INTO sessions(name, created_at, updated_at) VALUES ('s', 1, 1)")
        con.execute(
            "INSERT INTO messages(session_id, group_id, role, content, tokens, created_at) "
            "VALUES ('s', 1, 'user', 'kept', 4, 1.5)"
        )
        con.execute(f"PRAGMA user_version={old}")
    for _ in range(2):  # and reopening the migrated file changes nothing
        async with await Ledger.open(path) as led:
            assert await _pragma(led, "user_version") == SCHEMA_VERSION
            assert await led.schema_sql() == want
            (msg,) = await led.window("s", 0)
            assert (msg.id, msg.group_id, msg.content, msg.tokens) == (1, 1, "kept", 4)
            session = await led.get_session("s")
            assert session is not None and (session.message_count, session.token_total) == (1, 4)


async def test_default_skills_are_seeded_once(ledger: Ledger) -> None:
    names = [s.name for s in await ledger.list_skills()]
    assert names == [name for name, _, _ in DEFAULT_SKILLS]
    assert {"planner", "code_reviewer", "dba"} <= set(names)


async def test_context_manager_closes(tmp_path: Path) -> None:
    async with await Ledger.open(tmp_path / "slop.db") as led:
        await led.append_user("s", "x")
    # After close, a fresh open sees the committed row.
    async with await Ledger.open(tmp_path / "slop.db") as led:
        assert [m.content for m in await led.session_messages("s")] == ["x"]


async def test_empty_file_is_initialised(tmp_path: Path) -> None:
    path = tmp_path / "slop.db"
    path.touch()
    async with await Ledger.open(path) as led:
        assert await _pragma(led, "user_version") == SCHEMA_VERSION


async def test_missing_parent_folders_are_created(tmp_path: Path) -> None:
    path = tmp_path / "a" / "b" / ".slop" / "slop.db"
    async with await Ledger.open(path) as led:
        await led.append_user("s", "x")
    assert path.is_file()


# --- pragmas -------------------------------------------------------------------------


async def test_pragmas(ledger: Ledger) -> None:
    assert str(await _pragma(ledger, "journal_mode")).lower() == "wal"
    assert ledger.journal_mode == "wal"
    assert await _pragma(ledger, "foreign_keys") == 1
    assert await _pragma(ledger, "synchronous") == 1  # NORMAL
    assert await _pragma(ledger, "busy_timeout") == BUSY_TIMEOUT_MS
    assert BUSY_TIMEOUT_MS >= 1000


async def test_wal_mode_persists_in_the_file(tmp_path: Path) -> None:
    path = tmp_path / "slop.db"
    async with await Ledger.open(path):
        pass
    with contextlib.closing(sqlite3.connect(path)) as con:
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


# --- files the ledger must refuse, untouched -----------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"hello, this is a text file\n" * 50,
        b"short",
        b"\x00" * 4096,
        b"SQLite format 2\x00" + b"\x00" * 200,
    ],
    ids=["text", "short", "zeros", "almost-sqlite"],
)
async def test_not_sqlite_is_refused_and_untouched(tmp_path: Path, content: bytes) -> None:
    path = tmp_path / "notes.txt"
    path.write_bytes(content)
    before = _digest(path)
    with pytest.raises(LedgerError) as err:
        await Ledger.open(path)
    message = str(err.value)
    assert "not" in message and "SQLite" in message, message
    assert str(path) in message
    assert "untouched" in message
    assert _digest(path) == before
    assert _siblings(path) == []


async def test_sqlite_magic_with_garbage_is_refused_and_untouched(tmp_path: Path) -> None:
    # Right magic, version bytes zero, nothing else valid: SQLite itself says no.
    path = tmp_path / "broken.db"
    path.write_bytes(b"SQLite format 3\x00" + b"\x00" * 4000)
    before = _digest(path)
    with pytest.raises(LedgerError, match="cannot open"):
        await Ledger.open(path)
    assert _digest(path) == before


@pytest.mark.parametrize(
    "ddl",
    ["CREATE TABLE photos(x)", "CREATE TABLE messages(x)"],
    ids=["unrelated-tables", "clashing-table"],
)
async def test_another_programs_sqlite_database_is_refused_and_untouched(
    tmp_path: Path, ddl: str
) -> None:
    """SQLite, but not ours (tables, no schema version): no tables added, no WAL switch."""
    path = tmp_path / "photos.sqlite"
    _sqlite(path, ddl, ddl.replace("CREATE TABLE", "INSERT INTO").replace("(x)", " VALUES (1)"))
    before = _digest(path)
    with pytest.raises(LedgerError, match="another program") as err:
        await Ledger.open(path)
    assert str(path) in str(err.value) and "untouched" in str(err.value)
    assert _digest(path) == before
    assert _siblings(path) == []


async def test_newer_schema_is_refused_and_untouched(tmp_path: Path) -> None:
    path = tmp_path / "future.db"
    _sqlite(
        path,
        "CREATE TABLE future(x TEXT)",
        "INSERT INTO future VALUES ('keep me')",
        f"PRAGMA application_id={APPLICATION_ID}",  # a newer slop-tui stamps its files
        "PRAGMA user_version=99",
    )
    before = _digest(path)
    assert _siblings(path) == []
    with pytest.raises(LedgerError, match="newer") as err:
        await Ledger.open(path)
    assert "99" in str(err.value) and str(path) in str(err.value)
    assert _digest(path) == before
    assert _siblings(path) == []  # no -wal / -shm created either
    with contextlib.closing(sqlite3.connect(path)) as con:
        assert con.execute("PRAGMA user_version").fetchone()[0] == 99
        assert con.execute("PRAGMA journal_mode").fetchone()[0] == "delete"


async def test_newer_schema_still_in_the_wal_is_refused(tmp_path: Path) -> None:
    """The version bump is only in the WAL (a newer slop-tui has it open): still refused."""
    path = tmp_path / "future.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA wal_autocheckpoint=0")
        con.execute("CREATE TABLE future(x TEXT)")
        con.execute(f"PRAGMA application_id={APPLICATION_ID}")
        con.execute("PRAGMA user_version=99")
        main_before = _digest(path)
        with pytest.raises(LedgerError, match="newer"):
            await Ledger.open(path)
        assert _digest(path) == main_before
        assert con.execute("PRAGMA user_version").fetchone()[0] == 99


@pytest.mark.parametrize("version", [1, 3, SCHEMA_VERSION, SCHEMA_VERSION + 1])
async def test_another_programs_database_with_a_user_version_is_not_ours(
    tmp_path: Path, version: int
) -> None:
    """`user_version` is any program's to use: a file without slop-tui's application id
    or tables is another program's, whatever its version (it was called "written by a
    newer slop-tui" at version 3)."""
    path = tmp_path / "other.db"
    _sqlite(path, "CREATE TABLE notes(x TEXT)", f"PRAGMA user_version={version}")
    before = _digest(path)
    with pytest.raises(LedgerError, match="another program") as err:
        await Ledger.open(path)
    assert "newer" not in str(err.value)
    assert _digest(path) == before and _siblings(path) == []


async def test_an_older_ledger_is_known_by_its_tables_and_stamped(tmp_path: Path) -> None:
    """A ledger written before the application id existed is recognised by its tables,
    opened, and stamped; with a version above this code's it is a newer slop-tui's."""
    path = tmp_path / "old.db"
    async with await Ledger.open(path):
        pass
    _sqlite(path, "PRAGMA application_id=0")
    async with await Ledger.open(path) as led:
        assert await led.get_setting("nothing") is None
    with contextlib.closing(sqlite3.connect(path)) as con:
        assert con.execute("PRAGMA application_id").fetchone()[0] == APPLICATION_ID
        names = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type='table'")}
    assert CORE_TABLES <= names
    _sqlite(path, "PRAGMA application_id=0", f"PRAGMA user_version={SCHEMA_VERSION + 1}")
    with pytest.raises(LedgerError, match="newer slop-tui"):
        await Ledger.open(path)


async def test_unwritable_location_is_refused(tmp_path: Path) -> None:
    # Running as root makes permission bits moot, so use a parent that is a regular file.
    blocker = tmp_path / "afile"
    blocker.write_text("not a folder")
    for path in (blocker / "slop.db", blocker / "deeper" / "slop.db"):
        with pytest.raises(LedgerError, match="cannot create"):
            await Ledger.open(path)
    assert blocker.read_text() == "not a folder"


async def test_a_folder_is_not_a_database(tmp_path: Path) -> None:
    folder = tmp_path / "dir.db"
    folder.mkdir()
    with pytest.raises(LedgerError) as err:
        await Ledger.open(folder)
    assert str(folder) in str(err.value)
    assert list(folder.iterdir()) == []


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits")
async def test_read_only_folder_is_refused(tmp_path: Path) -> None:
    folder = tmp_path / "ro"
    folder.mkdir()
    folder.chmod(0o500)
    try:
        with pytest.raises(LedgerError, match="not writable"):
            await Ledger.open(folder / "slop.db")
    finally:
        folder.chmod(0o700)


async def test_refused_file_leaves_no_connection_behind(tmp_path: Path) -> None:
    """A refusal after connecting closes the connection (no ResourceWarning, no lock)."""
    path = tmp_path / "future.db"
    with contextlib.closing(sqlite3.connect(path, isolation_level=None)) as con:
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA wal_autocheckpoint=0")
        con.execute("PRAGMA user_version=99")
        with pytest.raises(LedgerError):
            await Ledger.open(path)
        # The refusing open holds no lock: this connection can still write at once.
        con.execute("PRAGMA busy_timeout=0")
        con.execute("CREATE TABLE still_writable(x)")
