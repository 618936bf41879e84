"""Two processes writing one database at once: no "database is locked", no lost row."""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from slop_tui.ledger import SCHEMA_VERSION, Ledger

ROOT = Path(__file__).resolve().parent.parent

# Each worker: wait for the start signal, then per round one user prompt and one
# assistant answer (two transactions, like the app), and every 10th round drop and
# restore one of its groups.
WORKER = r"""
import asyncio, os, sys, time
from slop_tui.ledger import Ledger
from slop_tui.records import NewMessage

db, session, worker, go, rounds = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])

async def main():
    ledger = await Ledger.open(db)
    try:
        print("ready", flush=True)
        deadline = time.monotonic() + 30
        while not os.path.exists(go):
            if time.monotonic() > deadline:
                raise SystemExit("no start signal")
            await asyncio.sleep(0.002)
        began = time.time()
        groups = []
        for i in range(rounds):
            user = await ledger.append_user(session, f"{worker} prompt {i}")
            groups.append(user.id)
            await ledger.append(
                session, user.id, [NewMessage("assistant", f"{worker} answer {i} " + "x" * (i % 50))]
            )
            if i % 10 == 9:
                gid = groups[i // 2]
                await ledger.set_group_dropped(session, gid, True)
                await ledger.current_state(session)
                await ledger.window(session, 5)
                await ledger.set_group_dropped(session, gid, False)
        print("done", len(groups), flush=True)
        print("span", began, time.time(), flush=True)
    finally:
        await ledger.close()

asyncio.run(main())
"""


def _start(db: Path, session: str, worker: str, go: Path, rounds: int) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WORKER, str(db), session, worker, str(go), str(rounds)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _run_workers(db: Path, session: str, names: list[str], rounds: int) -> list[str]:
    go = db.parent / "go"
    procs = [_start(db, session, name, go, rounds) for name in names]
    try:
        for proc in procs:
            assert proc.stdout is not None
            line = proc.stdout.readline()
            if line.strip() != "ready":
                proc.wait(timeout=30)
                raise AssertionError(f"worker failed to start: {line!r} {proc.stderr.read()}")  # type: ignore[union-attr]
        go.touch()
        outputs = []
        for proc in procs:
            out, err = proc.communicate(timeout=60)
            assert proc.returncode == 0, f"worker exit {proc.returncode}: {err}"
            assert "locked" not in err and "Traceback" not in err, err
            assert out.splitlines()[0] == f"done {rounds}", out
            outputs.append(out)
        return outputs
    finally:
        # Kill what still runs and close every pipe: a pipe left to the garbage
        # collector fails some later test with an unraisable ResourceWarning.
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
            proc.communicate()


def _check(db: Path, session: str, names: list[str], rounds: int) -> None:
    with contextlib.closing(sqlite3.connect(db)) as con:
        total, distinct = con.execute(
            "SELECT COUNT(*), COUNT(DISTINCT id) FROM messages"
        ).fetchone()
        assert total == distinct == len(names) * rounds * 2
        contents = [r[0] for r in con.execute("SELECT content FROM messages WHERE role='user'")]
        assert sorted(contents) == sorted(f"{w} prompt {i}" for w in names for i in range(rounds))
        # Each group holds its own prompt and its own answer, never another worker's.
        bad = con.execute(
            """SELECT COUNT(*) FROM messages a JOIN messages u ON u.id = a.group_id
               WHERE a.role = 'assistant' AND substr(a.content, 1, 2) != substr(u.content, 1, 2)"""
        ).fetchone()[0]
        assert bad == 0
        sizes = {r[0] for r in con.execute("SELECT COUNT(*) FROM messages GROUP BY group_id")}
        assert sizes == {2}
        assert (
            con.execute("SELECT COUNT(*) FROM messages WHERE status != 'completed'").fetchone()[0]
            == 0
        )
        count, tokens = con.execute(
            "SELECT message_count, token_total FROM sessions WHERE name=?", (session,)
        ).fetchone()
        real = con.execute("SELECT COUNT(*), SUM(tokens) FROM messages").fetchone()
        assert (count, tokens) == real
        assert con.execute("PRAGMA integrity_check").fetchone()[0] == "ok"


async def test_two_processes_write_one_session_at_once(tmp_path: Path) -> None:
    db = tmp_path / "slop.db"
    async with await Ledger.open(db):
        pass
    started = time.monotonic()
    outputs = _run_workers(db, "shared", ["w1", "w2"], 200)
    _check(db, "shared", ["w1", "w2"], 200)
    # The writers really ran at the same time: each began writing before the other
    # finished. (Whether their rows interleave is up to SQLite's busy handler: the
    # waiting one sleeps, the other may commit all its rows meanwhile.)
    spans = [tuple(map(float, out.splitlines()[1].split()[1:])) for out in outputs]
    assert max(b for b, _ in spans) < min(e for _, e in spans), spans
    async with await Ledger.open(db) as led:
        assert len(await led.window("shared", 0)) == 800
        (summary,) = await led.list_sessions()
        assert (summary.groups, summary.messages) == (400, 800)
    assert time.monotonic() - started < 30


async def test_two_processes_create_a_fresh_database_at_once(tmp_path: Path) -> None:
    """Both open a missing file concurrently: one migrates, the other waits, skills once."""
    db = tmp_path / "fresh" / "slop.db"
    db.parent.mkdir()
    _run_workers(db, "s", ["a1", "b2"], 20)
    _check(db, "s", ["a1", "b2"], 20)
    async with await Ledger.open(db) as led:
        assert [s.name for s in await led.list_skills()] == ["planner", "code_reviewer", "dba"]
        row = await led._one("PRAGMA user_version")
        assert row[0] == SCHEMA_VERSION


async def test_a_migration_committed_while_opening_is_not_another_programs_database(
    tmp_path: Path, monkeypatch
) -> None:
    """Another workspace commits the fresh schema between this open's first two statements.

    Read in two statements, version 0 and then its tables looked like a foreign
    database (seen once in CI as "a SQLite database of another program")."""
    import aiosqlite

    from slop_tui.ledger import core
    from slop_tui.ledger.schema import MIGRATIONS
    from tests.workspace_fixtures import migrate_to

    db = tmp_path / "slop.db"
    statements: list[str] = []

    def other_workspace_migrates() -> None:
        with contextlib.closing(sqlite3.connect(db, isolation_level=None)) as con:
            con.execute("BEGIN IMMEDIATE")
            migrate_to(con, len(MIGRATIONS))
            con.execute("COMMIT")

    def trace(sql: str) -> None:
        statements.append(sql)
        if len(statements) == 2:  # the second statement this open runs
            other_workspace_migrates()

    real_connect = aiosqlite.connect

    def connect(*args, **kwargs):
        conn = real_connect(*args, **kwargs)

        async def opened():
            c = await conn
            await c.set_trace_callback(trace)
            return c

        return opened()

    monkeypatch.setattr(core.aiosqlite, "connect", connect)
    ledger = await Ledger.open(db)
    try:
        assert len(statements) >= 2  # the other workspace really migrated mid-open
        assert [s.name for s in await ledger.list_skills()] == ["planner", "code_reviewer", "dba"]
        assert (await ledger._one("PRAGMA user_version"))[0] == SCHEMA_VERSION
        user = await ledger.append_user("s", "works")
        assert (await ledger.window("s", 0))[0].id == user.id
    finally:
        await ledger.close()
