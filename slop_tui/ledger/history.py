"""Sessions, messages, groups, STATE versions and usage in the ledger."""

from __future__ import annotations

import asyncio
import json
import sqlite3
from collections.abc import Callable, Collection, Sequence
from dataclasses import replace
from operator import itemgetter

from slop_tui.ledger.core import LedgerBase, LedgerError, now
from slop_tui.records import (
    DEFAULT_LANE,
    DEFAULT_WINDOW,
    PURPOSE_TURN,
    STATUS_DROPPED,
    STATUS_SUMMARIZED,
    GroupSummary,
    HistoryHit,
    Message,
    NewMessage,
    Session,
    SessionSummary,
    Spend,
    StateVersion,
    Usage,
    UsageCost,
    UsageTotal,
)
from slop_tui.slotted import positional_builder

# Every column of a usage row but its id, session and group (`copy_session` copies them).
_USAGE_COPY = (
    "provider, model, prompt_tokens, completion_tokens, cached_tokens, created_at, purpose, "
    "reasoning_tokens, reported, cost_input, cost_cached, cost_output, cost_reasoning, "
    "cost_saved, cost_total, price_source"
)
# Spend of a set of usage rows: known cost, cached saving, calls whose price is
# unknown, calls the provider reported no usage for (`_spend` reads them back).
_COST_SUMS = (
    "COALESCE(SUM(cost_total), 0), COALESCE(SUM(cost_saved), 0), "
    "SUM(CASE WHEN cost_total IS NULL AND reported THEN 1 ELSE 0 END), "
    "SUM(CASE WHEN reported THEN 0 ELSE 1 END)"
)

_BG = f"purpose != '{PURPOSE_TURN}'"


def _spend_sql(table: str, where: str) -> str:
    """The spend of `table`'s rows that match `where`, then of their background calls
    only: two passes of `_COST_SUMS`, the second over the background rows, cheaper
    than one pass that sums the background calls apart with four more `CASE` sums
    over every row (3.5 against 4.2 ms at 10,000 calls)."""
    return f"""SELECT * FROM (SELECT COUNT(*), {_COST_SUMS} FROM {table} WHERE {where}),
                   (SELECT COUNT(*), {_COST_SUMS} FROM {table} WHERE {where} AND {_BG})"""


def _usage(row) -> Usage:
    cost = None
    if row["cost_total"] is not None:
        cost = UsageCost(
            row["cost_input"],
            row["cost_cached"],
            row["cost_output"],
            row["cost_reasoning"],
            row["cost_saved"],
            row["price_source"] or "",
        )
    return Usage(
        row["id"],
        row["session_id"],
        row["group_id"],
        row["provider"],
        row["model"],
        row["prompt_tokens"],
        row["completion_tokens"],
        row["cached_tokens"],
        row["created_at"],
        row["reasoning_tokens"],
        bool(row["reported"]),
        cost,
        row["purpose"],
    )


def _spend(row, start: int) -> tuple[float, float, int, int]:
    return (row[start], row[start + 1], row[start + 2] or 0, row[start + 3] or 0)


# Texts longer than this are token-counted in a thread (see `HistoryMixin._counted`).
THREAD_COUNT_CHARS = 50_000

_MSG_COLS = (
    "id, session_id, group_id, lane, role, content, status, payload, tool_call_id, "
    "tool_name, parsing_strategy, tokens, created_at"
)
_row_group = itemgetter(2, 0)  # (`group_id`, `id`): the third and first of `_MSG_COLS`
_HIDDEN = f"('{STATUS_DROPPED}','{STATUS_SUMMARIZED}')"


# `_MSG_COLS` lists the columns in Message's field order, so a row maps
# positionally (`_message(*row)`), without the frozen-dataclass `__init__`:
# a long session's full history is 2,000 rows per request (see slotted.py).
_message: Callable[..., Message] = positional_builder(Message)


def _group_rows(*columns: list) -> list[tuple]:
    """`group_rows`' arrays as its rows; the last, the creation times, as text."""
    return list(zip(*columns[:-1], map(float, columns[-1]), strict=True))


def _by_id(ids: list[int], texts: list[str]) -> dict[int, str]:
    return dict(zip(ids, texts, strict=True))


def _session(r: sqlite3.Row) -> Session:
    return Session(
        name=r["name"],
        window_size=r["window_size"],
        scratchpad=r["scratchpad"],
        provider=r["provider"],
        model=r["model"],
        lane=r["lane"],
        created_at=r["created_at"],
        updated_at=r["updated_at"],
        message_count=r["message_count"],
        token_total=r["token_total"],
    )


def what_if(hide: Collection[int], show: Collection[int]) -> tuple[str, str, dict]:
    """(visibility condition, columns, parameters) of a read of the history as it would
    be with the groups of `hide` dropped and those of `show` restored."""
    visible = f"status NOT IN {_HIDDEN}"
    cols = _MSG_COLS
    params: dict = {}
    if show:
        marks = ",".join(f":show{i}" for i in range(len(show)))
        params.update({f"show{i}": g for i, g in enumerate(show)})
        visible = f"({visible} OR (status = '{STATUS_DROPPED}' AND group_id IN ({marks})))"
        cols = _MSG_COLS.replace(
            " status,",
            f" CASE WHEN status = '{STATUS_DROPPED}' AND group_id IN ({marks}) "
            "THEN COALESCE(status_before, 'completed') ELSE status END,",
        )
    if hide:
        marks = ",".join(f":hide{i}" for i in range(len(hide)))
        params.update({f"hide{i}": g for i, g in enumerate(hide)})
        visible = f"{visible} AND group_id NOT IN ({marks})"
    return visible, cols, params


def check_session_name(name: str) -> str:
    """Names are taken literally; only empty or whitespace-only names are refused."""
    if not isinstance(name, str) or not name.strip():
        raise LedgerError("a session name cannot be empty.")
    if "\x00" in name:
        raise LedgerError("a session name cannot contain a NUL character.")
    return name


def snippet(text: str, width: int = 60) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= width else flat[: width - 1] + "…"


def word_start(text: str, start: int, reach: int = 20) -> int:
    """`start` moved back to the beginning of the word it falls in (at most `reach`
    characters back; forward past the word when it is longer): a snippet starts at
    a word, never inside one."""
    if start <= 0 or text[start - 1].isspace():
        return max(0, start)
    back = start
    while back > 0 and start - back < reach and not text[back - 1].isspace():
        back -= 1
    if back == 0 or text[back - 1].isspace():
        return back
    ahead = start
    while ahead < len(text) and not text[ahead].isspace():
        ahead += 1
    while ahead < len(text) and text[ahead].isspace():
        ahead += 1
    return ahead if ahead < len(text) else start


def new_prompt(text: str, strategy: str | None, reply_to: int | None) -> NewMessage:
    """A user prompt to write; `reply_to` is kept in its payload (`{"reply_to": GID}`)."""
    payload = json.dumps({"reply_to": reply_to}) if reply_to is not None else None
    return NewMessage(role="user", content=text, strategy=strategy, payload=payload)


class HistoryMixin(LedgerBase):
    # -- sessions ----------------------------------------------------------

    async def get_session(self, name: str) -> Session | None:
        row = await self._one("SELECT * FROM sessions WHERE name=?", (name,))
        return _session(row) if row else None

    async def session_or_default(self, name: str) -> Session:
        """The stored session, or the defaults a not-yet-written session has."""
        return await self.get_session(name) or Session(name=name, window_size=self.default_window)

    async def _ensure_session(self, db, name: str) -> None:
        t = now()
        await db.execute(
            "INSERT OR IGNORE INTO sessions(name, window_size, created_at, updated_at) "
            "VALUES (?,?,?,?)",
            (check_session_name(name), self.default_window, t, t),
        )

    async def ensure_session(self, name: str) -> Session:
        async with self.transaction() as db:
            await self._ensure_session(db, name)
        return await self.session_or_default(name)

    async def list_sessions(self) -> list[SessionSummary]:
        # The preview is the session's first grouped prompt. Ordering by
        # (group_id, id) walks ix_messages_session_group and stops at the first
        # row; ordering by id alone read and sorted every row of every session
        # (3.2 s at 1,000,000 messages).
        rows = await self._all(
            """SELECT s.name, s.message_count, s.token_total, s.updated_at,
                  (SELECT COUNT(DISTINCT group_id) FROM messages
                     WHERE session_id = s.name AND group_id IS NOT NULL) AS groups,
                  (SELECT content FROM messages
                     WHERE session_id = s.name AND group_id IS NOT NULL AND role = 'user'
                     ORDER BY group_id, id LIMIT 1) AS preview
               FROM sessions s ORDER BY s.updated_at DESC, s.name"""
        )
        return [
            SessionSummary(
                name=r["name"],
                groups=r["groups"],
                messages=r["message_count"],
                tokens=r["token_total"],
                last_used=r["updated_at"],
                preview=snippet(r["preview"] or ""),
            )
            for r in rows
        ]

    async def clone_session(self, source: str, target: str) -> Session:
        """Copy messages, STATE, scratchpad, usage and summaries in one transaction."""
        check_session_name(target)
        if target == source:  # the source is created lazily below, so check first
            raise LedgerError(f"session '{target}' already exists; pick another name.")
        async with self.transaction() as db:
            cur = await db.execute(
                "SELECT 1 FROM sessions WHERE name=? UNION ALL "
                "SELECT 1 FROM messages WHERE session_id=? LIMIT 1",
                (target, target),
            )
            if await cur.fetchone():
                raise LedgerError(f"session '{target}' already exists; pick another name.")
            await self._ensure_session(db, source)
            t = now()
            await db.execute(
                """INSERT INTO sessions(name, window_size, scratchpad, provider, model, lane,
                       created_at, updated_at)
                   SELECT ?, window_size, scratchpad, provider, model, lane, ?, ?
                   FROM sessions WHERE name=?""",
                (target, t, t, source),
            )
            # New ids are the old ones shifted past every id ever used, so group
            # ids (the id of each group's user message) stay consistent.
            row = await (
                await db.execute("SELECT MIN(id) AS lo FROM messages WHERE session_id=?", (source,))
            ).fetchone()
            if row["lo"] is not None:
                seq = await (
                    await db.execute(
                        "SELECT COALESCE((SELECT seq FROM sqlite_sequence WHERE name='messages'),0)"
                    )
                ).fetchone()
                delta = seq[0] + 1 - row["lo"]
                await db.execute(
                    """INSERT INTO messages(id, session_id, group_id, lane, role, content, payload,
                           tool_call_id, tool_name, status, status_before, parsing_strategy,
                           tokens, created_at)
                       SELECT id + :d, :t, group_id + :d, lane, role, content, payload,
                           tool_call_id, tool_name, status, status_before, parsing_strategy,
                           tokens, created_at
                       FROM messages WHERE session_id = :s ORDER BY id""",
                    {"d": delta, "t": target, "s": source},
                )
            else:
                delta = 0
            await db.execute(
                """INSERT INTO state_versions(session_id, group_id, content, created_at)
                   SELECT ?, group_id + ?, content, created_at FROM state_versions
                   WHERE session_id=? ORDER BY id""",
                (target, delta, source),
            )
            await db.execute(
                f"""INSERT INTO usage(session_id, group_id, {_USAGE_COPY})
                   SELECT ?, group_id + ?, {_USAGE_COPY} FROM usage WHERE session_id=? ORDER BY id""",
                (target, delta, source),
            )
            await db.execute(
                """INSERT INTO summaries(session_id, lane, kind, first_message_id,
                       last_message_id, content, version, created_at)
                   SELECT ?, lane, kind, first_message_id + ?, last_message_id + ?, content,
                       version, created_at FROM summaries WHERE session_id=? ORDER BY id""",
                (target, delta, delta, source),
            )
        return await self.session_or_default(target)

    async def _update_session(self, name: str, column: str, value: object, guard=None) -> Session:
        """Set one column of a session; `guard(db)` may refuse inside the same write."""
        async with self.transaction() as db:
            if guard is not None:
                await guard(db)
            await self._ensure_session(db, name)
            await db.execute(
                f"UPDATE sessions SET {column}=?, updated_at=? WHERE name=?", (value, now(), name)
            )
        return await self.session_or_default(name)

    async def set_window(self, name: str, size: int) -> Session:
        if size < 0:
            raise LedgerError("the window size must be 0 (full history) or more.")
        return await self._update_session(name, "window_size", size)

    async def set_scratchpad(self, name: str, text: str) -> Session:
        return await self._update_session(name, "scratchpad", text)

    async def set_lane(self, name: str, lane: str) -> Session:
        return await self._update_session(name, "lane", lane)

    async def set_provider(self, name: str, provider: str | None, model: str | None) -> Session:
        async with self.transaction() as db:
            await self._ensure_session(db, name)
            await db.execute(
                "UPDATE sessions SET provider=?, model=?, updated_at=? WHERE name=?",
                (provider, model, now(), name),
            )
        return await self.session_or_default(name)

    # -- messages ----------------------------------------------------------

    async def _counted(self, messages: Sequence[NewMessage]) -> list[NewMessage]:
        """`messages` with the token counts of long texts filled in, off the event loop.

        Counting a 10 MB paste or a 5 MB tool output takes seconds; done here,
        before the write transaction, neither the UI nor the database lock (another
        workspace may be waiting on it) waits for it. Short texts are counted
        inline by `_insert`: a thread hop would cost more than the count.
        """
        out = []
        for m in messages:
            if m.tokens is None and len(m.content) > THREAD_COUNT_CHARS:
                m = replace(m, tokens=await asyncio.to_thread(self.count_tokens, m.content))
            out.append(m)
        return out

    async def _insert(self, db, session: str, group_id: int | None, m: NewMessage, lane: str):
        tokens = m.tokens if m.tokens is not None else self.count_tokens(m.content)
        cur = await db.execute(
            """INSERT INTO messages(session_id, group_id, lane, role, content, payload,
                   tool_call_id, tool_name, status, parsing_strategy, tokens, created_at)
               VALUES (?,?,?,?,?,?,?,?,?,?,?,?)""",
            (
                session,
                group_id,
                m.lane or lane,
                m.role,
                m.content,
                m.payload,
                m.tool_call_id,
                m.tool_name,
                m.status,
                m.strategy,
                tokens,
                now(),
            ),
        )
        return cur.lastrowid

    async def _session_lane(self, db, session: str) -> str:
        cur = await db.execute("SELECT lane FROM sessions WHERE name=?", (session,))
        row = await cur.fetchone()
        return row["lane"] if row else DEFAULT_LANE

    async def append_user(
        self,
        session: str,
        text: str,
        *,
        lane: str | None = None,
        strategy: str | None = None,
        reply_to: int | None = None,
    ) -> Message:
        """Write a user prompt; it opens a new group whose id is the prompt's own id.

        `reply_to`: the group the prompt replies to, kept with the prompt
        (`payload` `{"reply_to": GID}`) when it stays in its lane (a reply from a
        topic lane: seed 002's topic > reply)."""
        (prompt,) = await self._counted([new_prompt(text, strategy, reply_to)])
        async with self.transaction() as db:
            msg_id = await self._write_prompt(db, session, prompt, lane)
        msg = await self.get_message(msg_id)
        assert msg is not None
        return msg

    async def _write_prompt(self, db, session: str, prompt: NewMessage, lane: str | None) -> int:
        """Insert a (counted) user prompt as a new group, inside a transaction; its id."""
        await self._ensure_session(db, session)
        lane = lane or await self._session_lane(db, session)
        msg_id = await self._insert(db, session, None, prompt, lane)
        await db.execute("UPDATE messages SET group_id=id WHERE id=?", (msg_id,))
        # Images added for the next prompt (from any process) go with this one.
        await db.execute(
            "UPDATE images SET message_id=? WHERE session_id=? AND message_id IS NULL",
            (msg_id, session),
        )
        return msg_id

    async def append(
        self, session: str, group_id: int | None, messages: Sequence[NewMessage]
    ) -> list[Message]:
        """Append messages to a group in one transaction (one user-visible event).

        The group's prompt must be in the session: rows never land in a group that
        was moved to the trash (or belongs to another session), so no orphan answer
        can appear without its prompt; that is a `LedgerError` and nothing is written.
        """
        messages = await self._counted(messages)
        ids: list[int] = []
        async with self.transaction() as db:
            await self._ensure_session(db, session)
            lane = DEFAULT_LANE
            if group_id is not None:
                cur = await db.execute(
                    "SELECT lane FROM messages WHERE id=? AND session_id=?", (group_id, session)
                )
                row = await cur.fetchone()
                if row is None:
                    raise LedgerError(
                        f"group {group_id} is no longer in session '{session}' (it was moved "
                        "to the trash); nothing was written to it."
                    )
                lane = row["lane"]
            for m in messages:
                ids.append(await self._insert(db, session, group_id, m, lane))
        return await self.messages_by_ids(ids)

    async def update_message(
        self,
        message_id: int,
        *,
        content: str | None = None,
        status: str | None = None,
        payload: str | None = None,
        tokens: int | None = None,
    ) -> Message | None:
        sets: list[str] = []
        params: list[object] = []
        if content is not None:
            sets.append("content=?")
            params.append(content)
            if tokens is None:
                tokens = self.count_tokens(content)
        for col, val in (("status", status), ("payload", payload), ("tokens", tokens)):
            if val is not None:
                sets.append(f"{col}=?")
                params.append(val)
        if sets:
            async with self.transaction() as db:
                await db.execute(
                    f"UPDATE messages SET {', '.join(sets)} WHERE id=?", (*params, message_id)
                )
        return await self.get_message(message_id)

    async def get_message(self, message_id: int) -> Message | None:
        row = await self._one(f"SELECT {_MSG_COLS} FROM messages WHERE id=?", (message_id,))
        return _message(*row) if row else None

    async def messages_by_ids(self, ids: Sequence[int]) -> list[Message]:
        if not ids:
            return []
        marks = ",".join("?" * len(ids))
        rows = await self._all(
            f"SELECT {_MSG_COLS} FROM messages WHERE id IN ({marks}) ORDER BY id", ids
        )
        return [_message(*r) for r in rows]

    async def window(
        self,
        session: str,
        size: int,
        lane: str | None = None,
        *,
        hide: Collection[int] = (),
        show: Collection[int] = (),
    ) -> list[Message]:
        """Rows of the last `size` visible groups (0: all), oldest first.

        Dropped rows neither appear nor count; rows without a group never
        appear. `hide` and `show` read the window as it would be after an edit
        (a projection): the groups of `hide` as if dropped, those of `show` as
        if restored (their rows with the status they had before the drop).
        """
        visible, cols, extra = what_if(hide, show)
        lane_sql = " AND lane = :lane" if lane else ""
        params = {"s": session, "n": size, "lane": lane, **extra}
        if size <= 0:
            sql = (
                f"SELECT {cols} FROM messages WHERE session_id = :s AND group_id IS NOT NULL "
                f"AND {visible}{lane_sql}"
            )
        else:
            sql = f"""SELECT {cols} FROM messages
                WHERE session_id = :s AND {visible} AND group_id IN (
                    SELECT group_id FROM messages
                    WHERE session_id = :s AND group_id IS NOT NULL
                      AND {visible}{lane_sql}
                    GROUP BY group_id ORDER BY group_id DESC LIMIT :n)"""
        # No ORDER BY: SQLite would copy every row (megabytes of text for a long
        # session's full history) through a temporary B-tree to sort it; the
        # rows come in index order (group, id) and are sorted here instead, group
        # by group (context/window.py says why).
        rows = await self._tuples(sql, params)
        rows.sort(key=_row_group)
        return [_message(*r) for r in rows]

    async def session_messages(self, session: str) -> list[Message]:
        """Every row of a session, dropped ones included, oldest first."""
        rows = await self._all(
            f"SELECT {_MSG_COLS} FROM messages WHERE session_id=? ORDER BY id", (session,)
        )
        return [_message(*r) for r in rows]

    async def group_messages(self, session: str, group_id: int) -> list[Message]:
        rows = await self._all(
            f"SELECT {_MSG_COLS} FROM messages WHERE session_id=? AND group_id=? ORDER BY id",
            (session, group_id),
        )
        return [_message(*r) for r in rows]

    async def message_snapshots(self, session: str, group_id: int) -> dict[int, tuple[int, int]]:
        """Seed 000's token snapshot of the group's messages: for each assistant message,
        (prompt, completion) tokens of the provider call that produced it (the group's
        calls in order, one per assistant message); each tool result shares the snapshot
        of the assistant message that called it. Messages without a recorded call have
        none."""
        calls = await self._tuples(
            "SELECT prompt_tokens, completion_tokens FROM usage "
            "WHERE session_id=? AND group_id=? AND purpose=? ORDER BY id",
            (session, group_id, PURPOSE_TURN),
        )
        rows = await self._tuples(
            "SELECT id, role FROM messages WHERE session_id=? AND group_id=? "
            "AND status != 'interrupted' ORDER BY id",
            (session, group_id),
        )
        out: dict[int, tuple[int, int]] = {}
        made = iter(calls)
        current: tuple[int, int] | None = None
        for mid, role in rows:
            if role == "assistant":
                current = next(made, None)
                if current is None:
                    break
                out[mid] = (int(current[0]), int(current[1]))
            elif role == "tool" and current is not None:
                out[mid] = (int(current[0]), int(current[1]))
        return out

    async def next_message_id(self) -> int:
        """The id the next message written will get (`AUTOINCREMENT` never reuses one)."""
        row = await self._one("SELECT seq FROM sqlite_sequence WHERE name='messages'", ())
        return (row["seq"] if row else 0) + 1

    async def group_snapshots(
        self, session: str, group_ids: Sequence[int]
    ) -> dict[int, tuple[int, int]]:
        """Seed 000's token snapshot of each group: (prompt, completion) tokens of the last
        provider call the group's turn made, its weight in the model's context when it
        ended. Groups without a recorded call have none."""
        if not group_ids:
            return {}
        marks = ",".join("?" * len(group_ids))
        rows = await self._tuples(
            f"""SELECT group_id, prompt_tokens, completion_tokens FROM usage WHERE id IN (
                   SELECT MAX(id) FROM usage WHERE session_id=? AND purpose=?
                   AND group_id IN ({marks}) GROUP BY group_id)""",
            (session, PURPOSE_TURN, *group_ids),
        )
        return {int(g): (int(p), int(c)) for g, p, c in rows}

    async def last_group_id(self, session: str, *, visible: bool = True) -> int | None:
        """The newest group; with `visible`, the newest one not dropped (what /undo takes)."""
        hidden = " AND status != 'dropped'" if visible else ""
        row = await self._one(
            f"SELECT MAX(group_id) AS g FROM messages WHERE session_id=?{hidden}", (session,)
        )
        return row["g"] if row else None

    async def list_groups(
        self, session: str, limit: int | None = None, lane: str | None = None
    ) -> list[GroupSummary]:
        """Groups of a session, newest first."""
        lane_sql = " AND m.lane = :lane" if lane else ""
        rows = await self._all(
            f"""SELECT m.group_id AS gid, MIN(m.lane) AS lane, COUNT(*) AS n,
                   SUM(m.tokens) AS tokens, MIN(m.created_at) AS created,
                   MAX(m.status = 'dropped') AS dropped,
                   MAX(m.status = 'summarized') AS summarized,
                   MAX(m.status = 'interrupted') AS interrupted,
                   MAX(m.status = 'error') AS error,
                   (SELECT content FROM messages u WHERE u.id = m.group_id) AS prompt
               FROM messages m WHERE m.session_id = :s AND m.group_id IS NOT NULL{lane_sql}
               GROUP BY m.group_id ORDER BY m.group_id DESC LIMIT :n""",
            {"s": session, "n": limit if limit else -1, "lane": lane},
        )
        out = []
        for r in rows:
            status = "completed"
            for name in ("dropped", "summarized", "interrupted", "error"):
                if r[name]:
                    status = name
                    break
            out.append(
                GroupSummary(
                    group_id=r["gid"],
                    lane=r["lane"],
                    prompt=r["prompt"] or "",
                    messages=r["n"],
                    tokens=r["tokens"] or 0,
                    status=status,
                    created_at=r["created"],
                )
            )
        return out

    async def group_rows(
        self, session: str, prompt_chars: int = 240, *, prompts_for_newest: int | None = None
    ) -> list[tuple]:
        """The workspace's group list in one query: plain tuples, oldest first.

        Each row has `GroupSummary`'s fields in order (`GroupSummary(*row)`
        builds one), except that `prompt` is only the first `prompt_chars`
        characters: a list line shows a snippet, and 5,000 whole prompts are
        megabytes. One pass over `ix_messages_group_list`, which holds every
        column read but the prompt; the status is the worst of the group,
        ranked as in `list_groups`. Read as one row of arrays (`_read_arrays`:
        5,000 groups are otherwise 5,000 hand-overs of the interpreter lock);
        the creation time as text of 17 digits, which gives the stored float back.

        `prompts_for_newest`: only the newest that many groups carry their prompt;
        the others have None (`group_prompts` reads them). Reading each group's
        prompt row is most of the query's time in a long session.
        """
        if prompts_for_newest is None:
            bound = "-1"
        else:
            bound = """COALESCE((SELECT DISTINCT g.group_id FROM messages g
                                 WHERE g.session_id = :s AND g.group_id IS NOT NULL
                                 ORDER BY g.group_id DESC LIMIT 1 OFFSET :skip), -1)"""
        return await self._arrays(
            f"""SELECT json_group_array(gid), json_group_array(lane),
                   json_group_array(prompt), json_group_array(n), json_group_array(tokens),
                   json_group_array(status), json_group_array(printf('%!.17g', created))
               FROM (SELECT m.group_id AS gid, MIN(m.lane) AS lane,
                   CASE WHEN m.group_id >= ({bound}) THEN
                   COALESCE((SELECT substr(u.content, 1, :chars) FROM messages u
                             WHERE u.id = m.group_id), '') END AS prompt,
                   COUNT(*) AS n, COALESCE(SUM(m.tokens), 0) AS tokens,
                   CASE MAX(CASE m.status WHEN 'dropped' THEN 4 WHEN 'summarized' THEN 3
                                          WHEN 'interrupted' THEN 2 WHEN 'error' THEN 1
                                          ELSE 0 END)
                       WHEN 4 THEN 'dropped' WHEN 3 THEN 'summarized'
                       WHEN 2 THEN 'interrupted' WHEN 1 THEN 'error' ELSE 'completed' END
                       AS status,
                   MIN(m.created_at) AS created
               FROM messages m WHERE m.session_id = :s AND m.group_id IS NOT NULL
               GROUP BY m.group_id ORDER BY m.group_id)""",
            {"s": session, "chars": prompt_chars, "skip": max(0, (prompts_for_newest or 1) - 1)},
            _group_rows,
        )

    async def group_ids(self, session: str) -> list[int]:
        """Every group id of `session`, oldest first: what `group_rows` lists, without
        aggregating each group's rows (a fifth of its time in a 20,000-message
        session). One row (`_read_arrays`)."""
        return await self._arrays(
            "SELECT json_group_array(group_id) FROM (SELECT DISTINCT group_id FROM messages "
            "WHERE session_id = ? AND group_id IS NOT NULL ORDER BY group_id)",
            (session,),
            list,
        )

    async def group_prompts(
        self, session: str, below: int, prompt_chars: int = 240
    ) -> dict[int, str]:
        """The first `prompt_chars` characters of the prompt of each group of `session`
        whose id is below `below` (what `group_rows(prompts_for_newest=...)` left out).
        One row (`_read_arrays`); a prompt's `content` is never NULL."""
        return await self._arrays(
            "SELECT json_group_array(id), json_group_array(substr(content, 1, ?)) "
            "FROM messages WHERE session_id = ? AND group_id < ? AND id = group_id",
            (prompt_chars, session, below),
            _by_id,
        )

    async def set_group_dropped(self, session: str, group_id: int, dropped: bool) -> int:
        """Soft drop (or restore) a group without a journal entry; returns how many rows
        changed. User edits go through `Ledger.drop_group`, which journals them."""
        async with self.transaction() as db:
            return await self._set_dropped(db, session, group_id, dropped)

    async def _set_dropped(self, db, session: str, group_id: int, dropped: bool) -> int:
        await self._history_changed(db, session, [group_id])  # type: ignore[attr-defined]
        if dropped:
            cur = await db.execute(
                "UPDATE messages SET status_before=status, status='dropped' "
                "WHERE session_id=? AND group_id=? AND status!='dropped'",
                (session, group_id),
            )
        else:
            cur = await db.execute(
                "UPDATE messages SET status=COALESCE(status_before,'completed'), "
                "status_before=NULL WHERE session_id=? AND group_id=? AND status='dropped'",
                (session, group_id),
            )
        return cur.rowcount

    async def mark_failed_prompt(self, session: str, group_id: int) -> bool:
        """Give a group's prompt the error mark when its turn ended before any answer.

        "Any answer": any assistant or tool row, a partial (interrupted) reply too.
        A prompt so marked is shown with `!` and never replayed (context/isolation.py
        replays only completed user rows), so it is not merged into the next turn;
        `/retry` sends it again. Returns whether the prompt was marked.
        """
        async with self.transaction() as db:
            return await self._mark_failed(db, session, group_id)

    async def _mark_failed(self, db, session: str, group_id: int) -> bool:
        cur = await db.execute(
            """UPDATE messages SET status_before=status, status='error'
               WHERE id=:g AND session_id=:s AND role='user' AND status='completed'
                 AND NOT EXISTS (
                   SELECT 1 FROM messages a WHERE a.session_id=:s AND a.group_id=:g
                     AND a.id != :g AND a.role IN ('assistant','tool'))""",
            {"g": group_id, "s": session},
        )
        return cur.rowcount > 0

    async def failed_prompts(self, session: str) -> list[int]:
        """Groups whose prompt carries the error mark (see `mark_failed_prompt`), newest first."""
        rows = await self._tuples(
            "SELECT id FROM messages WHERE session_id=? AND role='user' AND id=group_id "
            "AND status='error' ORDER BY id DESC",
            (session,),
        )
        return [r[0] for r in rows]

    async def set_message_status(self, message_id: int, status: str) -> None:
        async with self.transaction() as db:
            await db.execute(
                "UPDATE messages SET status_before=status, status=? WHERE id=?",
                (status, message_id),
            )

    async def search_history(
        self, text: str, role: str | None = None, limit: int = 20
    ) -> list[HistoryHit]:
        """Case-insensitive substring search across all sessions, newest first.

        An ASCII query uses SQLite's LIKE (it folds ASCII case, and is fast); any
        other is matched on Unicode case-folded text (`slop_fold`, a Python
        function called per row: `ärger` finds `Ärger`, `STRAßE` finds `Straße`).
        """
        if not text:
            return []
        role_sql = " AND role = :role" if role else ""
        if text.isascii():
            pattern = "%" + text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            match_sql, args = "content LIKE :p ESCAPE '\\'", {"p": pattern}
        else:
            match_sql, args = "instr(slop_fold(content), :p) > 0", {"p": text.casefold()}
        rows = await self._all(
            f"""SELECT id, session_id, group_id, role, content, created_at FROM messages
                WHERE {match_sql}{role_sql} AND status != 'dropped'
                ORDER BY id DESC LIMIT :n""",
            {**args, "role": role, "n": limit},
        )
        hits = []
        for r in rows:
            content = r["content"]
            at = content.casefold().find(text.casefold())
            start = word_start(content, max(0, at - 30)) if at >= 0 else 0
            hits.append(
                HistoryHit(
                    message_id=r["id"],
                    session=r["session_id"],
                    group_id=r["group_id"],
                    role=r["role"],
                    snippet=("…" if start else "") + snippet(content[start : start + 200], 79),
                    created_at=r["created_at"],
                )
            )
        return hits

    # -- STATE -------------------------------------------------------------

    async def add_state(self, session: str, group_id: int | None, content: str) -> StateVersion:
        t = now()
        async with self.transaction() as db:
            await self._ensure_session(db, session)
            cur = await db.execute(
                "INSERT INTO state_versions(session_id, group_id, content, created_at) "
                "VALUES (?,?,?,?)",
                (session, group_id, content, t),
            )
            sid = cur.lastrowid
        return StateVersion(sid, session, group_id, content, t)

    async def current_state(self, session: str) -> StateVersion | None:
        """The newest STATE whose group is still present and not dropped."""
        row = await self._one(
            """SELECT * FROM state_versions sv WHERE session_id = ? AND (
                   sv.group_id IS NULL OR EXISTS (
                       SELECT 1 FROM messages m WHERE m.id = sv.group_id AND m.status != 'dropped'))
               ORDER BY id DESC LIMIT 1""",
            (session,),
        )
        if not row:
            return None
        return StateVersion(
            row["id"], row["session_id"], row["group_id"], row["content"], row["created_at"]
        )

    async def state_versions(self, session: str) -> list[StateVersion]:
        rows = await self._all(
            "SELECT * FROM state_versions WHERE session_id=? ORDER BY id", (session,)
        )
        return [
            StateVersion(r["id"], r["session_id"], r["group_id"], r["content"], r["created_at"])
            for r in rows
        ]

    # -- usage -------------------------------------------------------------

    async def record_usage(
        self,
        session: str,
        group_id: int | None,
        provider: str,
        model: str,
        prompt_tokens: int,
        completion_tokens: int,
        cached_tokens: int = 0,
        *,
        purpose: str = PURPOSE_TURN,
        reasoning_tokens: int = 0,
        reported: bool = True,
        cost: UsageCost | None = None,
    ) -> Usage:
        """Store one provider call; `purpose` is `turn` for the conversation's own
        requests, else what the background call was for (`summary`, `compaction`,
        `boundary`, `rebuild`). `cost` None: price unknown; `reported` False: the
        provider sent no usage, so the counts are unknown (stored as 0)."""
        t = now()
        c = cost
        async with self.transaction() as db:
            await self._ensure_session(db, session)
            cur = await db.execute(
                """INSERT INTO usage(session_id, group_id, provider, model, prompt_tokens,
                       completion_tokens, cached_tokens, created_at, purpose, reasoning_tokens,
                       reported, cost_input, cost_cached, cost_output, cost_reasoning,
                       cost_saved, cost_total, price_source)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    session,
                    group_id,
                    provider,
                    model,
                    prompt_tokens,
                    completion_tokens,
                    cached_tokens,
                    t,
                    purpose,
                    reasoning_tokens,
                    int(reported),
                    *(
                        (c.input, c.cached, c.output, c.reasoning, c.saved, c.total, c.source)
                        if c is not None
                        else (None,) * 7
                    ),
                ),
            )
            await db.execute(
                """INSERT INTO spend_log(usage_id, model, purpose, prompt_tokens, cached_tokens,
                       completion_tokens, reasoning_tokens, reported, cost_total, cost_saved,
                       created_at)
                   VALUES (?,?,?,?,?,?,?,?,?,?,?)""",
                (
                    cur.lastrowid,
                    model,
                    purpose,
                    prompt_tokens,
                    cached_tokens,
                    completion_tokens,
                    reasoning_tokens,
                    int(reported),
                    c.total if c is not None else None,
                    c.saved if c is not None else None,
                    t,
                ),
            )
        return Usage(
            cur.lastrowid,
            session,
            group_id,
            provider,
            model,
            prompt_tokens,
            completion_tokens,
            cached_tokens,
            t,
            reasoning_tokens,
            reported,
            cost,
            purpose,
        )

    async def background_usage(self, session: str) -> tuple[int, int, int]:
        """(calls, prompt tokens, completion tokens) of the session's background model
        calls: summaries, compaction, topic boundaries, STATE rebuilds."""
        row = await self._one(
            f"""SELECT COUNT(*), COALESCE(SUM(prompt_tokens), 0),
                   COALESCE(SUM(completion_tokens), 0)
               FROM usage WHERE session_id = ? AND purpose != '{PURPOSE_TURN}'""",
            (session,),
        )
        return (row[0], row[1], row[2]) if row else (0, 0, 0)

    async def usage_by_purpose(self, session: str) -> list[tuple[str, int, int, int]]:
        """(purpose, calls, prompt tokens, completion tokens) per purpose of the session."""
        rows = await self._all(
            """SELECT purpose, COUNT(*), SUM(prompt_tokens), SUM(completion_tokens)
               FROM usage WHERE session_id = ? GROUP BY purpose ORDER BY purpose""",
            (session,),
        )
        return [(r[0], r[1], r[2] or 0, r[3] or 0) for r in rows]

    async def usage_totals(self, session: str | None = None) -> list[UsageTotal]:
        where = "WHERE session_id = ?" if session is not None else ""
        rows = await self._all(
            f"""SELECT provider, model, COUNT(*) AS calls, SUM(prompt_tokens) AS p,
                   SUM(completion_tokens) AS c, SUM(cached_tokens) AS k, {_COST_SUMS}
                FROM usage {where}
                GROUP BY provider, model ORDER BY provider, model""",
            (session,) if session is not None else (),
        )
        return [
            UsageTotal(r["provider"], r["model"], r["calls"], r["p"], r["c"], r["k"], *_spend(r, 6))
            for r in rows
        ]

    async def spend(self, session: str) -> Spend:
        """The session's spend: every call, and its background calls apart."""
        row = await self._one(_spend_sql("usage", "session_id = :s"), {"s": session})
        return Spend(row[0], *_spend(row, 1), background=Spend(row[5] or 0, *_spend(row, 6)))

    async def reprice_unknown(
        self,
        models: Sequence[str],
        price: Callable[[str, int, int, int, int], UsageCost | None],
    ) -> dict[str, int]:
        """Give a price to the calls of `models` recorded as "price unknown" (a
        `[prices]` override added since): `price(model, prompt, cached, completion,
        reasoning)` is their cost. Live, trashed and logged rows alike; a row that had
        a price keeps it. How many calls (`spend_log` rows) got one, per model."""
        priced: dict[str, int] = {}
        if not models:
            return priced
        marks = ", ".join("?" * len(models))
        unknown = f"cost_total IS NULL AND reported AND model IN ({marks})"
        tokens = "model, prompt_tokens, cached_tokens, completion_tokens, reasoning_tokens"
        async with self.transaction() as db:
            cur = await db.execute(
                "SELECT 1 FROM pragma_table_info('trash_usage') WHERE name = 'cost_total'"
            )
            tables = ["usage", "trash_usage"] if await cur.fetchone() else ["usage"]
            for table in [*tables, "spend_log"]:
                key = "usage_id" if table == "spend_log" else "id"
                cur = await db.execute(
                    f"SELECT {key}, {tokens} FROM {table} WHERE {unknown}", tuple(models)
                )
                for row in await cur.fetchall():
                    c = price(*row[1:])
                    if c is None:
                        continue
                    if table == "spend_log":
                        priced[row[1]] = priced.get(row[1], 0) + 1
                        await db.execute(
                            "UPDATE spend_log SET cost_total = ?, cost_saved = ? "
                            "WHERE usage_id = ?",
                            (c.total, c.saved, row[0]),
                        )
                        continue
                    await db.execute(
                        f"""UPDATE {table} SET cost_input = ?, cost_cached = ?, cost_output = ?,
                               cost_reasoning = ?, cost_saved = ?, cost_total = ?,
                               price_source = ?
                           WHERE id = ? AND cost_total IS NULL""",
                        (
                            c.input,
                            c.cached,
                            c.output,
                            c.reasoning,
                            c.saved,
                            c.total,
                            c.source,
                            row[0],
                        ),
                    )
        return priced

    async def spend_since(self, since: float) -> Spend:
        """Every call made since `since` (a time stamp), in any session: the day's spend.
        Read from `spend_log`, so a call whose history was cleared, removed or deleted
        from the trash still counts, and one copied with its session counts once."""
        row = await self._one(_spend_sql("spend_log", "created_at >= :t"), {"t": since})
        return Spend(row[0], *_spend(row, 1), background=Spend(row[5] or 0, *_spend(row, 6)))

    async def spend_per_day(self, limit: int = 10) -> list[tuple[str, Spend]]:
        """Every session's calls per local calendar day, newest first (`spend_log`)."""
        rows = await self._all(
            f"""SELECT date(created_at, 'unixepoch', 'localtime') AS k, COUNT(*), {_COST_SUMS}
               FROM spend_log GROUP BY k ORDER BY k DESC LIMIT ?""",
            (limit,),
        )
        return [(r[0], Spend(r[1], *_spend(r, 2))) for r in rows]

    async def spend_by(self, session: str, key: str, limit: int = 10) -> list[tuple[str, Spend]]:
        """The session's spend per `call`, `turn` (group) or `lane`, newest first, at
        most `limit` rows (per day over every session: `spend_per_day`)."""
        lane = (
            "(SELECT m.lane FROM messages m WHERE m.session_id = u.session_id "
            "AND m.group_id = u.group_id ORDER BY m.id LIMIT 1)"
        )
        column = {
            "call": "CAST(u.id AS TEXT)",
            "turn": "COALESCE(CAST(u.group_id AS TEXT), '-')",
            "lane": f"COALESCE({lane}, '-')",
        }[key]
        rows = await self._all(
            f"""SELECT {column} AS k, MAX(u.id) AS newest, COUNT(*), {_COST_SUMS}
               FROM usage u WHERE u.session_id = ? GROUP BY k ORDER BY newest DESC LIMIT ?""",
            (session, limit),
        )
        return [(r[0], Spend(r[2], *_spend(r, 3))) for r in rows]

    async def last_usage(self, session: str) -> Usage | None:
        """The newest provider call of a session (the gauge shows its cached share)."""
        rows = await self.recent_usage(session, 1)
        return rows[0] if rows else None

    async def recent_usage(self, session: str, limit: int = 10) -> list[Usage]:
        """The session's newest provider calls, newest first (`limit` -1: all of them)."""
        rows = await self._all(
            "SELECT * FROM usage WHERE session_id=? ORDER BY id DESC LIMIT ?", (session, limit)
        )
        return [_usage(r) for r in rows]

    async def prompt_token_series(self, session: str, limit: int = 50) -> list[int]:
        """Prompt tokens of the last provider calls, oldest first (the gauge's sparkline)."""
        rows = await self._all(
            "SELECT prompt_tokens FROM usage WHERE session_id=? ORDER BY id DESC LIMIT ?",
            (session, limit),
        )
        return [r[0] for r in reversed(rows)]


__all__ = ["HistoryMixin", "check_session_name", "snippet", "DEFAULT_WINDOW"]
