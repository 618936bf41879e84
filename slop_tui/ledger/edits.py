"""The edit journal and the trash: no edit of the history hard-deletes anything.

Every edit is a row of `edits` (what, when, which session and group, how many
messages, and whether it is still in effect), so it can be inverted:

- `/undo`, `/message remove`, `/retry` move a group to the trash: its messages,
  the STATE versions it wrote, and what was derived from it (the summaries
  whose span holds its rows, marked out of date first, and the handoffs
  written since it began). `/session clear` moves a session's history there,
  `/session remove` the whole session; `/memo remove` and `/skill delete` a
  memo or a skill.
- `/context drop` and `/context restore` change statuses in place (soft drop);
  they are journalled all the same.
- Edits of values (`VALUE_EDIT_KINDS`): a STATE set by hand, a scratchpad
  write (the command, the `SCRATCHPAD:` signal, the tool), `/context
  uncompact`, and the drops the engine makes on its own (the tool exchange a
  provider rejected, a group set aside because it alone cannot fit). `/undo`
  takes the newest one back when it is newer than the last interaction
  (`undo_value_edit`), which puts it on the redo stack; `/redo` makes it again.

The trash keeps rows byte for byte in shadow tables `trash_<table>`: the live
table's columns (same declared types, so every value keeps its type, NULs and
invalid UTF-8 included) plus `trash_edit`, the edit that moved them. A shadow
table is created, or given a column the live table gained, when an edit first
needs it. Because trashed rows leave the live tables, nothing that reads them
(requests, `query_db`, search, summaries, handoffs, exports, counts) can meet
one; `query_db` only has to refuse the `trash_*` tables. Restoring moves the
rows back with their ids (ids are AUTOINCREMENT, never reused), and the
session's totals follow through the message triggers. `/trash empty` deletes
the shadow rows: the only hard delete.

The redo stack is the edits that took something away (undo, remove, drop,
clear, session removal) and are still in effect; `/redo` reverts the newest.
A turn clears the stack when it starts (`open_turn`). It is one stack per
ledger, like the trash: a session removed in one session is brought back from
the one the workspace moved to.

A running turn's group cannot be taken away: `open_turn` writes the prompt
and the turn's in-flight record (ledger/inflight.py) in one transaction, and
every edit that removes, drops or clears checks those records, of this
process and of any other live one, inside its own write transaction.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import replace

from slop_tui.ledger.continuity import ContinuityMixin
from slop_tui.ledger.core import LedgerError, now
from slop_tui.ledger.history import new_prompt
from slop_tui.ledger.inflight import KEY_PREFIX, InflightMixin, owner_alive
from slop_tui.records import (
    EDIT_AUTO_DROP,
    EDIT_CLEAR,
    EDIT_DONE,
    EDIT_DROP,
    EDIT_EMPTIED,
    EDIT_EMPTY,
    EDIT_MEMO_REMOVE,
    EDIT_REMOVE,
    EDIT_RESTORE,
    EDIT_REVERTED,
    EDIT_SCRATCHPAD,
    EDIT_SESSION_REMOVE,
    EDIT_SKILL_REMOVE,
    EDIT_STATE_SET,
    EDIT_TRASH_RESTORE,
    EDIT_UNCOMPACT,
    SESSION_LANE,
    SUMMARY_DISCARDED,
    SUMMARY_VALID,
    VALUE_EDIT_KINDS,
    Edit,
    Message,
    Session,
    StateVersion,
)

TRASH_PREFIX = "trash_"
# Global rows an edit can take to the trash on their own: kind -> (table, label column).
# Their edits belong to no session (`session_id` '').
KNOWLEDGE = {EDIT_MEMO_REMOVE: ("memos", "content"), EDIT_SKILL_REMOVE: ("skills", "name")}
# The session's own settings row: its totals are rebuilt by the message triggers.
_SESSION_TOTALS = ("message_count", "token_total")
# A session's history as `/session clear` takes it (its scratchpad, window and files stay).
CLEARED_TABLES = (
    "messages",
    "usage",
    "state_versions",
    "summaries",
    "compaction_log",
    "handoffs",
)
_EDIT_COLS = (
    "id, session_id, kind, group_id, message_count, state, trashed, redoable, created_at, "
    "'' AS label, group_count, row_id"
)


def _q(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _edit(row) -> Edit:
    return Edit(
        id=row[0],
        session=row[1],
        kind=row[2],
        group_id=row[3],
        messages=row[4],
        state=row[5],
        trashed=bool(row[6]),
        redoable=bool(row[7]),
        created_at=row[8],
        label=row[9] or "",
        groups=row[10],
        row_id=row[11],
    )


class EditsMixin(InflightMixin, ContinuityMixin):
    """Journalled, reversible edits and the trash."""

    # -- shadow tables ---------------------------------------------------------

    async def _columns(self, db, table: str) -> list[tuple[str, str]]:
        cur = await db.execute(f"PRAGMA table_info({_q(table)})")
        return [(r[1], r[2]) for r in await cur.fetchall()]

    async def _shadow(self, db, table: str) -> list[str]:
        """Make `trash_<table>` hold every column of `table`; the live columns."""
        live = await self._columns(db, table)
        shadow = TRASH_PREFIX + table
        have = {name for name, _ in await self._columns(db, shadow)}
        if not have:
            await db.execute(
                f"CREATE TABLE {_q(shadow)} AS SELECT 0 AS trash_edit, * FROM {_q(table)} WHERE 0"
            )
            await db.execute(f"CREATE INDEX {_q('ix_' + shadow)} ON {_q(shadow)}(trash_edit)")
        else:
            for name, declared in live:
                if name not in have:
                    await db.execute(
                        f"ALTER TABLE {_q(shadow)} ADD COLUMN {_q(name)} {declared or ''}"
                    )
        return [name for name, _ in live]

    async def _move(self, db, edit_id: int, table: str, where: str, params: Sequence) -> int:
        """Move the rows of `table` matching `where` into the trash; how many moved."""
        cols = ", ".join(_q(c) for c in await self._shadow(db, table))
        await db.execute(
            f"INSERT INTO {_q(TRASH_PREFIX + table)}(trash_edit, {cols}) "
            f"SELECT ?, {cols} FROM {_q(table)} WHERE {where} ORDER BY rowid",
            (edit_id, *params),
        )
        cur = await db.execute(f"DELETE FROM {_q(table)} WHERE {where}", tuple(params))
        return cur.rowcount

    async def _bring_back(self, db, edit_id: int, table: str, skip: Iterable[str] = ()) -> int:
        """Move an edit's rows of `table` back from the trash; how many came back."""
        shadow = TRASH_PREFIX + table
        have = {name for name, _ in await self._columns(db, shadow)}
        if not have:
            return 0
        left_out = set(skip)
        cols = ", ".join(
            _q(name)
            for name, _ in await self._columns(db, table)
            if name in have and name not in left_out
        )
        # A context file put back into the session meanwhile keeps its newer row.
        verb = "INSERT OR IGNORE" if table == "context_files" else "INSERT"
        cur = await db.execute(
            f"{verb} INTO {_q(table)}({cols}) SELECT {cols} FROM {_q(shadow)} "
            "WHERE trash_edit=? ORDER BY rowid",
            (edit_id,),
        )
        await db.execute(f"DELETE FROM {_q(shadow)} WHERE trash_edit=?", (edit_id,))
        return cur.rowcount

    async def _session_tables(self, db) -> list[str]:
        """Every table that belongs to a session (a foreign key to `sessions`)."""
        cur = await db.execute(
            "SELECT DISTINCT m.name FROM sqlite_master m, pragma_foreign_key_list(m.name) f "
            "WHERE m.type='table' AND f.\"table\"='sessions' ORDER BY m.name"
        )
        names = [r[0] for r in await cur.fetchall()]
        # messages first: every other row of a session hangs off its groups.
        return sorted(names, key=lambda n: n != "messages")

    async def _trash_tables(self, db) -> list[str]:
        cur = await db.execute(
            "SELECT name FROM sqlite_master WHERE type='table' AND name LIKE 'trash\\_%' "
            "ESCAPE '\\' ORDER BY name"
        )
        return [r[0] for r in await cur.fetchall()]

    # -- the journal -------------------------------------------------------------

    async def _journal(
        self,
        db,
        session: str,
        kind: str,
        *,
        group_id: int | None = None,
        messages: int = 0,
        groups: int = 0,
        trashed: bool = False,
        redoable: bool = False,
        row_id: int | None = None,
        before: str | None = None,
        after: str | None = None,
    ) -> int:
        cur = await db.execute(
            """INSERT INTO edits(session_id, kind, group_id, message_count, group_count,
                   trashed, redoable, created_at, row_id, before_value, after_value)
               VALUES (?,?,?,?,?,?,?,?,?,?,?)""",
            (
                session,
                kind,
                group_id,
                messages,
                groups,
                int(trashed),
                int(redoable),
                now(),
                row_id,
                before,
                after,
            ),
        )
        return cur.lastrowid

    async def _reverted(self, db, edit_id: int, by: int) -> None:
        """`edit_id` is no longer in effect: edit `by` reverted it."""
        await db.execute(
            "UPDATE edits SET state=?, redoable=0 WHERE id=?", (EDIT_REVERTED, edit_id)
        )
        await db.execute("UPDATE edits SET reverts=? WHERE id=?", (edit_id, by))

    async def get_edit(self, edit_id: int) -> Edit | None:
        rows = await self._labelled(f"SELECT {_EDIT_COLS} FROM edits WHERE id=?", (edit_id,))
        return rows[0] if rows else None

    async def edits(self, session: str | None = None, limit: int = 50) -> list[Edit]:
        """The journal, newest first (of one session, or of the whole ledger)."""
        where = "WHERE session_id=?" if session is not None else ""
        params: tuple = (session,) if session is not None else ()
        return await self._labelled(
            f"SELECT {_EDIT_COLS} FROM edits {where} ORDER BY id DESC LIMIT ?",
            (*params, limit if limit > 0 else -1),
        )

    async def trash(self, limit: int = 50) -> list[Edit]:
        """What the trash holds (edits whose rows are there), newest first."""
        return await self._labelled(
            f"SELECT {_EDIT_COLS} FROM edits WHERE trashed=1 AND state='{EDIT_DONE}' "
            "ORDER BY id DESC LIMIT ?",
            (limit if limit > 0 else -1,),
        )

    async def _labelled(self, sql: str, params: Sequence) -> list[Edit]:
        edits = [_edit(r) for r in await self._tuples(sql, params)]
        out = []
        for e in edits:
            label = ""
            if e.group_id is not None:
                label = await self._prompt_text(e.id, e.group_id)
            elif e.kind == EDIT_SESSION_REMOVE or e.kind == EDIT_CLEAR:
                label = await self._prompt_text(e.id, None)
            elif e.kind in KNOWLEDGE:
                label = await self._knowledge_label(e, *KNOWLEDGE[e.kind])
            out.append(replace(e, label=label))
        return out

    async def _prompt_text(self, edit_id: int, group_id: int | None) -> str:
        """The prompt of an edit's group (live or in the trash), or its first prompt."""
        shadow = TRASH_PREFIX + "messages"
        exists = await self._one(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (shadow,)
        )
        if group_id is not None:
            row = await self._one("SELECT content FROM messages WHERE id=?", (group_id,))
            if row is None and exists:
                row = await self._one(
                    f"SELECT content FROM {_q(shadow)} WHERE trash_edit=? AND id=?",
                    (edit_id, group_id),
                )
        else:
            row = None
            if exists:
                row = await self._one(
                    f"SELECT content FROM {_q(shadow)} WHERE trash_edit=? AND role='user' "
                    "ORDER BY id LIMIT 1",
                    (edit_id,),
                )
        return row[0] if row else ""

    async def _knowledge_label(self, edit: Edit, table: str, column: str) -> str:
        """The text of a memo or skill an edit took away (in the trash, or back live)."""
        shadow = TRASH_PREFIX + table
        if await self._one("SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (shadow,)):
            row = await self._one(
                f"SELECT {_q(column)} FROM {_q(shadow)} WHERE trash_edit=? LIMIT 1", (edit.id,)
            )
            if row is not None:
                return row[0]
        row = await self._one(f"SELECT {_q(column)} FROM {_q(table)} WHERE id=?", (edit.row_id,))
        return row[0] if row else ""

    async def trash_knowledge(self, kind: str, row_id: int) -> Edit | None:
        """`/memo remove`, `/skill delete`: the memo or skill to the trash, journalled
        and on the redo stack like a group; None if there is no such row."""
        table, _ = KNOWLEDGE[kind]
        async with self.transaction() as db:
            cur = await db.execute(f"SELECT 1 FROM {_q(table)} WHERE id=?", (row_id,))
            if await cur.fetchone() is None:
                return None
            edit = await self._journal(db, "", kind, trashed=True, redoable=True)
            await db.execute("UPDATE edits SET row_id=? WHERE id=?", (row_id, edit))
            await self._move(db, edit, table, "id=?", (row_id,))
        return await self.get_edit(edit)

    async def trashed_message_ids(self) -> list[int]:
        """Ids of every message in the trash (recoverable with /trash restore)."""
        shadow = TRASH_PREFIX + "messages"
        if not await self._one(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (shadow,)
        ):
            return []
        return [r[0] for r in await self._tuples(f"SELECT id FROM {_q(shadow)} ORDER BY id")]

    # -- turns -----------------------------------------------------------------------

    async def open_turn(
        self,
        session: str,
        text: str,
        *,
        strategy: str | None = None,
        reply_to: int | None = None,
    ) -> Message:
        """Write the prompt that starts a turn, in one transaction with the turn's
        in-flight record (so no edit can take its group away while it runs) and
        the clearing of the redo stack (a new turn ends what /redo can bring back).
        `reply_to` as for `append_user`."""
        (prompt,) = await self._counted([new_prompt(text, strategy, reply_to)])
        async with self.transaction() as db:
            gid = await self._write_prompt(db, session, prompt, None)
            await self._write_inflight(db, session, gid, strategy)
            await db.execute("UPDATE edits SET redoable=0 WHERE redoable=1")
        msg = await self.get_message(gid)
        assert msg is not None
        return msg

    async def _refuse_running(self, db, session: str, groups: set[int] | None) -> None:
        """LedgerError when a turn of `session` (of one of `groups`; None: any) runs."""
        cur = await db.execute(
            "SELECT value FROM app_state WHERE key >= ? AND key < ?",
            (KEY_PREFIX, KEY_PREFIX[:-1] + chr(ord(KEY_PREFIX[-1]) + 1)),
        )
        for (value,) in await cur.fetchall():
            try:
                record = json.loads(value)
            except ValueError:
                continue
            if not isinstance(record, dict) or record.get("session") != session:
                continue
            gid = record.get("group")
            if groups is not None and gid not in groups:
                continue
            if not owner_alive(record):
                continue
            if record.get("pid") == os.getpid():
                where = "cancel it first (Esc in the workspace), then try again."
            else:
                where = (
                    f"it runs in another slop-tui process (pid {record.get('pid')}); "
                    "wait for it to end or cancel it there, then try again."
                )
            raise LedgerError(f"group {gid}'s turn is still running in '{session}'; {where}")

    async def set_lane(self, name: str, lane: str):  # type: ignore[override]
        """Switch the session's lane, but not while one of its turns runs: the turn's
        next request (a tool loop's) is assembled from the session's lane, and its
        own group would be missing from it."""

        async def no_turn_running(db) -> None:
            await self._refuse_running(db, name, None)

        return await self._update_session(name, "lane", lane, no_turn_running)

    # -- groups ------------------------------------------------------------------------

    async def trash_group(
        self, session: str, group_id: int, kind: str = EDIT_REMOVE, *, redoable: bool = True
    ) -> Edit | None:
        """Move a group to the trash (see the module docstring); None if there is none."""
        async with self.transaction() as db:
            cur = await db.execute(
                "SELECT COUNT(*), MIN(created_at) FROM messages WHERE session_id=? AND group_id=?",
                (session, group_id),
            )
            count, began = await cur.fetchone()
            if not count:
                return None
            await self._refuse_running(db, session, {group_id})
            edit = await self._journal(
                db,
                session,
                kind,
                group_id=group_id,
                messages=count,
                groups=1,
                trashed=True,
                redoable=redoable,
            )
            await self._withdraw_summaries(db, session, edit, group_id)
            await self._move(
                db, edit, "handoffs", "session_id=? AND created_at>=?", (session, began)
            )
            await self._move(
                db, edit, "state_versions", "session_id=? AND group_id=?", (session, group_id)
            )
            await self._move(
                db, edit, "messages", "session_id=? AND group_id=?", (session, group_id)
            )
        return await self._found(edit)

    async def _withdraw_summaries(self, db, session: str, edit: int, group_id: int) -> None:
        """Summaries made from the group's rows go to the trash with it.

        Every summary the edit takes out of date is marked so first
        (`_history_changed`, the one place an edit tells what was derived from
        the history); those whose span holds a row of the group were made from
        its text, so they leave the live table: no request, `query_db` or later
        roll can meet them. Restoring the group brings them back out of date
        (a cache: the plan sends the rows until a new summary is made)."""
        await self._history_changed(db, session, [group_id])
        cur = await db.execute(
            "SELECT lane, MIN(id), MAX(id) FROM messages WHERE session_id=? AND group_id=? "
            "GROUP BY lane",
            (session, group_id),
        )
        for lane, first, last in await cur.fetchall():
            await self._move(
                db,
                edit,
                "summaries",
                "session_id=? AND lane=? AND first_message_id<=? AND last_message_id>=?",
                (session, lane, last, first),
            )

    async def stale_top(self, session: str, lane: str) -> int | None:
        """As `ContinuityMixin.stale_top`, counting the summaries an edit still in effect
        took to the trash with its group: the rows they stood for are summarized again
        at once, as for a summary marked out of date in place."""
        top = await super().stale_top(session, lane)
        shadow = TRASH_PREFIX + "summaries"
        if not await self._one(
            "SELECT 1 FROM sqlite_master WHERE type='table' AND name=?", (shadow,)
        ):
            return top
        row = await self._one(
            f"SELECT MAX(s.last_message_id) FROM {_q(shadow)} s JOIN edits e "
            f"ON e.id = s.trash_edit WHERE s.session_id=? AND s.lane=? AND e.state='{EDIT_DONE}'",
            (session, lane),
        )
        trashed = row[0] if row else None
        if trashed is None:
            return top
        return trashed if top is None else max(top, trashed)

    async def remove_group(self, session: str, group_id: int) -> int:
        """`/message remove`: the group to the trash; how many messages moved."""
        edit = await self.trash_group(session, group_id, EDIT_REMOVE)
        return edit.messages if edit else 0

    async def drop_group(self, session: str, group_id: int, dropped: bool) -> int:
        """`/context drop|restore`, journalled: a drop goes on the redo stack, a restore
        reverts the group's drop that is still in effect. Rows changed (0: nothing)."""
        async with self.transaction() as db:
            if dropped:
                await self._refuse_running(db, session, {group_id})
            changed = await self._set_dropped(db, session, group_id, dropped)
            if not changed:
                return 0
            kind = EDIT_DROP if dropped else EDIT_RESTORE
            edit = await self._journal(
                db, session, kind, group_id=group_id, messages=changed, groups=1, redoable=dropped
            )
            if not dropped:
                cur = await db.execute(
                    f"SELECT id FROM edits WHERE session_id=? AND group_id=? AND kind='{EDIT_DROP}' "
                    f"AND state='{EDIT_DONE}'",
                    (session, group_id),
                )
                for (drop_id,) in await cur.fetchall():
                    await self._reverted(db, drop_id, edit)
            return changed

    # -- sessions ------------------------------------------------------------------------

    async def clear_session(self, name: str) -> Edit | None:
        """`/session clear`: the session's history to the trash (see `CLEARED_TABLES`);
        None when it had nothing to clear."""
        async with self.transaction() as db:
            counts = await self._history_counts(db, name)
            cur = await db.execute(
                " UNION ALL ".join(
                    f"SELECT 1 FROM {_q(t)} WHERE session_id=:s" for t in CLEARED_TABLES
                )
                + " LIMIT 1",
                {"s": name},
            )
            if await cur.fetchone() is None:
                return None
            await self._refuse_running(db, name, None)
            edit = await self._journal(
                db,
                name,
                EDIT_CLEAR,
                messages=counts[0],
                groups=counts[1],
                trashed=True,
                redoable=True,
            )
            for table in CLEARED_TABLES:
                await self._move(db, edit, table, "session_id=?", (name,))
        return await self.get_edit(edit)

    async def _history_counts(self, db, session: str) -> tuple[int, int]:
        cur = await db.execute(
            "SELECT COUNT(*), COUNT(DISTINCT group_id) FROM messages WHERE session_id=?",
            (session,),
        )
        messages, groups = await cur.fetchone()
        return messages, groups

    async def trash_session(self, name: str) -> Edit | None:
        """`/session remove`: the whole session to the trash; None if there is none."""
        async with self.transaction() as db:
            cur = await db.execute("SELECT 1 FROM sessions WHERE name=?", (name,))
            if await cur.fetchone() is None:
                return None
            await self._refuse_running(db, name, None)
            messages, groups = await self._history_counts(db, name)
            edit = await self._journal(
                db,
                name,
                EDIT_SESSION_REMOVE,
                messages=messages,
                groups=groups,
                trashed=True,
                redoable=True,
            )
            for table in await self._session_tables(db):
                await self._move(db, edit, table, "session_id=?", (name,))
            await self._move(db, edit, "sessions", "name=?", (name,))
        return await self.get_edit(edit)

    async def remove_session(self, name: str) -> bool:
        return await self.trash_session(name) is not None

    # -- reverting ------------------------------------------------------------------------

    async def restore_edit(self, edit_id: int) -> Edit:
        """`/trash restore ID`: move an edit's rows back; the restoring edit.

        A removed session comes back under its name; if a session of that name was
        started since, the history joins it (ids never collide). A group or a
        cleared history needs its session: one that is itself in the trash is
        restored first.
        """
        async with self.transaction() as db:
            cur = await db.execute(
                "SELECT session_id, kind, trashed, state, group_id FROM edits WHERE id=?",
                (edit_id,),
            )
            row = await cur.fetchone()
            if row is None or not row[2]:
                raise LedgerError(f"the trash has no entry {edit_id}; /trash list shows it.")
            session, kind, _, state, group_id = row
            if state == EDIT_REVERTED:
                raise LedgerError(f"trash entry {edit_id} was restored already.")
            if state == EDIT_EMPTIED:
                raise LedgerError(f"trash entry {edit_id} was deleted by /trash empty.")
            if kind in KNOWLEDGE:
                by = await self._restore_knowledge(db, edit_id, kind)
            else:
                by = await self._restore_history(db, edit_id, session, kind, group_id)
            await self._reverted(db, edit_id, by)
        return await self._found(by)

    async def _restore_history(
        self, db, edit_id: int, session: str, kind: str, group_id: int | None
    ) -> int:
        """A group, a cleared history or a session back from the trash (inside
        `restore_edit`'s transaction); the restoring edit's id."""
        cur = await db.execute("SELECT 1 FROM sessions WHERE name=?", (session,))
        session_exists = await cur.fetchone() is not None
        if kind == EDIT_SESSION_REMOVE:
            if session_exists:  # a new session of that name: the history joins it
                await db.execute(
                    f"DELETE FROM {_q(TRASH_PREFIX + 'sessions')} WHERE trash_edit=?",
                    (edit_id,),
                )
            else:
                await self._bring_back(db, edit_id, "sessions", skip=_SESSION_TOTALS)
        elif not session_exists:
            cur = await db.execute(
                f"SELECT id FROM edits WHERE session_id=? AND kind='{EDIT_SESSION_REMOVE}' "
                f"AND state='{EDIT_DONE}' ORDER BY id DESC LIMIT 1",
                (session,),
            )
            holder = await cur.fetchone()
            where = f" (trash entry {holder[0]})" if holder else ""
            raise LedgerError(
                f"session '{session}' is not there any more{where}; restore it first."
            )
        moved = await self._bring_back(db, edit_id, "messages")
        if group_id is not None and moved:
            # A summary made while the group was away does not hold it.
            await self._history_changed(db, session, [group_id])
        for shadow in await self._trash_tables(db):
            table = shadow[len(TRASH_PREFIX) :]
            if table not in ("sessions", "messages"):
                await self._bring_back(db, edit_id, table)
        await db.execute("UPDATE sessions SET updated_at=? WHERE name=?", (now(), session))
        return await self._journal(db, session, EDIT_TRASH_RESTORE, messages=moved)

    async def _restore_knowledge(self, db, edit_id: int, kind: str) -> int:
        """A memo or skill back from the trash with its id; the restoring edit's id."""
        table, _ = KNOWLEDGE[kind]
        if kind == EDIT_SKILL_REMOVE:
            cur = await db.execute(
                f"SELECT t.name FROM {_q(TRASH_PREFIX + table)} t JOIN skills s ON s.name = t.name "
                "WHERE t.trash_edit=?",
                (edit_id,),
            )
            if (taken := await cur.fetchone()) is not None:
                raise LedgerError(
                    f"a skill named '{taken[0]}' exists again; rename or delete it, then "
                    f"restore trash entry {edit_id}."
                )
        await self._bring_back(db, edit_id, table)
        return await self._journal(db, "", EDIT_TRASH_RESTORE)

    async def _found(self, edit_id: int) -> Edit:
        found = await self.get_edit(edit_id)
        assert found is not None
        return found

    # -- edits of values -------------------------------------------------------------------

    async def set_state_by_hand(self, session: str, content: str) -> StateVersion:
        """`/state set`: a new STATE version without a group, journalled."""
        t = now()
        async with self.transaction() as db:
            await self._ensure_session(db, session)
            cur = await db.execute(
                "INSERT INTO state_versions(session_id, group_id, content, created_at) "
                "VALUES (?,?,?,?)",
                (session, None, content, t),
            )
            sid = cur.lastrowid
            await self._journal(db, session, EDIT_STATE_SET, row_id=sid)
        return StateVersion(sid, session, None, content, t)

    async def set_scratchpad(self, name: str, text: str) -> Session:  # type: ignore[override]
        """A scratchpad write, journalled (what it replaced and what it wrote)."""
        async with self.transaction() as db:
            await self._ensure_session(db, name)
            cur = await db.execute("SELECT scratchpad FROM sessions WHERE name=?", (name,))
            before = (await cur.fetchone())[0]
            if before != text:
                await db.execute(
                    "UPDATE sessions SET scratchpad=?, updated_at=? WHERE name=?",
                    (text, now(), name),
                )
                await self._journal(db, name, EDIT_SCRATCHPAD, before=before, after=text)
        return await self.session_or_default(name)

    async def discard_summary(self, session: str, summary_id: int) -> int:
        """`/context uncompact`, journalled: the summary and every later valid one of its
        lane are discarded, and every later session summary (made from it); how many."""
        async with self.transaction() as db:
            row = await self._summary_row(db, session, summary_id)
            cur = await db.execute(
                f"SELECT id FROM summaries WHERE session_id=? AND lane IN (?, ?) "
                f"AND superseded = {SUMMARY_VALID} AND (id = ? OR id > ?) ORDER BY id",
                (session, row["lane"], SESSION_LANE, summary_id, summary_id),
            )
            ids = [r[0] for r in await cur.fetchall()]
            if not ids:
                return 0
            await self._set_summaries(db, ids, SUMMARY_DISCARDED)
            await self._journal(
                db, session, EDIT_UNCOMPACT, row_id=summary_id, after=json.dumps(ids)
            )
            return len(ids)

    async def _set_summaries(self, db, ids: Sequence[int], state: int) -> None:
        marks = ",".join("?" * len(ids))
        await db.execute(f"UPDATE summaries SET superseded=? WHERE id IN ({marks})", (state, *ids))

    async def set_aside_group(self, session: str, group_id: int) -> int:
        """The engine drops a group on its own (it alone cannot fit), journalled; rows
        changed."""
        async with self.transaction() as db:
            changed = await self._set_dropped(db, session, group_id, True)
            if changed:
                await self._journal(
                    db, session, EDIT_AUTO_DROP, group_id=group_id, messages=changed, groups=1
                )
            return changed

    async def auto_drop_messages(self, session: str, ids: Sequence[int]) -> int:
        """The engine drops rows on its own (a tool exchange the provider rejected),
        journalled with each row's status before; rows changed."""
        if not ids:
            return 0
        async with self.transaction() as db:
            marks = ",".join("?" * len(ids))
            cur = await db.execute(
                f"SELECT id, status FROM messages WHERE session_id=? AND id IN ({marks}) "
                "AND status != 'dropped'",
                (session, *ids),
            )
            before = {str(i): status for i, status in await cur.fetchall()}
            if not before:
                return 0
            await self._mark_dropped(db, [int(i) for i in before])
            await self._journal(
                db, session, EDIT_AUTO_DROP, messages=len(before), after=json.dumps(before)
            )
            return len(before)

    async def _mark_dropped(self, db, ids: Sequence[int]) -> None:
        marks = ",".join("?" * len(ids))
        await db.execute(
            f"UPDATE messages SET status_before=status, status='dropped' WHERE id IN ({marks})",
            tuple(ids),
        )

    async def undo_value_edit(self, session: str) -> Edit | None:
        """`/undo` of an edit of a value: the newest one of `session` still in effect, when
        it is newer than the session's last message (else None: /undo takes the last
        interaction back). It goes on the redo stack."""
        row = await self._one(
            "SELECT id, kind, group_id, row_id, before_value, after_value, created_at "
            "FROM edits WHERE session_id=? AND state='done' AND kind IN ("
            + ",".join(f"'{k}'" for k in VALUE_EDIT_KINDS)
            + ") ORDER BY id DESC LIMIT 1",
            (session,),
        )
        if row is None:
            return None
        edit_id, kind, group_id, row_id, before, after, at = row
        newest = await self._one(
            "SELECT MAX(created_at) FROM messages WHERE session_id=?", (session,)
        )
        if newest is not None and newest[0] is not None and newest[0] > at:
            return None
        async with self.transaction() as db:
            await self._apply_value_edit(
                db, session, edit_id, kind, group_id, before, after, undo=True
            )
            await db.execute(
                f"UPDATE edits SET state='{EDIT_REVERTED}', redoable=1 WHERE id=?", (edit_id,)
            )
        return await self._found(edit_id)

    async def _apply_value_edit(
        self,
        db,
        session: str,
        edit_id: int,
        kind: str,
        group_id: int | None,
        before: str | None,
        after: str | None,
        *,
        undo: bool,
    ) -> None:
        """Take an edit of a value back (`undo`) or make it again."""
        if kind == EDIT_STATE_SET:
            if undo:
                row = await db.execute("SELECT row_id FROM edits WHERE id=?", (edit_id,))
                (version,) = await row.fetchone()
                await self._move(db, edit_id, "state_versions", "id=?", (version,))
            else:
                await self._bring_back(db, edit_id, "state_versions")
        elif kind == EDIT_SCRATCHPAD:
            await db.execute(
                "UPDATE sessions SET scratchpad=?, updated_at=? WHERE name=?",
                ((before if undo else after) or "", now(), session),
            )
        elif kind == EDIT_UNCOMPACT:
            ids = [int(i) for i in json.loads(after or "[]")]
            if ids:
                await self._set_summaries(db, ids, SUMMARY_VALID if undo else SUMMARY_DISCARDED)
        elif kind == EDIT_AUTO_DROP and group_id is not None:
            await self._set_dropped(db, session, group_id, not undo)
        elif kind == EDIT_AUTO_DROP:
            statuses = {int(k): v for k, v in json.loads(after or "{}").items()}
            if undo:
                for mid, status in statuses.items():
                    await db.execute(
                        "UPDATE messages SET status=? WHERE id=? AND status='dropped'",
                        (status, mid),
                    )
            else:
                await self._mark_dropped(db, list(statuses))

    async def redo(self) -> Edit | None:
        """`/redo`: revert the newest edit on the redo stack; that edit (None: empty stack).
        An edit of a value that /undo took back is made again."""
        row = await self._one(
            "SELECT id, session_id, kind, group_id, before_value, after_value FROM edits "
            "WHERE redoable=1 ORDER BY id DESC LIMIT 1"
        )
        if row is None:
            return None
        edit_id, session, kind, group_id, before, after = row
        if kind in VALUE_EDIT_KINDS:
            async with self.transaction() as db:
                await self._apply_value_edit(
                    db, session, edit_id, kind, group_id, before, after, undo=False
                )
                await db.execute(
                    f"UPDATE edits SET state='{EDIT_DONE}', redoable=0 WHERE id=?", (edit_id,)
                )
            return await self._found(edit_id)
        if kind == EDIT_DROP:
            async with self.transaction() as db:
                changed = await self._set_dropped(db, session, group_id, False)
                by = await self._journal(
                    db,
                    session,
                    EDIT_RESTORE,
                    group_id=group_id,
                    messages=changed,
                    groups=1 if changed else 0,
                )
                await self._reverted(db, edit_id, by)
        else:
            await self.restore_edit(edit_id)
        return await self._found(edit_id)

    async def empty_trash(self) -> Edit | None:
        """`/trash empty`: delete every trashed row for good (the only hard delete);
        the journal keeps what was there. None when the trash was empty."""
        async with self.transaction() as db:
            cur = await db.execute(
                f"SELECT COUNT(*), COALESCE(SUM(message_count), 0) FROM edits "
                f"WHERE trashed=1 AND state='{EDIT_DONE}'"
            )
            entries, messages = await cur.fetchone()
            if not entries:
                return None
            for shadow in await self._trash_tables(db):
                await db.execute(f"DELETE FROM {_q(shadow)}")
            await db.execute(
                f"UPDATE edits SET state='{EDIT_EMPTIED}', redoable=0 "
                f"WHERE trashed=1 AND state='{EDIT_DONE}'"
            )
            edit = await self._journal(db, "", EDIT_EMPTY, messages=messages, groups=entries)
        return await self.get_edit(edit)


__all__ = ["CLEARED_TABLES", "KNOWLEDGE", "EditsMixin", "TRASH_PREFIX"]
