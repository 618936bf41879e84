"""The turn in flight, journalled so that a killed process loses (almost) nothing.

A reply streams for seconds or minutes and a tool can run longer still. When
the process dies meanwhile (SIGKILL, the OOM killer, a closed laptop lid
that never reopens), no `except` or `finally` runs, so the normal path never
writes the partial answer as `interrupted` nor the results of the running
calls. While a turn runs, the orchestrator therefore keeps one small record
per turn in `app_state` (key `inflight/<group id>`, through `TurnJournal`):
the text streamed so far, saved at most every `DRAFT_INTERVAL` seconds, or
the tool calls being run. The record is deleted when the turn ends, so a
turn that ends normally leaves nothing behind, and a reply that streams for
less than `DRAFT_INTERVAL` writes no record at all.

`Ledger.open` recovers the records of processes that are gone, in one
transaction: the partial text becomes an `interrupted` assistant row (unless
the reply was stored after all: a row newer than the record's `since`), each
call without a result gets an `error` result saying the process ended, and
the record is deleted. Records of live processes -- another workspace on
the same database, mid-turn -- are left alone: a record names its host, pid
and the process's start time, so a reused pid is not taken for the owner.

The same owner records make the per-session turn claim (`claim_turn`, key
`turn/<session>`): one turn per session at a time, across processes, so two
turns never interleave their rows. A claim whose process is gone is taken over.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import sqlite3
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from slop_tui.ledger.core import LedgerError
from slop_tui.ledger.history import HistoryMixin
from slop_tui.records import (
    DEFAULT_LANE,
    STATUS_ERROR,
    STATUS_INTERRUPTED,
    NewMessage,
    ToolCall,
)

KEY_PREFIX = "inflight/"
TURN_PREFIX = "turn/"
# How often the streamed text is saved while a reply streams: the most a kill can lose.
DRAFT_INTERVAL = 0.25
KILLED_RESULT = (
    "the slop-tui process ended (killed or crashed) before {name} finished; "
    "the tool may have run in part. Check its effects before running it again."
)


@dataclass(frozen=True)
class Recovered:
    """What `Ledger.open` restored from one dead turn."""

    session: str
    group_id: int
    text_chars: int  # characters of partial reply kept as `interrupted` (0: none)
    calls: tuple[str, ...]  # call ids that got an `error` result
    failed: bool = False  # no answer at all: the prompt got the error mark

    def note(self) -> str:
        """One line for the user (the CLI prints it as a warning)."""
        parts = []
        if self.text_chars:
            parts.append(f"its partial reply ({self.text_chars:,} characters) kept as interrupted")
        if self.calls:
            parts.append(f"{len(self.calls)} unfinished tool call(s) given an error result")
        if self.failed:
            parts.append("it had no answer yet, so its prompt got the error mark (/retry sends it)")
        return (
            f"group {self.group_id} of session '{self.session}' was cut off when slop-tui "
            f"was killed: {'; '.join(parts)}."
        )


def _proc_stat(pid: int) -> tuple[str, str] | None:
    """(state, start time in clock ticks since boot) of a process (Linux); None elsewhere."""
    try:
        with open(f"/proc/{pid}/stat") as fh:
            fields = fh.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    # After the command name: state is field 3, starttime field 22.
    return (fields[0], fields[19]) if len(fields) > 19 else None


def _owner() -> dict[str, object]:
    pid = os.getpid()
    stat = _proc_stat(pid)
    return {"host": socket.gethostname(), "pid": pid, "started": stat[1] if stat else None}


def owner_alive(record: dict) -> bool:
    """True unless the record's process is known to be gone (another host: unknown, alive).

    An unreadable record has no owner and counts as dead, so it is cleared."""
    if "host" not in record:
        return False
    if record["host"] != socket.gethostname():
        return True
    pid = record.get("pid")
    if not isinstance(pid, int) or pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: it exists
        pass
    stat = _proc_stat(pid)
    if stat is None:  # no /proc: the pid exists, trust it
        return True
    state, started = stat
    if state == "Z":  # killed, not reaped yet
        return False
    want = record.get("started")
    return not want or started == want  # a reused pid is another process


class InflightMixin(HistoryMixin):
    """The in-flight record of each running turn, and its recovery on open."""

    recovered: list[Recovered]

    async def save_inflight(
        self,
        session: str,
        group_id: int,
        strategy: str | None,
        *,
        text: str | None = None,
        calls: Sequence[ToolCall] = (),
    ) -> None:
        """Replace the turn's record: the streamed `text`, or the `calls` being run."""
        async with self.transaction() as db:
            await self._write_inflight(db, session, group_id, strategy, text=text, calls=calls)

    async def _write_inflight(
        self,
        db,
        session: str,
        group_id: int,
        strategy: str | None,
        *,
        text: str | None = None,
        calls: Sequence[ToolCall] = (),
    ) -> None:
        since = None
        if text is not None:
            cur = await db.execute("SELECT MAX(id) FROM messages WHERE group_id=?", (group_id,))
            since = (await cur.fetchone())[0]
        record = {
            **_owner(),
            "session": session,
            "group": group_id,
            "strategy": strategy,
            "text": text,
            "since": since,
            "calls": [{"id": c.id, "name": c.name} for c in calls],
        }
        await db.execute(
            "INSERT INTO app_state(key, value) VALUES (?, ?) "
            "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
            (f"{KEY_PREFIX}{group_id}", json.dumps(record, ensure_ascii=False)),
        )

    async def claim_turn(self, session: str, group_id: int, token: str) -> dict | None:
        """Claim the session's turn for `token`: None when claimed, else the live
        claim that holds it (a dict with at least `pid`, `host` and `group`)."""
        key = TURN_PREFIX + session
        async with self.transaction() as db:
            cur = await db.execute("SELECT value FROM app_state WHERE key=?", (key,))
            row = await cur.fetchone()
            if row is not None:
                try:
                    held = json.loads(row[0])
                except ValueError:
                    held = None
                if isinstance(held, dict) and held.get("token") != token and owner_alive(held):
                    return held
            record = {**_owner(), "token": token, "group": group_id, "at": time.time()}
            await db.execute(
                "INSERT INTO app_state(key, value) VALUES (?, ?) "
                "ON CONFLICT(key) DO UPDATE SET value=excluded.value",
                (key, json.dumps(record)),
            )
        return None

    async def release_turn(self, session: str, token: str) -> None:
        """End the claim `token` holds (a claim taken over meanwhile is left alone)."""
        key = TURN_PREFIX + session
        async with self.transaction() as db:
            cur = await db.execute("SELECT value FROM app_state WHERE key=?", (key,))
            row = await cur.fetchone()
            try:
                held = json.loads(row[0]) if row is not None else None
            except ValueError:
                held = None
            if isinstance(held, dict) and held.get("token") == token:
                await db.execute("DELETE FROM app_state WHERE key=?", (key,))

    async def clear_inflight(self, group_id: int) -> None:
        async with self.transaction() as db:
            await db.execute("DELETE FROM app_state WHERE key=?", (f"{KEY_PREFIX}{group_id}",))

    async def _prepare(self) -> None:
        await super()._prepare()
        self.recovered = await self.recover_inflight()

    async def inflight_records(self) -> dict[str, dict]:
        """Every in-flight record by key, live or not; an unreadable one is `{}`."""
        rows = await self._all(
            "SELECT key, value FROM app_state WHERE key >= ? AND key < ?",
            (KEY_PREFIX, KEY_PREFIX[:-1] + chr(ord(KEY_PREFIX[-1]) + 1)),  # a prefix range
        )
        out: dict[str, dict] = {}
        for key, value in rows:
            try:
                record = json.loads(value)
            except ValueError:
                record = {}
            out[key] = record if isinstance(record, dict) else {}
        return out

    async def running_here(self) -> tuple[str, int] | None:
        """(session, group) of a turn this process runs now, from its in-flight record
        (None: none). Commands that cannot wait for a turn ask this."""
        me = _owner()
        for record in (await self.inflight_records()).values():
            if record.get("host") == me["host"] and record.get("pid") == me["pid"]:
                gid, session = record.get("group"), record.get("session")
                if isinstance(gid, int) and isinstance(session, str):
                    return session, gid
        return None

    async def recover_inflight(self) -> list[Recovered]:
        """Finish the records of dead processes (see the module docstring)."""
        dead = [(k, r) for k, r in (await self.inflight_records()).items() if not owner_alive(r)]
        done: list[Recovered] = []
        if not dead:
            return done
        async with self.transaction() as db:
            for key, record in dead:
                got = await self._recover_one(db, record)
                if got is not None:
                    done.append(got)
                await db.execute("DELETE FROM app_state WHERE key=?", (key,))
        return done

    async def _recover_one(self, db, record: dict) -> Recovered | None:
        gid, session = record.get("group"), record.get("session")
        if not isinstance(gid, int) or not isinstance(session, str):
            return None
        cur = await db.execute(
            "SELECT lane FROM messages WHERE id=? AND session_id=?", (gid, session)
        )
        row = await cur.fetchone()
        if row is None:  # the group was removed meanwhile
            return None
        lane = row[0] or DEFAULT_LANE
        strategy = record.get("strategy")
        text = record.get("text")
        kept = 0
        if isinstance(text, str) and text:
            cur = await db.execute(
                "SELECT 1 FROM messages WHERE group_id=? AND role='assistant' AND id>? LIMIT 1",
                (gid, record.get("since") or 0),
            )
            if await cur.fetchone() is None:  # the reply never reached the ledger
                msg = NewMessage("assistant", text, status=STATUS_INTERRUPTED, strategy=strategy)
                await self._insert(db, session, gid, msg, lane)
                kept = len(text)
        answered = []
        for call in record.get("calls") or []:
            cid, name = call.get("id"), call.get("name") or "the tool"
            cur = await db.execute(
                "SELECT 1 FROM messages WHERE group_id=? AND role='tool' AND tool_call_id=? "
                "LIMIT 1",
                (gid, cid),
            )
            if await cur.fetchone() is None:
                text = "Error: " + KILLED_RESULT.format(name=name)
                msg = NewMessage(
                    "tool",
                    text,
                    status=STATUS_ERROR,
                    tool_call_id=cid,
                    tool_name=call.get("name"),
                    strategy=strategy,
                )
                await self._insert(db, session, gid, msg, lane)
                answered.append(str(cid))
        # A turn killed before any answer leaves a bare prompt: marked, it is not
        # replayed as ordinary history (it would merge into the next prompt).
        failed = await self._mark_failed(db, session, gid)
        if not kept and not answered and not failed:
            return None
        return Recovered(session, gid, kept, tuple(answered), failed)


class TurnJournal:
    """Keeps one turn's in-flight record; writes are throttled and never break the turn.

    A journal write that fails (a full disk, a read-only database) is given
    up for the rest of the turn: the write of the reply itself reports the
    problem, with the one clear error the user needs.
    """

    def __init__(
        self,
        ledger: InflightMixin,
        session: str,
        group_id: int,
        *,
        interval: float = DRAFT_INTERVAL,
        clock: Callable[[], float] = time.monotonic,
        opened: bool = False,
    ) -> None:
        """`opened`: the turn's record was written with its prompt (`Ledger.open_turn`)."""
        self.ledger = ledger
        self.session = session
        self.group_id = group_id
        self.interval = interval
        self.clock = clock
        self.written = opened  # a record exists (close deletes it)
        self.broken = False
        self._stream_start = clock()
        self._saved_at: float | None = None

    def stream_started(self) -> None:
        """A new request streams: its text is saved once it has run `interval` seconds."""
        self._stream_start = self.clock()
        self._saved_at = None

    async def text(
        self, parts: Sequence[str], strategy: str | None, *, final: bool = False
    ) -> None:
        """Save the text streamed so far when due; `final`: the whole reply, if drafting."""
        now = self.clock()
        last = self._saved_at if self._saved_at is not None else self._stream_start
        if final and self._saved_at is None:  # a short stream saved nothing: nothing to finish
            return
        if not final and now - last < self.interval:
            return
        self._saved_at = now
        await self._write(strategy, text="".join(parts))

    async def calls(self, calls: Sequence[ToolCall], strategy: str | None) -> None:
        """The calls about to run (their tool_call row is already stored)."""
        self._saved_at = None
        await self._write(strategy, calls=calls)

    async def _write(self, strategy: str | None, **what) -> None:
        if self.broken:
            return
        try:
            await self.ledger.save_inflight(self.session, self.group_id, strategy, **what)
        except (LedgerError, sqlite3.Error):
            self.broken = True
            return
        self.written = True

    async def close(self) -> None:
        """The turn ended (whatever way): its rows are stored, the record goes."""
        if not self.written:
            return
        self.written = False
        with contextlib.suppress(LedgerError, sqlite3.Error):
            await self.ledger.clear_inflight(self.group_id)
