"""Continuity in the ledger: summarized spans, un-compaction, the compaction
audit log, handoffs, files in context and lanes (issue 6).

Compaction never destroys anything: `mark_summarized` hides rows behind a
summary (status 'summarized'; the prior status in `status_before` and in
`summary_status`, which a later drop/restore of the group cannot overwrite;
the summary's id in `summary_id`) and `uncompact` puts them back exactly and
marks the summary superseded. Rows already dropped or summarized are left
alone, so a span summarized twice stays linked to the first summary.
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Sequence

from slop_tui.ledger.core import LedgerBase, LedgerError, now
from slop_tui.ledger.history import _MSG_COLS
from slop_tui.records import (
    COMPACTION_CASES,
    DEFAULT_LANE,
    HANDOFF_REASONS,
    STATUS_DROPPED,
    STATUS_SUMMARIZED,
    CompactionRecord,
    ContextFile,
    Handoff,
    LaneInfo,
    Message,
    Summary,
)

_HIDDEN = f"('{STATUS_DROPPED}','{STATUS_SUMMARIZED}')"
_TOPIC = re.compile(r"[\w][\w.\-]{0,63}")
_REPLY = re.compile(r"[1-9][0-9]{0,17}")
LANE_FORMS = "main, topic:<name> or reply:<group id>"
MARK_SLICE = 10_000  # ids per statement when rows are hidden behind a summary


def check_lane(lane: str) -> str:
    """The lane if it has one of the three forms; LedgerError otherwise."""
    if lane == DEFAULT_LANE:
        return lane
    kind, sep, rest = lane.partition(":")
    if sep and kind == "topic" and _TOPIC.fullmatch(rest):
        return lane
    if sep and kind == "reply" and _REPLY.fullmatch(rest):
        return lane
    raise LedgerError(
        f"'{lane}' is not a lane name; use {LANE_FORMS} "
        "(topic names: letters, digits, '.', '_' or '-', at most 64)."
    )


def reply_lane(group_id: int) -> str:
    return f"reply:{group_id}"


def lane_group(lane: str) -> int | None:
    """The replied-to group of a `reply:<gid>` lane (the lane's focus anchor), else None."""
    kind, _, rest = lane.partition(":")
    return int(rest) if kind == "reply" and _REPLY.fullmatch(rest) else None


def _summary(r: sqlite3.Row) -> Summary:
    return Summary(
        r["id"],
        r["session_id"],
        r["lane"],
        r["kind"],
        r["first_message_id"],
        r["last_message_id"],
        r["content"],
        r["version"],
        r["created_at"],
    )


def _compaction(r: sqlite3.Row) -> CompactionRecord:
    return CompactionRecord(
        id=r["id"],
        session=r["session_id"],
        lane=r["lane"],
        trigger=r["trigger"],
        case_kind=r["case_kind"],
        tokens_before=r["tokens_before"],
        tokens_after=r["tokens_after"],
        summary_id=r["summary_id"],
        first_message_id=r["first_message_id"],
        last_message_id=r["last_message_id"],
        detail=r["detail"],
        created_at=r["created_at"],
        undone=bool(r["undone"]),
    )


def _message_row(_cursor: sqlite3.Cursor, row: tuple) -> Message:
    return Message(*row)  # `_MSG_COLS` is in Message's field order


def _strings(raw: str | None) -> tuple[str, ...]:
    try:
        value = json.loads(raw or "[]")
    except ValueError:
        return ()
    return tuple(str(v) for v in value) if isinstance(value, list) else ()


def _handoff(r: sqlite3.Row) -> Handoff:
    return Handoff(
        session=r["session_id"],
        reason=r["reason"],
        task=r["task"],
        branch=r["branch"],
        head_commit=r["head_commit"],
        modified_files=_strings(r["modified_files"]),
        untracked_files=_strings(r["untracked_files"]),
        completed=_strings(r["completed"]),
        remaining=_strings(r["remaining"]),
        decisions=_strings(r["decisions"]),
        continuation=r["continuation"],
        id=r["id"],
        created_at=r["created_at"],
        consumed=bool(r["consumed"]),
    )


class ContinuityMixin(LedgerBase):
    # -- summarized spans and un-compaction --------------------------------

    async def _summary_row(self, db, session: str, summary_id: int) -> sqlite3.Row:
        cur = await db.execute(
            "SELECT * FROM summaries WHERE id=? AND session_id=?", (summary_id, session)
        )
        row = await cur.fetchone()
        if row is None:
            raise LedgerError(f"session '{session}' has no summary {summary_id}.")
        return row

    async def _mark(self, db, session: str, message_ids: Sequence[int], summary_id: int) -> int:
        # In slices: a compaction of a long imported history hides tens of thousands of
        # rows, more than SQLite's limit of 32,766 variables per statement.
        ids = sorted({int(i) for i in message_ids})
        if not ids:
            return 0
        slices = [ids[i : i + MARK_SLICE] for i in range(0, len(ids), MARK_SLICE)]
        found = 0
        for part in slices:
            marks = ",".join("?" * len(part))
            cur = await db.execute(
                f"SELECT COUNT(*) FROM messages WHERE session_id=? AND id IN ({marks})",
                (session, *part),
            )
            found += (await cur.fetchone())[0]
        if found != len(ids):
            raise LedgerError(
                f"{len(ids) - found} of the messages to summarize are not in session '{session}'."
            )
        changed = 0
        for part in slices:
            marks = ",".join("?" * len(part))
            cur = await db.execute(
                f"""UPDATE messages SET status_before=status, summary_status=status,
                       status='{STATUS_SUMMARIZED}', summary_id=?
                       WHERE session_id=? AND id IN ({marks}) AND status NOT IN {_HIDDEN}""",
                (summary_id, session, *part),
            )
            changed += cur.rowcount
        return changed

    async def mark_summarized(
        self, session: str, message_ids: Sequence[int], summary_id: int
    ) -> int:
        """Hide rows behind a summary; returns how many changed.

        Rows already dropped or summarized keep their status and link. Every id
        must belong to the session and the summary must be the session's, or
        nothing changes.
        """
        async with self.transaction() as db:
            await self._summary_row(db, session, summary_id)
            return await self._mark(db, session, message_ids, summary_id)

    async def summarize_span(
        self,
        session: str,
        lane: str,
        kind: str,
        message_ids: Sequence[int],
        content: str,
    ) -> Summary:
        """Store a summary and hide the rows it covers, in one transaction."""
        ids = sorted({int(i) for i in message_ids})
        if not ids:
            raise LedgerError("a summary must cover at least one message.")
        t = now()
        async with self.transaction() as db:
            cur = await db.execute(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM summaries WHERE session_id=? AND lane=?",
                (session, lane),
            )
            version = (await cur.fetchone())[0]
            cur = await db.execute(
                """INSERT INTO summaries(session_id, lane, kind, first_message_id, last_message_id,
                       content, version, created_at) VALUES (?,?,?,?,?,?,?,?)""",
                (session, lane, kind, ids[0], ids[-1], content, version, t),
            )
            summary_id = cur.lastrowid
            await self._mark(db, session, ids, summary_id)
        return Summary(summary_id, session, lane, kind, ids[0], ids[-1], content, version, t)

    async def roll_summary(
        self,
        session: str,
        lane: str,
        kind: str,
        previous_id: int,
        message_ids: Sequence[int],
        content: str,
    ) -> Summary:
        """Store a summary that replaces `previous_id` and also covers `message_ids`.

        One transaction: the new summary spans from the previous one's first
        message to the newest of `message_ids`; the new rows are hidden behind
        it; the previous summary is superseded but its rows stay hidden behind
        it (that is what `uncompact` of the new summary undoes: the previous
        summary comes back in effect, its rows stay summarized, and the new
        rows get their exact prior statuses back).
        """
        ids = sorted({int(i) for i in message_ids})
        if not ids:
            raise LedgerError("a summary must cover at least one message.")
        t = now()
        async with self.transaction() as db:
            prev = await self._summary_row(db, session, previous_id)
            if prev["superseded"]:
                raise LedgerError(f"summary {previous_id} is not in effect.")
            cur = await db.execute(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM summaries WHERE session_id=? AND lane=?",
                (session, lane),
            )
            version = (await cur.fetchone())[0]
            first = min(prev["first_message_id"], ids[0])
            last = max(prev["last_message_id"], ids[-1])
            cur = await db.execute(
                """INSERT INTO summaries(session_id, lane, kind, first_message_id, last_message_id,
                       content, version, created_at) VALUES (?,?,?,?,?,?,?,?)""",
                (session, lane, kind, first, last, content, version, t),
            )
            summary_id = cur.lastrowid
            await self._mark(db, session, ids, summary_id)
            await db.execute("UPDATE summaries SET superseded=1 WHERE id=?", (previous_id,))
        return Summary(summary_id, session, lane, kind, first, last, content, version, t)

    _ROLLED_FROM = f"""SELECT s.* FROM summaries s, summaries n
               WHERE n.id=? AND n.session_id=? AND s.session_id=n.session_id
                 AND s.lane=n.lane AND s.id < n.id AND s.superseded=1
                 AND s.first_message_id = n.first_message_id
                 AND EXISTS (SELECT 1 FROM messages m WHERE m.summary_id=s.id
                             AND m.status='{STATUS_SUMMARIZED}')
               ORDER BY s.id DESC LIMIT 1"""

    async def rolled_from(self, session: str, summary_id: int) -> Summary | None:
        """The summary `summary_id` rolled up (superseded, its rows still hidden behind it)."""
        row = await self._one(self._ROLLED_FROM, (summary_id, session))
        return _summary(row) if row else None

    async def uncompact(self, session: str, summary_id: int) -> int:
        """Restore the rows a summary covers to their exact prior statuses.

        The summary is kept and marked superseded; returns how many rows were
        restored (0 when it was already un-compacted). A rolled summary puts
        the summary it replaced back in effect (its rows stay behind it).
        """
        async with self.transaction() as db:
            return await self._uncompact(db, session, summary_id)

    async def _uncompact(self, db, session: str, summary_id: int) -> int:
        """`uncompact` inside the caller's transaction."""
        cur = await db.execute(self._ROLLED_FROM, (summary_id, session))
        previous = await cur.fetchone()
        await self._summary_row(db, session, summary_id)
        cur = await db.execute("SELECT superseded FROM summaries WHERE id=?", (summary_id,))
        was_superseded = bool((await cur.fetchone())[0])
        cur = await db.execute(
            f"""UPDATE messages
               SET status=COALESCE(summary_status, status_before, 'completed'),
                   status_before=NULL, summary_id=NULL, summary_status=NULL
               WHERE session_id=? AND summary_id=? AND status='{STATUS_SUMMARIZED}'""",
            (session, summary_id),
        )
        restored = cur.rowcount
        # Rows whose group was dropped after summarizing stay dropped; a later
        # `/context restore` brings back the status they had before the summary.
        await db.execute(
            f"""UPDATE messages SET status_before=COALESCE(summary_status, status_before),
                   summary_id=NULL, summary_status=NULL
               WHERE session_id=? AND summary_id=? AND status='{STATUS_DROPPED}'""",
            (session, summary_id),
        )
        await db.execute("UPDATE summaries SET superseded=1 WHERE id=?", (summary_id,))
        if previous is not None and not was_superseded:
            await db.execute("UPDATE summaries SET superseded=0 WHERE id=?", (previous["id"],))
        return restored

    async def get_summary(self, session: str, summary_id: int) -> Summary | None:
        row = await self._one(
            "SELECT * FROM summaries WHERE id=? AND session_id=?", (summary_id, session)
        )
        return _summary(row) if row else None

    async def summary_superseded(self, summary_id: int) -> bool:
        row = await self._one("SELECT superseded FROM summaries WHERE id=?", (summary_id,))
        return bool(row and row["superseded"])

    async def active_summaries(self, session: str, lane: str | None = None) -> list[Summary]:
        """Summaries still in effect (not un-compacted), oldest first."""
        lane_sql = " AND lane=?" if lane else ""
        params: tuple = (session, lane) if lane else (session,)
        rows = await self._all(
            f"SELECT * FROM summaries WHERE session_id=? AND superseded=0{lane_sql} ORDER BY id",
            params,
        )
        return [_summary(r) for r in rows]

    async def summary_of_message(self, message_id: int) -> Summary | None:
        """The summary a summarized row is hidden behind (None for any other row)."""
        row = await self._one(
            """SELECT s.* FROM messages m JOIN summaries s ON s.id = m.summary_id
               WHERE m.id=? AND m.status='summarized'""",
            (message_id,),
        )
        return _summary(row) if row else None

    async def summarized_ids(self, session: str, summary_id: int) -> list[int]:
        """Ids of the rows currently hidden behind a summary, oldest first."""
        rows = await self._all(
            "SELECT id FROM messages WHERE session_id=? AND summary_id=? ORDER BY id",
            (session, summary_id),
        )
        return [r["id"] for r in rows]

    # -- compaction audit log ----------------------------------------------

    async def log_compaction(
        self,
        session: str,
        *,
        case_kind: str,
        trigger: str,
        tokens_before: int,
        tokens_after: int,
        lane: str = DEFAULT_LANE,
        summary_id: int | None = None,
        first_message_id: int | None = None,
        last_message_id: int | None = None,
        detail: str = "",
    ) -> CompactionRecord:
        if case_kind not in COMPACTION_CASES:
            raise LedgerError(
                f"unknown compaction case '{case_kind}'; use one of {', '.join(COMPACTION_CASES)}."
            )
        t = now()
        async with self.transaction() as db:
            await self._ensure_session(db, session)  # type: ignore[attr-defined]
            cur = await db.execute(
                """INSERT INTO compaction_log(session_id, lane, trigger, case_kind, tokens_before,
                       tokens_after, summary_id, first_message_id, last_message_id, detail,
                       created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    session,
                    lane,
                    trigger,
                    case_kind,
                    tokens_before,
                    tokens_after,
                    summary_id,
                    first_message_id,
                    last_message_id,
                    detail,
                    t,
                ),
            )
            rid = cur.lastrowid
        return CompactionRecord(
            rid,
            session,
            lane,
            trigger,
            case_kind,
            tokens_before,
            tokens_after,
            summary_id,
            first_message_id,
            last_message_id,
            detail,
            t,
        )

    async def compaction_log(self, session: str, limit: int = 20) -> list[CompactionRecord]:
        """The newest audit records first (`limit` <= 0: all)."""
        rows = await self._all(
            f"""SELECT c.*, (COALESCE(s.superseded, 0) AND NOT EXISTS (
                   SELECT 1 FROM messages m WHERE m.summary_id = s.id
                   AND m.status = '{STATUS_SUMMARIZED}')) AS undone FROM compaction_log c
               LEFT JOIN summaries s ON s.id = c.summary_id
               WHERE c.session_id=? ORDER BY c.id DESC LIMIT ?""",
            (session, limit if limit > 0 else -1),
        )
        return [_compaction(r) for r in rows]

    # -- handoffs ----------------------------------------------------------

    async def add_handoff(self, h: Handoff) -> Handoff:
        """Store a handoff (its `id`, `created_at` and `consumed` are assigned)."""
        if h.reason not in HANDOFF_REASONS:
            raise LedgerError(
                f"unknown handoff reason '{h.reason}'; use one of {', '.join(HANDOFF_REASONS)}."
            )
        t = now()
        async with self.transaction() as db:
            await self._ensure_session(db, h.session)  # type: ignore[attr-defined]
            cur = await db.execute(
                """INSERT INTO handoffs(session_id, reason, task, branch, head_commit,
                       modified_files, untracked_files, completed, remaining, decisions,
                       continuation, created_at) VALUES (?,?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    h.session,
                    h.reason,
                    h.task,
                    h.branch,
                    h.head_commit,
                    json.dumps(list(h.modified_files), ensure_ascii=False),
                    json.dumps(list(h.untracked_files), ensure_ascii=False),
                    json.dumps(list(h.completed), ensure_ascii=False),
                    json.dumps(list(h.remaining), ensure_ascii=False),
                    json.dumps(list(h.decisions), ensure_ascii=False),
                    h.continuation,
                    t,
                ),
            )
            hid = cur.lastrowid
        stored = await self.get_handoff(hid)
        assert stored is not None
        return stored

    async def get_handoff(self, handoff_id: int) -> Handoff | None:
        row = await self._one("SELECT * FROM handoffs WHERE id=?", (handoff_id,))
        return _handoff(row) if row else None

    async def latest_handoff(self, session: str, unconsumed_only: bool = False) -> Handoff | None:
        extra = " AND consumed=0" if unconsumed_only else ""
        row = await self._one(
            f"SELECT * FROM handoffs WHERE session_id=?{extra} ORDER BY id DESC LIMIT 1",
            (session,),
        )
        return _handoff(row) if row else None

    async def handoffs(self, session: str, limit: int = 20) -> list[Handoff]:
        rows = await self._all(
            "SELECT * FROM handoffs WHERE session_id=? ORDER BY id DESC LIMIT ?",
            (session, limit if limit > 0 else -1),
        )
        return [_handoff(r) for r in rows]

    async def mark_handoff_consumed(self, handoff_id: int) -> int:
        """Mark a handoff and every older one of its session consumed; returns how many."""
        async with self.transaction() as db:
            cur = await db.execute(
                """UPDATE handoffs SET consumed=1 WHERE consumed=0 AND id <= ?
                   AND session_id = (SELECT session_id FROM handoffs WHERE id=?)""",
                (handoff_id, handoff_id),
            )
            return cur.rowcount

    # -- files in context ----------------------------------------------------

    async def add_context_file(self, session: str, path: str) -> ContextFile:
        """Add a (root-relative) path; adding it again keeps its first `added_at`."""
        if not path or "\x00" in path:
            raise LedgerError("a context file needs a path.")
        async with self.transaction() as db:
            await self._ensure_session(db, session)  # type: ignore[attr-defined]
            await db.execute(
                "INSERT OR IGNORE INTO context_files(session_id, path, added_at) VALUES (?,?,?)",
                (session, path, now()),
            )
        row = await self._one(
            "SELECT * FROM context_files WHERE session_id=? AND path=?", (session, path)
        )
        assert row is not None
        return ContextFile(row["session_id"], row["path"], row["added_at"])

    async def remove_context_file(self, session: str, path: str) -> bool:
        async with self.transaction() as db:
            cur = await db.execute(
                "DELETE FROM context_files WHERE session_id=? AND path=?", (session, path)
            )
            return cur.rowcount > 0

    async def context_files(self, session: str) -> list[ContextFile]:
        """The session's files in the order they were added."""
        rows = await self._all(
            "SELECT * FROM context_files WHERE session_id=? ORDER BY added_at, path", (session,)
        )
        return [ContextFile(r["session_id"], r["path"], r["added_at"]) for r in rows]

    # -- lanes -------------------------------------------------------------

    async def lanes(self, session: str) -> list[LaneInfo]:
        """Every lane with messages in the session: `main` first, then newest first."""
        rows = await self._all(
            f"""SELECT lane,
                   COUNT(DISTINCT CASE WHEN status NOT IN {_HIDDEN} THEN group_id END) AS groups,
                   SUM(status NOT IN {_HIDDEN}) AS visible,
                   SUM(CASE WHEN status NOT IN {_HIDDEN} THEN tokens ELSE 0 END) AS tokens,
                   SUM(status = '{STATUS_SUMMARIZED}') AS summarized,
                   MAX(created_at) AS last_used,
                   (SELECT MAX(s.created_at) FROM summaries s WHERE s.session_id = m.session_id
                       AND s.lane = m.lane AND s.superseded = 0) AS last_summary_at
               FROM messages m WHERE session_id=? AND group_id IS NOT NULL
               GROUP BY lane""",
            (session,),
        )
        infos = [
            LaneInfo(
                lane=r["lane"],
                groups=r["groups"] or 0,
                messages=r["visible"] or 0,
                tokens=r["tokens"] or 0,
                summarized=r["summarized"] or 0,
                last_used=r["last_used"] or 0.0,
                last_summary_at=r["last_summary_at"],
            )
            for r in rows
        ]
        infos.sort(key=lambda i: (i.lane != DEFAULT_LANE, -i.last_used, i.lane))
        return infos

    async def lane_backlog(
        self, session: str, lane: str, window_size: int, limit: int | None = None
    ) -> list[Message]:
        """The lane's visible rows that left its recency window, oldest first.

        The rows `window(session, 0, lane)` has and `window(session, window_size,
        lane)` has not (none when `window_size` <= 0: the window is everything);
        at most `limit` of them (None: all). The rolling lane summary folds the
        oldest ones, so it reads those instead of the whole lane. The `Message`
        records are built in the database thread, so a long backlog does not
        hold the event loop.
        """
        if window_size <= 0 or (limit is not None and limit <= 0):
            return []
        sql = f"""SELECT {_MSG_COLS} FROM messages
            WHERE session_id = :s AND lane = :lane AND group_id IS NOT NULL
              AND status NOT IN {_HIDDEN} AND group_id NOT IN (
                SELECT group_id FROM messages
                WHERE session_id = :s AND group_id IS NOT NULL
                  AND status NOT IN {_HIDDEN} AND lane = :lane
                GROUP BY group_id ORDER BY group_id DESC LIMIT :n)
            ORDER BY id LIMIT :limit"""
        params = {"s": session, "lane": lane, "n": window_size, "limit": limit or -1}
        cur = await self._db.cursor()
        try:
            cur.row_factory = _message_row  # applied by fetchall, in the database thread
            await cur.execute(sql, params)
            return list(await cur.fetchall())
        finally:
            await cur.close()

    async def lane_ids_up_to(self, session: str, lane: str, last_id: int) -> list[int]:
        """Ids of the lane's visible rows (in a group) with id <= `last_id`, oldest first:
        what a summary ending at `last_id` hides, rows older than the window included."""
        rows = await self._tuples(
            f"""SELECT id FROM messages WHERE session_id = ? AND lane = ? AND id <= ?
                AND group_id IS NOT NULL AND status NOT IN {_HIDDEN} ORDER BY id""",
            (session, lane, last_id),
        )
        return [r[0] for r in rows]

    async def last_summary_at(self, session: str, lane: str) -> float | None:
        """When the lane's newest summary still in effect was made (None: it has none);
        `lane_info(...).last_summary_at` without counting the lane's messages."""
        row = await self._one(
            "SELECT MAX(created_at) FROM summaries WHERE session_id=? AND lane=? AND superseded=0",
            (session, lane),
        )
        return row[0] if row else None

    async def lane_info(self, session: str, lane: str) -> LaneInfo:
        """One lane's counts (zeros for a lane with no messages yet)."""
        for info in await self.lanes(session):
            if info.lane == lane:
                return info
        return LaneInfo(lane=lane, groups=0, messages=0, tokens=0, summarized=0, last_used=0.0)

    async def group_exists(self, session: str, group_id: int) -> bool:
        row = await self._one(
            "SELECT 1 FROM messages WHERE session_id=? AND group_id=? LIMIT 1", (session, group_id)
        )
        return row is not None


__all__ = ["ContinuityMixin", "LANE_FORMS", "check_lane", "lane_group", "reply_lane"]
