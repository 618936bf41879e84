"""Continuity in the ledger: summaries, the one hook that keeps them true to
the history (`history_changed`), the compaction audit log, handoffs, files in
context and lanes.

A summary never changes a row: it is stored with the span of its lane it
covers (from its first to its last message id) and a state in `superseded`
(0 valid, 1 discarded by `/context uncompact`, 2 out of date because the
history under it changed). Which rows it stands for in a request is the
context plan's decision (`slop_tui.context.plan`).
"""

from __future__ import annotations

import json
import re
import sqlite3
from collections.abc import Collection, Sequence

from slop_tui.ledger.core import LedgerBase, LedgerError, now
from slop_tui.ledger.history import what_if
from slop_tui.records import (
    COMPACTION_CASES,
    DEFAULT_LANE,
    HANDOFF_REASONS,
    SESSION_LANE,
    STATUS_DROPPED,
    STATUS_SUMMARIZED,
    SUMMARY_DISCARDED,
    SUMMARY_STALE,
    SUMMARY_VALID,
    CompactionRecord,
    ContextFile,
    Handoff,
    ImageRef,
    LaneInfo,
    McpResource,
    Message,
    Summary,
    UrlPage,
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
        undone=r["summary_state"] == SUMMARY_DISCARDED,
        stale=r["summary_state"] == SUMMARY_STALE,
    )


def _by_group(m: Message) -> tuple[int, int]:
    """History order: group by group, a group's rows in id order (context/window.py)."""
    return (m.group_id or 0, m.id)


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
    # -- summaries: a cache of what lies outside the window ------------------

    async def _summary_row(self, db, session: str, summary_id: int) -> sqlite3.Row:
        cur = await db.execute(
            "SELECT * FROM summaries WHERE id=? AND session_id=?", (summary_id, session)
        )
        row = await cur.fetchone()
        if row is None:
            raise LedgerError(f"session '{session}' has no summary {summary_id}.")
        return row

    async def add_summary(
        self,
        session: str,
        lane: str,
        kind: str,
        message_ids: Sequence[int],
        content: str,
        previous: Summary | None = None,
    ) -> Summary:
        """Store a summary of the lane up to the newest of `message_ids`.

        A summary covers a prefix of its lane: from its first message (the
        previous summary's first, when it rolls one over) to its last. No row
        changes: which rows a summary stands for in a request is the context
        plan's decision (`context.plan`), so widening the window brings them
        back word for word.
        """
        ids = sorted({int(i) for i in message_ids})
        if not ids:
            raise LedgerError("a summary must cover at least one message.")
        first, last = ids[0], ids[-1]
        if previous is not None:
            first, last = min(previous.first_message_id, first), max(previous.last_message_id, last)
        t = now()
        async with self.transaction() as db:
            await self._ensure_session(db, session)  # type: ignore[attr-defined]
            cur = await db.execute(
                "SELECT COALESCE(MAX(version), 0) + 1 FROM summaries WHERE session_id=? AND lane=?",
                (session, lane),
            )
            version = (await cur.fetchone())[0]
            cur = await db.execute(
                """INSERT INTO summaries(session_id, lane, kind, first_message_id, last_message_id,
                       content, version, created_at) VALUES (?,?,?,?,?,?,?,?)""",
                (session, lane, kind, first, last, content, version, t),
            )
            summary_id = cur.lastrowid
        return Summary(summary_id, session, lane, kind, first, last, content, version, t)

    async def discard_summary(self, session: str, summary_id: int) -> int:
        """Take a summary out of use (`/context uncompact`), with every later valid summary
        of its lane (they were rolled over it); returns how many were discarded."""
        async with self.transaction() as db:
            row = await self._summary_row(db, session, summary_id)
            cur = await db.execute(
                f"""UPDATE summaries SET superseded = {SUMMARY_DISCARDED}
                   WHERE session_id=? AND lane=? AND superseded = {SUMMARY_VALID}
                     AND (id = ? OR id > ?)""",
                (session, row["lane"], summary_id, summary_id),
            )
            return cur.rowcount

    async def _history_changed(self, db, session: str, group_ids: Sequence[int]) -> int:
        spans = await (
            await db.execute(
                f"""SELECT lane, MIN(id) FROM messages WHERE session_id=?
                   AND group_id IN ({",".join("?" * len(group_ids))}) GROUP BY lane""",
                (session, *group_ids),
            )
        ).fetchall()
        stale: list[int] = []
        for lane, first in spans:
            cur = await db.execute(
                f"SELECT * FROM summaries WHERE session_id=? AND lane=? "
                f"AND superseded = {SUMMARY_VALID}",
                (session, lane),
            )
            # Not only the summaries holding a row of the group: every one reaching past its
            # first row, so a stored summary always covers its lane from the start (a group
            # restored before a summary's first message would otherwise fall between).
            stale += [s.id for s in map(_summary, await cur.fetchall()) if s.overlaps(first)]
        if spans:
            # The session summary stands for every lane: an edit under its span of any
            # lane takes it out of date too.
            first = min(f for _, f in spans)
            cur = await db.execute(
                f"SELECT id FROM summaries WHERE session_id=? AND lane=? "
                f"AND superseded = {SUMMARY_VALID} AND last_message_id >= ?",
                (session, SESSION_LANE, first),
            )
            stale += [r[0] for r in await cur.fetchall()]
        for sid in stale:
            await db.execute(
                f"UPDATE summaries SET superseded = {SUMMARY_STALE} WHERE id=?", (sid,)
            )
        return len(stale)

    async def history_changed(self, session: str, group_ids: Sequence[int]) -> int:
        """The one place an edit of the history tells what was derived from it.

        Every edit that changes which rows a group has, or whether it is
        visible (drop, restore, remove, undo, trash), calls this in its own
        transaction (`_history_changed`), before the rows change: each summary
        whose span reaches a row of these groups is marked out of date, so the
        next request never carries text derived from the old history (the plan
        falls back to an older summary and sends the rest word for word until
        a new lane summary is made). The resume handoff is rebuilt from the
        ledger each time it is used, so it needs no mark. Returns how many
        summaries went out of date.
        """
        if not group_ids:
            return 0
        async with self.transaction() as db:
            return await self._history_changed(db, session, group_ids)

    async def stale_top(self, session: str, lane: str) -> int | None:
        """The last message id the lane's out-of-date summaries covered (None: none is),
        so the rows they stood for are summarized again without waiting for the
        thresholds."""
        row = await self._one(
            f"SELECT MAX(last_message_id) FROM summaries WHERE session_id=? AND lane=? "
            f"AND superseded = {SUMMARY_STALE}",
            (session, lane),
        )
        return row[0] if row else None

    async def session_summaries(self, session: str) -> list[Summary]:
        """The valid session summaries (overviews of every lane), oldest first; the
        request carries the newest."""
        return await self.summaries(session, SESSION_LANE)

    async def lane_heads(self, session: str) -> list[Summary]:
        """The newest valid summary of each lane of the session (the session summary
        aside), by lane name."""
        rows = await self._all(
            f"""SELECT * FROM summaries WHERE id IN (
                   SELECT MAX(id) FROM summaries WHERE session_id=? AND lane != ?
                   AND superseded = {SUMMARY_VALID} GROUP BY lane)
               ORDER BY lane""",
            (session, SESSION_LANE),
        )
        return [_summary(r) for r in rows]

    async def get_summary(self, session: str, summary_id: int) -> Summary | None:
        row = await self._one(
            "SELECT * FROM summaries WHERE id=? AND session_id=?", (summary_id, session)
        )
        return _summary(row) if row else None

    async def summary_state(self, summary_id: int) -> int:
        """SUMMARY_VALID, SUMMARY_DISCARDED or SUMMARY_STALE."""
        row = await self._one("SELECT superseded FROM summaries WHERE id=?", (summary_id,))
        return int(row["superseded"]) if row else SUMMARY_DISCARDED

    async def summaries(self, session: str, lane: str | None = None) -> list[Summary]:
        """The valid summaries (neither discarded nor out of date), oldest first."""
        lane_sql = " AND lane=?" if lane else ""
        params: tuple = (session, lane) if lane else (session,)
        rows = await self._all(
            f"SELECT * FROM summaries WHERE session_id=? AND superseded={SUMMARY_VALID}"
            f"{lane_sql} ORDER BY id",
            params,
        )
        return [_summary(r) for r in rows]

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
            """SELECT c.*, COALESCE(s.superseded, 0) AS summary_state FROM compaction_log c
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

    # -- URL context -------------------------------------------------------

    async def put_url_page(
        self,
        session: str,
        url: str,
        final_url: str,
        title: str,
        content: str,
        content_type: str,
    ) -> UrlPage:
        """Store a fetched page; the same address again replaces its text (and keeps
        its place in the list)."""
        async with self.transaction() as db:
            await self._ensure_session(db, session)  # type: ignore[attr-defined]
            await db.execute(
                """INSERT INTO url_pages(session_id, url, final_url, title, content,
                       content_type, fetched_at) VALUES (?,?,?,?,?,?,?)
                   ON CONFLICT(session_id, url) DO UPDATE SET final_url=excluded.final_url,
                       title=excluded.title, content=excluded.content,
                       content_type=excluded.content_type, fetched_at=excluded.fetched_at""",
                (session, url, final_url, title, content, content_type, now()),
            )
        row = await self._one(
            "SELECT * FROM url_pages WHERE session_id=? AND url=?", (session, url)
        )
        assert row is not None
        return _url_page(row)

    async def url_pages(self, session: str) -> list[UrlPage]:
        """The session's pages in the order they were first added."""
        rows = await self._all("SELECT * FROM url_pages WHERE session_id=? ORDER BY id", (session,))
        return [_url_page(r) for r in rows]

    async def remove_url_page(self, session: str, page_id: int) -> bool:
        async with self.transaction() as db:
            cur = await db.execute(
                "DELETE FROM url_pages WHERE session_id=? AND id=?", (session, page_id)
            )
            return cur.rowcount > 0

    # -- MCP resources -----------------------------------------------------

    async def put_mcp_resource(
        self, session: str, server: str, uri: str, name: str, mime: str, content: str
    ) -> McpResource:
        """Store a resource's text; the same server and URI again replaces it (and keeps
        its place in the list)."""
        async with self.transaction() as db:
            await self._ensure_session(db, session)  # type: ignore[attr-defined]
            await db.execute(
                """INSERT INTO mcp_resources(session_id, server, uri, name, mime, content,
                       read_at) VALUES (?,?,?,?,?,?,?)
                   ON CONFLICT(session_id, server, uri) DO UPDATE SET name=excluded.name,
                       mime=excluded.mime, content=excluded.content, read_at=excluded.read_at""",
                (session, server, uri, name, mime, content, now()),
            )
        row = await self._one(
            "SELECT * FROM mcp_resources WHERE session_id=? AND server=? AND uri=?",
            (session, server, uri),
        )
        assert row is not None
        return _mcp_resource(row)

    async def mcp_resources(self, session: str) -> list[McpResource]:
        """The session's resources in the order they were first added."""
        rows = await self._all(
            "SELECT * FROM mcp_resources WHERE session_id=? ORDER BY id", (session,)
        )
        return [_mcp_resource(r) for r in rows]

    async def remove_mcp_resource(self, session: str, resource_id: int) -> bool:
        async with self.transaction() as db:
            cur = await db.execute(
                "DELETE FROM mcp_resources WHERE session_id=? AND id=?", (session, resource_id)
            )
            return cur.rowcount > 0

    # -- images ------------------------------------------------------------

    async def add_image(
        self,
        session: str,
        sha256: str,
        name: str,
        mime: str,
        width: int,
        height: int,
        size: int,
        message_id: int | None = None,
    ) -> ImageRef:
        """An image for the session's next prompt, or of the message `message_id` (a tool
        result that read an image)."""
        async with self.transaction() as db:
            await self._ensure_session(db, session)  # type: ignore[attr-defined]
            cur = await db.execute(
                """INSERT INTO images(session_id, message_id, sha256, name, mime, width, height,
                       size, added_at) VALUES (?,?,?,?,?,?,?,?,?)""",
                (session, message_id, sha256, name, mime, width, height, size, now()),
            )
            image_id = cur.lastrowid
        row = await self._one("SELECT * FROM images WHERE id=?", (image_id,))
        assert row is not None
        return _image(row)

    async def pending_images(self, session: str) -> list[ImageRef]:
        """Images waiting for the session's next prompt, in the order they were added."""
        rows = await self._all(
            "SELECT * FROM images WHERE session_id=? AND message_id IS NULL ORDER BY id",
            (session,),
        )
        return [_image(r) for r in rows]

    async def remove_pending_image(self, session: str, image_id: int) -> bool:
        async with self.transaction() as db:
            cur = await db.execute(
                "DELETE FROM images WHERE session_id=? AND id=? AND message_id IS NULL",
                (session, image_id),
            )
            return cur.rowcount > 0

    async def message_images(self, message_ids: Collection[int]) -> dict[int, list[ImageRef]]:
        """The images of each of `message_ids` that has any."""
        out: dict[int, list[ImageRef]] = {}
        ids = list(message_ids)
        for at in range(0, len(ids), 500):
            chunk = ids[at : at + 500]
            marks = ",".join("?" * len(chunk))
            rows = await self._all(
                f"SELECT * FROM images WHERE message_id IN ({marks}) ORDER BY id", tuple(chunk)
            )
            for r in rows:
                out.setdefault(r["message_id"], []).append(_image(r))
        return out

    # -- lanes -------------------------------------------------------------

    async def summarized_lanes(self, session: str) -> list[str]:
        """The lanes of the session that have a valid summary."""
        rows = await self._all(
            f"SELECT DISTINCT lane FROM summaries WHERE session_id=? AND lane != ? "
            f"AND superseded = {SUMMARY_VALID} ORDER BY lane",
            (session, SESSION_LANE),
        )
        return [r["lane"] for r in rows]

    async def lanes(self, session: str) -> list[LaneInfo]:
        """Every lane with messages in the session: `main` first, then newest first."""
        rows = await self._all(
            f"""WITH tops AS (
                   SELECT lane, MAX(last_message_id) AS top, MAX(created_at) AS at
                   FROM summaries WHERE session_id = :s AND superseded = {SUMMARY_VALID}
                   GROUP BY lane)
               SELECT m.lane AS lane,
                   COUNT(DISTINCT CASE WHEN m.status NOT IN {_HIDDEN} THEN m.group_id END)
                       AS groups,
                   SUM(m.status NOT IN {_HIDDEN}) AS visible,
                   SUM(CASE WHEN m.status NOT IN {_HIDDEN} THEN m.tokens ELSE 0 END) AS tokens,
                   SUM(m.status NOT IN {_HIDDEN} AND m.id <= COALESCE(t.top, 0)) AS summarized,
                   MAX(m.created_at) AS last_used, t.at AS last_summary_at
               FROM messages m LEFT JOIN tops t ON t.lane = m.lane
               WHERE m.session_id = :s AND m.group_id IS NOT NULL
               GROUP BY m.lane""",
            {"s": session},
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
        self,
        session: str,
        lane: str,
        before_group: int | None,
        after_id: int = 0,
        limit: int | None = None,
        *,
        newest: bool = False,
        hide: Collection[int] = (),
        show: Collection[int] = (),
    ) -> list[Message]:
        """The lane's visible rows of groups older than `before_group` (None: every
        group) with ids above `after_id`, oldest group first.

        What lies between a summary and the window: the context plan sends the
        newest of them (`newest=True`: the last `limit` rows), the lane summary
        folds the oldest (`limit` rows from the start). The `Message` records
        are built in the database thread, so a long backlog does not hold the
        event loop. `hide` and `show` as in `Ledger.window`.
        """
        if limit is not None and limit <= 0:
            return []
        visible, cols, extra = what_if(hide, show)
        bound = "" if before_group is None else " AND group_id < :before"
        # In the order of ix_messages_session_lane_group (group, then id): the LIMIT stops
        # the scan early. Ordered by id alone, SQLite sorted every row of the lane (its
        # text included) first: 30 ms for a 5,000-message session.
        order = "group_id DESC, id DESC" if newest else "group_id, id"
        sql = f"""SELECT {cols} FROM messages
            WHERE session_id = :s AND lane = :lane AND group_id IS NOT NULL
              AND {visible} AND id > :after{bound}
            ORDER BY {order} LIMIT :limit"""
        params = {
            **extra,
            "s": session,
            "lane": lane,
            "before": before_group,
            "after": after_id,
            "limit": limit if limit is not None else -1,
        }
        cur = await self._db.cursor()
        try:
            cur.row_factory = _message_row  # applied by fetchall, in the database thread
            await cur.execute(sql, params)
            rows = list(await cur.fetchall())
        finally:
            await cur.close()
        rows.sort(key=_by_group)
        return rows

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


def _url_page(r) -> UrlPage:
    return UrlPage(
        r["id"],
        r["session_id"],
        r["url"],
        r["final_url"],
        r["title"],
        r["content"],
        r["content_type"],
        r["fetched_at"],
    )


def _mcp_resource(r) -> McpResource:
    return McpResource(
        r["id"],
        r["session_id"],
        r["server"],
        r["uri"],
        r["name"],
        r["mime"],
        r["content"],
        r["read_at"],
    )


def _image(r) -> ImageRef:
    return ImageRef(
        r["id"],
        r["session_id"],
        r["message_id"],
        r["sha256"],
        r["name"],
        r["mime"],
        r["width"],
        r["height"],
        r["size"],
        r["added_at"],
    )
